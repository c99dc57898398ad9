"""``--executor ray`` on a real local Ray cluster declaring 4 logical GPUs (one cluster for the module; the
commands run in-process and use it, or join it by its address from a subprocess)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from parity.testing import invoke  # noqa: E402

PY = sys.executable

# records the iteration, its CUDA_VISIBLE_DEVICES and its start/end times; fails iterations listed in FAIL
RECORD = """import json, os, sys, time
start = time.time()
time.sleep(float(os.environ.get("SLEEP", "0.3")))
i = int(os.environ["PARITY_DEBUG_ITERATION"])
with open("seen.jsonl", "a") as f:
    f.write(json.dumps({"i": i, "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"), "start": start, "end": time.time()}) + "\\n")
sys.exit(1 if str(i) in os.environ.get("FAIL", "").split(",") else 0)
"""

# kills its Ray worker (the actor process, its parent) mid-check: the first time only, or every time
KILLER = """import os, signal, sys
if os.environ.get("ALWAYS") or not os.path.exists("killed.once"):
    open("killed.once", "w").close()
    os.kill(os.getppid(), signal.SIGKILL)
    import time; time.sleep(30)
sys.exit(0)
"""


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, num_gpus=4, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


@pytest.fixture(autouse=True)
def _workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for key in ("FAIL", "SLEEP", "ALWAYS"):
        monkeypatch.delenv(key, raising=False)
    (tmp_path / "record.py").write_text(RECORD)
    (tmp_path / "killer.py").write_text(KILLER)
    yield tmp_path


def seen() -> list[dict]:
    return [json.loads(line) for line in Path("seen.jsonl").read_text().splitlines()]


def report(path: str) -> dict:
    data = json.loads(Path(path).read_text())
    return {"exit_code": data["exit_code"], "result": data.get("result"), "checks": sorted((c["key"], c["verdict"]) for c in data["checks"])}


def test_each_concurrent_check_sees_its_own_gpu(cluster):
    res = invoke("debug", "repeat", "--until", "4", "--executor", "ray", "--jobs", "4", "--gpus-per-check", "1", "--check", PY, "-S", "record.py", env={"SLEEP": "1.5"})
    assert res.exit_code == 0, res.stdout + res.stderr
    rows = seen()
    assert len(rows) == 4 and all(r["cuda"] not in (None, "") for r in rows)
    latest_start, earliest_end = max(r["start"] for r in rows), min(r["end"] for r in rows)
    assert latest_start < earliest_end  # the four ran at the same time ...
    assert len({r["cuda"] for r in rows}) == 4  # ... each on a GPU of its own


def test_too_many_gpus_per_check_is_refused(cluster):
    res = invoke("debug", "repeat", "--until", "1", "--executor", "ray", "--gpus-per-check", "8", "--check", "true")
    assert res.exit_code == 2 and "the Ray cluster has 4 GPU(s)" in (res.stdout + res.stderr)


@pytest.mark.parametrize("until", ["bad", "5"])
def test_repeat_gives_the_local_executors_results(cluster, until):
    runs = {}
    for name, executor in (("local", ["--jobs", "3"]), ("serial", []), ("ray", ["--executor", "ray", "--jobs", "3"])):
        res = invoke("debug", "repeat", "--until", until, "--report", f"{name}.json", *executor, "--check", PY, "-S", "record.py", env={"FAIL": "1,4", "SLEEP": "0.05"})
        assert res.exit_code == 1, res.stdout + res.stderr
        runs[name] = report(f"{name}.json")
    assert runs["local"]["result"] == runs["serial"]["result"] == runs["ray"]["result"]
    assert runs["local"]["checks"] == runs["ray"]["checks"] == runs["serial"]["checks"]  # the iterations used
    if until == "bad":  # stops at the first bad verdict in iteration order: N1; N2 of its batch ran but does not count
        assert runs["ray"]["result"]["iterations"] == 2 and runs["ray"]["result"]["bad"] == 1


# fails (exit 1) iff an odd number of the nodes named in argv[2:] are in the model: not monotone, so only a search
# that uses the serial search's verdicts, whatever the parallelism, finds the serial answer
ODD = """import sys
data = open(sys.argv[1], 'rb').read()
sys.exit(1 if sum(b'\\x1a' + bytes([len(n)]) + n.encode() in data for n in sys.argv[2:]) % 2 else 0)
"""


@pytest.mark.parametrize("mode", ["ddmin", "dichotomic"])
def test_reduce_gives_the_serial_result(cluster, mode):
    import onnx
    from parity_reduce.testing import chain

    onnx.save(chain(40), "chain.onnx")
    Path("odd.py").write_text(ODD)
    nodes, used = {}, {}
    for name, executor in (("serial", []), ("local", ["--jobs", "2"]), ("ray", ["--executor", "ray", "--jobs", "4"])):
        args = ["debug", "reduce", "chain.onnx", "-o", f"{name}.onnx", "--no-repro", "--mode", mode, "--report", f"{name}.json", *executor]
        res = invoke(*args, "--check", PY, "-S", "odd.py", "parity_debug.onnx", "n7", "n13", "n30")
        assert res.exit_code == 0, res.stdout + res.stderr
        nodes[name] = sorted(n.name for n in onnx.load(f"{name}.onnx").graph.node)
        used[name] = [(c["key"], c["verdict"]) for c in json.loads(Path(f"{name}.json").read_text())["checks"]]  # in order
    assert nodes["local"] == nodes["ray"] == nodes["serial"]
    assert used["local"] == used["ray"] == used["serial"]


def test_a_lost_worker_reruns_the_check_once(cluster):
    res = invoke("debug", "repeat", "--until", "1", "--executor", "ray", "--report", "r.json", "--check", PY, "-S", "killer.py")
    assert res.exit_code == 0 and "rerun: its first Ray worker was lost" in (res.stdout + res.stderr), res.stdout + res.stderr
    res = invoke("debug", "repeat", "--until", "2", "--executor", "ray", "--report", "r2.json", "--check", PY, "-S", "killer.py", env={"ALWAYS": "1"})
    assert res.exit_code == 3, res.stdout + res.stderr  # lost twice: unresolved, never bad
    assert {c["verdict"] for c in json.loads(Path("r2.json").read_text())["checks"]} == {"unresolved"}


def test_resume_after_the_driver_is_killed(cluster, tmp_path):
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PARITY_")}, "SLEEP": "0.6", "FAIL": "5"}
    args = [PY, "-m", "parity", "debug", "repeat", "--until", "8", "--executor", "ray", "--ray-address", cluster, "--jobs", "2", "--check", PY, "-S", "record.py"]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    state = tmp_path / "parity_debug.artifact.state.json"
    deadline = time.time() + 90
    while time.time() < deadline:
        if state.exists() and sum(v is not None for v in json.loads(state.read_text() or "{}").get("verdicts", {}).values()) >= 2:
            break
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done = len(json.loads(state.read_text())["verdicts"])
    assert 2 <= done < 8
    again = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 1, again.stdout + again.stderr
    assert "resuming from" in again.stderr and f"{done} verdict(s) recorded" in again.stderr
    assert "Finished 8 check(s)" in again.stdout and "bad: 1, good: 7" in again.stdout
    assert not state.exists()


# --- models with external data on workers that cannot see the driver's files -----------------------------------------


def external_model(folder: Path, name: str = "cand.onnx", weights: str = "weights.bin", scale: float = 2.0) -> Path:
    """A two-node model whose two initializers are in one external data file beside it."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.full((4,), scale, np.float32), "w")
    b = numpy_helper.from_array(np.arange(4, dtype=np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "w"], ["t"]), helper.make_node("Add", ["t", "b"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [w, b],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save_model(model, str(folder / name), save_as_external_data=True, all_tensors_to_one_file=True, location=weights, size_threshold=0)
    return folder / name


def external_job(token: str):
    """The job `parity run TOKEN --onnxrt` as debug reduce makes it (in-process parity run, the artifact in job.files)."""
    from parity.api import CommandCheck, Iteration
    from parity.cli import main

    check = CommandCheck(["parity", "run", "parity_debug.onnx", "--onnxrt"], program=main)
    job = check.job(Iteration(0, "k", token, "parity_debug.onnx"))
    job.cwd = os.getcwd()
    assert job.files == {token: token} and job.in_process
    return check, job


def test_a_remote_worker_gets_a_models_external_data_once(cluster, tmp_path):
    from parity_ray.executor import DataCache, FileShipper, run_job

    external_model(tmp_path / "work", "a.onnx")
    shutil.copy("work/a.onnx", "work/b.onnx")  # two candidates sharing one data file, as debug reduce writes them
    shipper = FileShipper(ray.put, chunk_bytes=16)  # 32 bytes of weights: two chunks
    jobs = [external_job(f"work/{n}.onnx") for n in "ab"]
    shipped = [shipper.ship(job) for _, job in jobs]
    assert shipper.puts == 2  # the data file went once, in two chunks, for both checks
    (tmp_path / "work").rename(tmp_path / "gone")  # the worker cannot see the driver's files
    cache = DataCache(tmp_path / "cache")
    for (check, job), files in zip(jobs, shipped):
        run = run_job(job, [files], cache)
        assert run.code == 0, run.output
        assert not check.finish(job, run).bad
    assert cache.fetched == 1  # fetched once, kept for the next check
    assert sorted(p.name for p in (tmp_path / "cache").rglob("*")) == ["0", "weights.bin"]  # the models removed after their check
    cache.close()
    assert not (tmp_path / "cache").exists()


def test_a_data_file_missing_on_the_driver_is_unresolved(cluster, tmp_path):
    from parity_ray.executor import FileShipper, run_job

    external_model(tmp_path / "work", "a.onnx")
    os.remove("work/weights.bin")
    check, job = external_job("work/a.onnx")
    shipped = FileShipper(ray.put).ship(job)
    (tmp_path / "work").rename(tmp_path / "gone")
    outcome = check.finish(job, run_job(job, [shipped]))
    assert outcome.unresolved and not outcome.bad
    assert "cannot find its input" in outcome.note and "weights.bin: No such file or directory" in outcome.note
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("parity-ray")] == []


@pytest.mark.parametrize("end", ["close", "cancel"])
def test_an_actor_refetches_a_changed_data_file_and_removes_its_folder_at_close(cluster, tmp_path, end):
    from parity_ray.executor import RayExecutor

    executor = RayExecutor(jobs=1)
    try:
        folder = Path(executor.workers()[0]["folder"])
        actor = executor._actors[0]
        external_model(tmp_path / "work", "a.onnx")
        check, job = external_job("work/a.onnx")
        first = executor._shipper.ship(job)  # as run_check does on a cluster of several nodes
        time.sleep(0.01)
        external_model(tmp_path / "work", "a.onnx", scale=3.0)  # onnx appends to weights.bin: it grows, as debug precision's do
        second = executor._shipper.ship(job)
        assert executor._shipper.puts == 2  # shipped again: another (size, mtime)
        (tmp_path / "work").rename(tmp_path / "gone")
        for files in (first, second, second):
            run = ray.get(actor.run.remote(job, [files]))
            assert run.code == 0, run.output
        assert [p.name for p in folder.rglob("*")] == ["0", "weights.bin"]
        assert (folder / "0" / "weights.bin").read_bytes() == (tmp_path / "gone" / "weights.bin").read_bytes()  # the latest
        if end == "cancel":  # Ctrl-C kills the actors: their folders are swept on their nodes
            executor.cancel()
    finally:
        executor.close()
    assert not folder.exists()
