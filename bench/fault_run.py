"""Fault run: signals, a full disk, a read-only folder, outputs aimed at inputs and hung checks, each through the
``parity`` CLI in a fresh temporary folder.

    python bench/fault_run.py [--only SUBSTRING]

For every case the script records a SHA-256 of every file in the folder before the command and compares after:

- files lost: a file that was there before and is changed or gone (Parity must never modify or delete one);
- stray files: anything new that the case does not announce (its output, or the state file an interrupted
  ``debug reduce`` keeps), e.g. ``*.part`` or hidden temporaries, plus anything left in the child's private TMPDIR;
- an announced output that is present must be complete (a zip that tests clean, an ONNX model that loads);
- survivors: processes carrying this run's marker in their environment (checks, ``setsid`` grandchildren) still
  alive after the case; they are listed with ``ps`` and killed by PID.

It prints one line per case (exit code, seconds, traceback yes/no, files lost, stray files, survivors, what was
wrong) and a tally, and exits 1 if any case is bad. Root ignores a folder's mode, so as root the read-only
folder is a read-only bind mount (``mount --bind`` + ``remount,ro``), unmounted afterwards.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import importlib.util
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
import uuid
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
PARITY = str(Path(sys.executable).parent / "parity")
TAG = f"PARITY_FAULT_RUN={uuid.uuid4().hex}"  # every child's environment carries it: how survivors are found
TIMEOUT = 180
SLOW_CHECK = "import sys, time\ntime.sleep(1)\nsys.exit(1 if b'add3' in open(sys.argv[1], 'rb').read() else 0)\n"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


core_models = _load("core_models", ROOT / "tests" / "core_models.py")
common = _load("bench_common", ROOT / "bench" / "common.py")


def wide_model(path: Path) -> Path:
    """y = x[1,1024] @ W[1024,2048]: an 8 MiB initializer, so converted or sanitized copies are megabytes."""
    weight = numpy_helper.from_array(np.random.default_rng(0).standard_normal((1024, 2048)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
        "wide",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1024])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2048])],
        [weight],
    )
    return core_models.save(graph, path)  # IR version 10, opset 17


@dataclass
class Case:
    name: str
    argv: list[str]
    expect: set[int]  # acceptable exit codes
    setup: str = "chain"  # which user files the folder gets
    announced: list[str] = field(default_factory=list)  # globs of new files the case may leave
    signal: int | None = None  # sent once the trigger fires
    trigger: str = ""  # "saving" (an output temporary is open in the folder) or "state" (reduce recorded a verdict)
    to_group: bool = False  # deliver to Parity's process group, as a terminal's Ctrl-C does
    fsize: int | None = None  # RLIMIT_FSIZE in bytes: a full disk
    readonly: str = ""  # folder made read-only (Parity runs as nobody when we are root)
    max_seconds: float | None = None


def reduce_argv(*extra: str) -> list[str]:
    return ["debug", "reduce", "model.onnx", "-o", "reduced.onnx", *extra, "--check", sys.executable, "check.py", "parity_debug.onnx"]


def save_big(*extra: str) -> list[str]:
    return ["run", "big_output.onnx", "--onnxrt", "--save-outputs", "out.npz", *extra]


REDUCE_KEEPS = ["reduced.onnx", "parity_debug.onnx.state.json"]  # an interrupted reduce: a valid -o or none, and its state
REDUCE_DONE = ["reduced.onnx", "reduced_repro/*"]  # a finished reduce: -o and its repro bundle
SIGNALS = [("kill-9", signal.SIGKILL, False), ("SIGTERM", signal.SIGTERM, False), ("SIGHUP", signal.SIGHUP, False), ("Ctrl-C", signal.SIGINT, True)]


def cases() -> list[Case]:
    out: list[Case] = []
    for label, sig, group in SIGNALS:
        codes = {-sig} if sig == signal.SIGKILL else {128 + sig, -sig}
        out.append(Case(f"{label}/run-save-outputs", save_big(), codes, "big", ["out.npz"], sig, "saving", group))
        out.append(Case(f"{label}/debug-reduce-slow-check", reduce_argv(), codes, "chain", REDUCE_KEEPS, sig, "state", group))
    ro_reduce = reduce_argv("--no-repro")
    ro_reduce[ro_reduce.index("reduced.onnx")] = "ro/r.onnx"
    out += [
        Case("full-disk/run-save-outputs", save_big(), {2, 3}, "big", fsize=32 << 20),
        Case("full-disk/convert-fp16", ["convert", "--fp-to-fp16", "wide.onnx", "-o", "wide16.onnx"], {2, 3}, "wide", fsize=1 << 20),
        Case("full-disk/surgeon-sanitize", ["surgeon", "sanitize", "wide.onnx", "-o", "wide_s.onnx"], {2, 3}, "wide", fsize=1 << 20),
        Case("full-disk/data-concat", ["data", "concat", "a.npz", "b.npz", "-o", "c.npz"], {2, 3}, "chain", fsize=512),
        Case("read-only/run-save-outputs", ["run", "model.onnx", "--onnxrt", "--save-outputs", "ro/out.npz"], {2, 3}, readonly="ro"),
        Case("read-only/convert", ["convert", "--fp-to-fp16", "model.onnx", "-o", "ro/m16.onnx"], {2, 3}, readonly="ro"),
        Case("read-only/data-concat", ["data", "concat", "a.npz", "b.npz", "-o", "ro/c.npz"], {2, 3}, readonly="ro"),
        Case("read-only/debug-reduce-o", ro_reduce, {2, 3}, readonly="ro"),
        Case("onto-input/run --save-outputs model.onnx", ["run", "model.onnx", "--onnxrt", "--save-outputs", "model.onnx"], {2}),
        Case("onto-input/data concat a b -o a", ["data", "concat", "a.npz", "b.npz", "-o", "a.npz"], {2}),
        Case("onto-input/debug reduce --repro .", reduce_argv("--repro", "."), {2}, announced=REDUCE_DONE),
        Case("onto-input/debug reduce --state model.onnx", reduce_argv("--state", "model.onnx"), {2}, announced=REDUCE_DONE),
        Case(
            "onto-input/debug repeat --state model.onnx",
            ["debug", "repeat", "--until", "1", "--state", "model.onnx", "--check", PARITY, "run", "model.onnx", "--onnxrt"],
            {2},
        ),
        Case(
            "onto-input/debug repeat --iteration-info model.onnx",
            ["debug", "repeat", "--until", "1", "--iteration-info", "model.onnx", "--check", PARITY, "run", "model.onnx", "--onnxrt"],
            {2},
        ),
        Case("hung-check/debug repeat --check-timeout 2", ["debug", "repeat", "--until", "1", "--check-timeout", "2", "--check", "sleep", "1001"], {1}, max_seconds=15),
        Case(
            "hung-check/setsid child --check-timeout 2",
            ["debug", "repeat", "--until", "1", "--check-timeout", "2", "--check", "bash", "-c", "setsid sleep 1003 & sleep 1002"],
            {1},
            max_seconds=15,
        ),
    ]
    return out


# ---------------------------------------------------------------------------------------------------- folders
def populate(work: Path, setup: str) -> None:
    if setup == "big":
        common.make_big_model(work)
    elif setup == "wide":
        wide_model(work / "wide.onnx")
    else:
        from parity.results import save_inputs

        core_models.chain(work / "model.onnx")
        (work / "check.py").write_text(SLOW_CHECK)
        save_inputs([{"x": np.ones((1, 4), np.float32)}], work / "a.npz")
        save_inputs([{"x": np.zeros((1, 4), np.float32)}], work / "b.npz")
        (work / "ro").mkdir()
        (work / "ro" / "keep.txt").write_text("a file in the read-only folder\n")


def snapshot(work: Path) -> dict[str, str]:
    sums = {}
    for path in sorted(work.rglob("*")):
        if path.is_file() or path.is_symlink():
            sums[str(path.relative_to(work))] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "link"
    return sums


def complete(path: Path) -> bool:
    try:
        if path.suffix == ".npz":
            with zipfile.ZipFile(path) as z:
                return z.testzip() is None
        if path.suffix == ".onnx":
            onnx.checker.check_model(onnx.load(str(path)))
        return True
    except Exception:
        return False


# ---------------------------------------------------------------------------------------------------- processes
def tagged_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if TAG.encode() in (entry / "environ").read_bytes().split(b"\0"):
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


def sweep() -> list[str]:
    """Survivors: ``ps`` lines of the processes this run started that are still alive; each is then killed by PID."""
    time.sleep(0.3)  # let a dying process group finish
    pids = tagged_pids()
    if not pids:
        return []
    ps = subprocess.run(["ps", "-o", "pid=,stat=,args=", "-p", ",".join(map(str, pids))], capture_output=True, text=True).stdout
    lines = [line.strip() for line in ps.splitlines() if line.strip() and " Z" not in f" {line.split()[1]}"]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return lines


def wait_trigger(proc: subprocess.Popen, case: Case, work: Path) -> bool:
    """Wait until the moment to signal: mid-save (Parity's unnamed O_TMPFILE or .part in the folder holds 16 MiB),
    or reduce's first verdict recorded."""
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if case.trigger == "saving":
            for fd in Path(f"/proc/{proc.pid}/fd").glob("*"):
                try:
                    target = os.readlink(fd)
                    if target.startswith(str(work)) and ("(deleted)" in target or target.endswith(".part")) and fd.stat().st_size > 16 << 20:
                        return True  # 16 MiB of the 256 MiB output written
                except OSError:
                    pass
        elif case.trigger == "state" and (work / "parity_debug.onnx.state.json").exists():
            time.sleep(0.5)  # into the next check
            return True
        time.sleep(0.02)
    return False


def third_party_tmp() -> set[str]:
    """Files that importing onnxruntime alone leaves in $TMPDIR (this machine's build writes ``.ses``): not Parity's."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-c", "import onnxruntime"], env={**os.environ, "TMPDIR": tmp}, check=True)
        return {p.name for p in Path(tmp).iterdir()}


THIRD_PARTY_TMP: set[str] = set()


def run_case(case: Case, base: Path) -> dict:
    work = base / "work"
    tmp = base / "tmp"
    work.mkdir()
    tmp.mkdir()
    populate(work, case.setup)
    mounted = False
    if case.readonly:
        folder = str(work / case.readonly)
        if os.geteuid() == 0:  # root ignores a folder's mode: a read-only bind mount of it instead
            subprocess.run(["mount", "--bind", folder, folder], check=True)
            mounted = True
            subprocess.run(["mount", "-o", "remount,ro,bind", folder], check=True)
        else:
            os.chmod(folder, 0o555)
    before = snapshot(work)

    def preexec() -> None:
        if case.fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (case.fsize, case.fsize))

    env = {**common.clean_env(), "TMPDIR": str(tmp), TAG.split("=")[0]: TAG.split("=")[1]}
    start = time.monotonic()
    proc = subprocess.Popen(
        [PARITY, *case.argv], cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, preexec_fn=preexec, start_new_session=True,
    )  # fmt: skip
    problems = []
    if case.signal is not None:
        if wait_trigger(proc, case, work):
            (os.killpg if case.to_group else os.kill)(proc.pid, case.signal)
        else:
            problems.append("NO-TRIGGER")
    try:
        stdout, stderr = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        problems.append("TIMEOUT")
    seconds = time.monotonic() - start
    survivors = sweep()
    if mounted:
        subprocess.run(["umount", str(work / case.readonly)], check=True)
    elif case.readonly:
        os.chmod(work / case.readonly, 0o755)

    after = snapshot(work)
    lost = sorted(name for name, digest in before.items() if after.get(name) != digest)
    new = sorted(set(after) - set(before))
    stray = [name for name in new if not any(fnmatch.fnmatch(name, pattern) for pattern in case.announced)]
    stray += [f"$TMPDIR/{p.relative_to(tmp)}" for p in tmp.rglob("*") if not p.is_dir() and p.name not in THIRD_PARTY_TMP]
    broken = [name for name in new if name not in stray and not complete(work / name)]
    traceback = "Traceback" in stderr or "run with --verbose for the traceback" in stderr
    if proc.returncode not in case.expect:
        problems.append(f"CODE {proc.returncode} not in {sorted(case.expect)}")
    if case.max_seconds and seconds > case.max_seconds:
        problems.append(f"SLOW {seconds:.0f}s")
    problems += ["TRACEBACK"] * traceback + [f"LOST {lost}"] * bool(lost) + [f"STRAY {stray}"] * bool(stray)
    problems += [f"INCOMPLETE {broken}"] * bool(broken) + [f"SURVIVORS {survivors}"] * bool(survivors)
    errors = [line for line in (stderr + stdout).splitlines() if line.startswith("parity:")]
    last = errors[-1] if errors else ((stderr or stdout).strip().splitlines() or [""])[-1]
    return {"code": proc.returncode, "seconds": seconds, "traceback": traceback, "lost": lost, "stray": stray,
            "survivors": survivors, "broken": broken, "problems": problems, "message": last}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run only the cases whose name contains this")
    args = parser.parse_args()
    selected = [c for c in cases() if args.only in c.name]
    THIRD_PARTY_TMP.update(third_party_tmp())
    if THIRD_PARTY_TMP:
        print(f"not counted as stray: {sorted(THIRD_PARTY_TMP)} in $TMPDIR (written by `import onnxruntime` alone)")
    tally = {"cases": 0, "bad": 0, "tracebacks": 0, "wrong exit codes": 0, "files lost": 0, "stray files": 0, "survivors": 0, "slow": 0}
    for case in selected:
        with tempfile.TemporaryDirectory(prefix="parity-fault-") as base:
            os.chmod(base, 0o755)
            r = run_case(case, Path(base))
        tally["cases"] += 1
        tally["bad"] += bool(r["problems"])
        tally["tracebacks"] += r["traceback"]
        tally["wrong exit codes"] += any(p.startswith("CODE") for p in r["problems"])
        tally["files lost"] += len(r["lost"])
        tally["stray files"] += len(r["stray"])
        tally["survivors"] += len(r["survivors"])
        tally["slow"] += any(p.startswith("SLOW") or p == "TIMEOUT" for p in r["problems"])
        print(
            f"{'BAD' if r['problems'] else 'OK '} {case.name}: exit {r['code']}, {r['seconds']:.1f}s, traceback {'yes' if r['traceback'] else 'no'}, "
            f"files lost {len(r['lost'])}, stray files {len(r['stray'])}, survivors {len(r['survivors'])}"
            f"{' | ' + '; '.join(r['problems']) if r['problems'] else ''} | {r['message'][:240]}",
            flush=True,
        )
    print(", ".join(f"{k} {v}" for k, v in tally.items()))
    return 1 if tally["bad"] else 0


if __name__ == "__main__":
    sys.exit(main())
