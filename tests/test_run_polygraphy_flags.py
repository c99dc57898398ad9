"""Polygraphy's ``run`` flags that are neither a backend's nor a metric's (issue 29): --warm-up, --use-subprocess,
--sequential-runners, --gen-script/--gen, --save-onnx with the external-data flags, --onnx-outputs-by-type,
--iterations 0, --save-input-data, --save-input-blob, and the TensorFlow flags, refused in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

CORPUS = Path("/root/.cache/parity-corpus/models")


def chain(path: Path, size: int = 64) -> Path:
    """x -> MatMul(W) -> Relu -> Add(x) -> y, a 16 KiB weight: big enough for external data, small to run."""
    weight = numpy_helper.from_array(np.random.RandomState(0).rand(size, size).astype(np.float32), "W")
    nodes = [helper.make_node("MatMul", ["x", "W"], ["m"]), helper.make_node("Relu", ["m"], ["r"]), helper.make_node("Add", ["r", "x"], ["y"])]
    return save(path, nodes, [2, size], [weight])


def save(path: Path, nodes: list, shape: list[int], weights: list) -> Path:
    """A float model of ``nodes`` from input x to output y (both of ``shape``), opset 17, IR 10."""
    x, y = (helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name in "xy")
    model = helper.make_model(helper.make_graph(nodes, path.stem, [x], [y], weights), opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.save(model, path)
    return path


# a backend that logs each inference (pid, whether timed as the first of its process) and makes the first
# inference of each activation slow: warm-up runs must absorb it
COUNTING = """
    import os
    import time

    import click

    from parity import hookimpl
    from parity.api import Backend


    def make_runner(request):
        from parity_onnxrt.loaders import SessionFromOnnx
        from parity_onnxrt.runner import OnnxrtRunner

        log = request.get("counting_log")

        class Counting(OnnxrtRunner):
            def activate_impl(self):
                super().activate_impl()
                self.calls = 0

            def infer_impl(self, feed):
                self.calls += 1
                with open(log, "a") as handle:
                    handle.write(f"{os.getpid()}\\n")
                if self.calls == 1:
                    time.sleep(0.4)
                return super().infer_impl(feed)

        runner = Counting(SessionFromOnnx(request.model))
        runner.name = "counting"
        return runner


    @hookimpl
    def parity_register_backends(register):
        register(Backend("counting", make_runner, options=(click.Option(["--counting-log"], type=click.Path()),), model_kinds=("onnx",)))
"""


@pytest.fixture
def counting(tmp_path: Path) -> Path:
    plugin = tmp_path / "counting.py"
    plugin.write_text(textwrap.dedent(COUNTING))
    return plugin


def test_warm_up_runs_untimed_inferences_before_each_runner(tmp_path: Path, counting: Path, main):
    model, log, report = chain(tmp_path / "m.onnx"), tmp_path / "calls.log", tmp_path / "r.json"
    code, _, err = main("--plugin", counting, "run", model, "--counting", "--counting", "--counting-log", log, "--iterations", "2", "--warm-up", "3", "--report", report)
    assert code == 0, err
    assert len(log.read_text().splitlines()) == 2 * (3 + 2)  # each runner: 3 warm-up runs, then its 2 iterations
    runtimes = json.loads(report.read_text())["runtimes_ms"]
    assert sorted(runtimes) == ["counting-0", "counting-1"] and all(len(v) == 2 for v in runtimes.values())
    assert max(max(v) for v in runtimes.values()) < 400  # the slow first inference was a warm-up run, not timed


def test_without_warm_up_the_first_inference_is_timed(tmp_path: Path, counting: Path, main):
    model, log, report = chain(tmp_path / "m.onnx"), tmp_path / "calls.log", tmp_path / "r.json"
    code, _, err = main("--plugin", counting, "run", model, "--counting", "--counting-log", log, "--report", report)
    assert code == 0, err
    assert len(log.read_text().splitlines()) == 1
    assert json.loads(report.read_text())["runtimes_ms"]["counting-0"][0] >= 400  # without warm-up it is timed


def test_warm_up_refuses_a_negative_count(tmp_path: Path, main):
    code, _, err = main("run", chain(tmp_path / "m.onnx"), "--onnxrt", "--warm-up", "-1")
    assert code == 2 and "--warm-up" in err and len(err.strip().splitlines()) == 1


def test_use_subprocess_runs_each_runner_in_a_process_of_its_own(tmp_path: Path, counting: Path, main):
    model, log = chain(tmp_path / "m.onnx"), tmp_path / "calls.log"
    args = ["--counting", "--counting", "--counting-log", log, "--use-subprocess", "--warm-up", "1", "--sequential-runners"]
    code, out, err = main("--plugin", counting, "run", model, *args)
    assert code == 0, err
    assert "PASSED" in out
    pids = log.read_text().split()
    assert len(pids) == 4 and str(os.getpid()) not in pids  # 1 warm-up + 1 iteration per runner, none in this process
    assert pids[0] == pids[1] != pids[2] == pids[3]  # one process per runner


CRASHING = """
    import os

    from parity import hookimpl
    from parity.api import Backend


    def make_runner(request):
        from parity_onnxrt.loaders import SessionFromOnnx
        from parity_onnxrt.runner import OnnxrtRunner

        class Crashing(OnnxrtRunner):
            def infer_impl(self, feed):
                os._exit(9)  # as a segfault in a backend would end the process

        return Crashing(SessionFromOnnx(request.model))


    @hookimpl
    def parity_register_backends(register):
        register(Backend("crashing", make_runner, model_kinds=("onnx",)))
"""


def test_use_subprocess_turns_a_crashed_runner_into_one_line(tmp_path: Path, main):
    plugin = tmp_path / "crashing.py"
    plugin.write_text(textwrap.dedent(CRASHING))
    code, _, err = main("--plugin", plugin, "run", chain(tmp_path / "m.onnx"), "--onnxrt", "--crashing", "--use-subprocess")
    assert code == 3, err
    assert err.strip().splitlines() == [err.strip()] and "exit code 9" in err


def test_use_subprocess_keeps_a_usage_error_and_its_exit_code(tmp_path: Path, main):
    code, _, err = main("run", chain(tmp_path / "m.onnx"), "--onnxrt", "--use-subprocess", "--input-shapes", "x:[3,64]")
    assert code == 2, err
    assert "'x'" in err and len(err.strip().splitlines()) == 1


def test_iterations_0_runs_nothing_and_passes(tmp_path: Path, counting: Path, main):
    log = tmp_path / "calls.log"
    code, out, err = main("--plugin", counting, "run", chain(tmp_path / "m.onnx"), "--counting", "--counting", "--counting-log", log, "--iterations", "0")
    assert code == 0, err
    assert "0 iteration(s)" in out
    assert not log.exists()  # no inference at all


def test_save_onnx_writes_the_marked_model_with_external_data(tmp_path: Path, main):
    model, saved = chain(tmp_path / "m.onnx"), tmp_path / "out" / "saved.onnx"
    code, _, err = main(
        "run", model, "--onnxrt", "--onnx-outputs", "m", "y", "--save-onnx", saved,
        "--save-external-data", "w.bin", "--external-data-size-threshold", "1K",
    )  # fmt: skip
    assert code == 0, err
    onnx.checker.check_model(str(saved), full_check=True)
    proto = onnx.load(str(saved), load_external_data=False)
    assert [o.name for o in proto.graph.output] == ["m", "y"]
    assert proto.graph.initializer[0].data_location == TensorProto.EXTERNAL
    assert (saved.parent / "w.bin").stat().st_size >= 64 * 64 * 4
    session = ort.InferenceSession(str(saved), providers=["CPUExecutionProvider"])
    x = np.ones((2, 64), np.float32)
    m, y = session.run(None, {"x": x})
    np.testing.assert_allclose(y, np.maximum(m, 0) + x, rtol=1e-6)
    assert sorted(p.name for p in saved.parent.iterdir()) == ["saved.onnx", "w.bin"]  # nothing else left behind


def test_save_onnx_per_tensor_files_and_polygraphy_spelling(tmp_path: Path, main):
    model, saved = chain(tmp_path / "m.onnx"), tmp_path / "saved.onnx"
    code, _, err = main("run", model, "--onnxrt", "--save-onnx", saved, "--external-data-path", "", "--no-save-all-tensors-to-one-file")
    assert code == 0, err
    onnx.checker.check_model(str(saved), full_check=True)
    assert (tmp_path / "W").is_file()  # one file per tensor, named after it
    ort.InferenceSession(str(saved), providers=["CPUExecutionProvider"])


def test_save_onnx_of_a_corpus_model_loads_and_agrees(tmp_path: Path, main):
    model = CORPUS / "ppocr_cls.onnx"
    if not model.is_file():
        pytest.skip("corpus model missing")
    saved = tmp_path / "cls.onnx"
    shape = ("--input-shapes", "x:[1,3,48,192]")
    code, _, err = main("run", model, "--onnxrt", *shape, "--save-onnx", saved, "--save-outputs", tmp_path / "a.json")
    assert code == 0, err
    onnx.checker.check_model(str(saved), full_check=True)
    code, _, err = main("run", saved, "--onnxrt", *shape, "--load-outputs", tmp_path / "a.json")  # same seed, same inputs
    assert code == 0, err


@pytest.mark.parametrize("flag", ["--save-onnx", "--gen-script"])
def test_written_files_never_overwrite_the_model(tmp_path: Path, main, flag: str):
    model = chain(tmp_path / "m.onnx")
    before = model.read_bytes()
    code, _, err = main("run", model, "--onnxrt", flag, model)
    assert code == 2 and "refusing to overwrite" in err
    assert model.read_bytes() == before


def test_save_onnx_refusals(tmp_path: Path, main):
    model = chain(tmp_path / "m.onnx")
    code, _, err = main("run", model, "--onnxrt", "--save-external-data")
    assert code == 2 and "--save-onnx" in err
    code, _, err = main("run", model, "--onnxrt", "--save-onnx", tmp_path / "s.onnx", "--no-save-all-tensors-to-one-file")
    assert code == 2 and "--save-external-data" in err
    assert not (tmp_path / "s.onnx").exists()


def test_onnx_outputs_by_type_marks_each_node_of_the_types(tmp_path: Path, main):
    model, report, saved = chain(tmp_path / "m.onnx"), tmp_path / "r.json", tmp_path / "o.json"
    code, _, err = main("run", model, "--onnxrt", "--onnxrt", "--onnx-outputs-by-type", "relu", "MATMUL", "Conv", "--save-outputs", saved, "--report", report)
    assert code == 0, err
    assert "no node of op type 'Conv'" in err  # a type the model lacks: a warning, as Polygraphy logs it
    from parity import load_results

    (_, iterations), _ = load_results(str(saved))
    assert sorted(iterations[0]) == ["m", "r"]
    code, _, err = main("run", model, "--onnxrt", "--onnx-outputs-by-type", "Conv")
    assert code == 2 and "Add, MatMul, Relu" in err


def test_save_input_data_and_blob(tmp_path: Path, main):
    model, saved, blobs = chain(tmp_path / "m.onnx"), tmp_path / "in.json", tmp_path / "blobs"
    code, _, err = main("run", model, "--onnxrt", "--iterations", "2", "--save-input-data", saved, "--save-input-blob", blobs)
    assert code == 0, err
    from parity import load_inputs

    feeds = load_inputs(str(saved))
    assert sorted(p.name for p in blobs.iterdir()) == ["0000000000", "0000000001"]
    for index, feed in enumerate(feeds):
        raw = np.fromfile(blobs / f"{index:010d}" / "x.bin", dtype=np.float32).reshape(2, 64)
        np.testing.assert_array_equal(raw, feed["x"])
    (tmp_path / "file").write_text("")
    code, _, err = main("run", model, "--onnxrt", "--save-input-blob", tmp_path / "file")
    assert code == 2, err


def _run_script(script: Path, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=cwd, timeout=300)


@pytest.mark.parametrize("atol", ["1e-3", "0"])
def test_gen_script_writes_a_script_that_agrees_with_the_command(tmp_path: Path, parity_cli, atol: str):
    model = chain(tmp_path / "m.onnx")
    # an fp16 copy disagrees with the fp32 model beyond atol 0 (and rtol 0): the verdict differs by tolerance
    from onnx import numpy_helper as nh

    proto = onnx.load(str(model))
    weight = nh.to_array(proto.graph.initializer[0])
    proto.graph.initializer[0].CopyFrom(nh.from_array(weight.astype(np.float16).astype(np.float32), "W"))
    onnx.save(proto, tmp_path / "m2.onnx")
    args = ["run", "m.onnx", "--onnxrt", "--load-outputs", "golden.json", "--atol", atol, "--rtol", "0", "--iterations", "2", "--warm-up", "1"]
    golden = parity_cli("run", "m2.onnx", "--onnxrt", "--iterations", "2", "--save-outputs", "golden.json", cwd=tmp_path)
    assert golden.returncode == 0, golden.stderr
    command = parity_cli(*args, cwd=tmp_path)
    assert command.returncode in (0, 1), command.stderr
    generated = parity_cli(*args, "--gen-script", "gen.py", cwd=tmp_path)
    assert generated.returncode == 0 and generated.stdout == "", generated.stderr
    script = tmp_path / "gen.py"
    assert "warm_up=1" in script.read_text()
    ran = _run_script(script, tmp_path)
    assert ran.returncode == command.returncode, ran.stderr
    assert ran.stdout.strip().splitlines()[-1] == ("PASSED" if command.returncode == 0 else "FAILED")
    assert ("PASSED" in command.stdout.splitlines()[-1]) == (command.returncode == 0)


def test_gen_script_dash_prints_and_a_failure_keeps_its_exit_code(tmp_path: Path, parity_cli):
    model = chain(tmp_path / "m.onnx")
    printed = parity_cli("run", model, "--onnxrt", "--input-shapes", "x:[3,64]", "--gen", "-", cwd=tmp_path)
    assert printed.returncode == 0, printed.stderr
    assert "RunRequest(" in printed.stdout and not list(tmp_path.glob("*.py"))
    (tmp_path / "gen.py").write_text(printed.stdout)
    command = parity_cli("run", model, "--onnxrt", "--input-shapes", "x:[3,64]", cwd=tmp_path)
    ran = _run_script(tmp_path / "gen.py", tmp_path)
    assert command.returncode == ran.returncode == 2
    assert ran.stderr.strip().splitlines() == [ran.stderr.strip()] and ran.stderr.startswith("parity: error:")


@pytest.mark.parametrize(
    "flags",
    [["--tf"], ["--tftrt"], ["--use-tftrt"], ["--ckpt", "c"], ["--freeze-graph"], ["--opset", "13"], ["--tf-outputs", "a", "b"], ["--save-pb", "p"],
     ["--save-tensorboard", "d"], ["--gpu-memory-fraction", "0.5"], ["--allow-growth"], ["--xla"], ["--dynamic-op"], ["--minimum-segment-size", "3"],
     ["--save-timeline", "t"]],
)  # fmt: skip
def test_tensorflow_flags_are_refused_in_one_line(tmp_path: Path, main, flags: list[str]):
    code, out, err = main("run", chain(tmp_path / "m.onnx"), "--onnxrt", *flags)
    assert code == 2
    assert err.strip().splitlines() == [err.strip()] and "no TensorFlow backend" in err and flags[0] in err
    assert "PASSED" not in out


def test_gen_script_without_a_backend_is_refused_as_the_command_is(tmp_path: Path, main):
    model = chain(tmp_path / "m.onnx")
    code, _, err = main("run", model, "--gen-script", tmp_path / "gen.py")
    command = main("run", model)
    assert code == command.exit_code == 2 and err == command.stderr and "choose at least one backend" in err
    assert not (tmp_path / "gen.py").exists()


def instance_norm(path: Path) -> Path:
    scale = numpy_helper.from_array(np.array([1.0, 2.0, 0.5], np.float32), "s")
    bias = numpy_helper.from_array(np.array([0.1, 0.2, 0.3], np.float32), "b")
    nodes = [helper.make_node("InstanceNormalization", ["x", "s", "b"], ["n"], epsilon=1e-5), helper.make_node("Identity", ["n"], ["y"])]
    return save(path, nodes, [1, 3, 4, 4], [scale, bias])


def test_pluginref_runs_the_reference_implementations(tmp_path: Path, main):
    model, saved = instance_norm(tmp_path / "inorm.onnx"), tmp_path / "out.json"
    code, out, err = main("run", model, "--pluginref", "--onnxrt", "--onnx-outputs", "n", "y", "--save-outputs", saved)
    assert code == 0, err
    assert "[pluginref-0 vs onnxrt-1]" in out
    from parity import load_results

    (name, iterations), _ = load_results(str(saved))
    assert name == "pluginref-0" and sorted(iterations[0]) == ["n", "y"]
    x = np.asarray(iterations[0]["y"])
    assert np.allclose(x.mean(axis=(2, 3)).ravel(), [0.1, 0.2, 0.3], atol=1e-5)  # normalised, then shifted by the bias


def test_pluginref_names_an_op_without_a_reference(tmp_path: Path, main):
    code, _, err = main("run", chain(tmp_path / "m.onnx"), "--pluginref")
    assert code == 3 and "MatMul" in err and len(err.strip().splitlines()) == 1


def test_convert_writes_the_marked_model(tmp_path: Path, main):
    model, out = chain(tmp_path / "m.onnx"), tmp_path / "marked.onnx"
    code, _, err = main("convert", model, "-o", out, "--onnx-outputs-by-type", "Relu", "--onnx-outputs", "m", "y", "--onnx-exclude-outputs", "y")
    assert code == 0, err
    onnx.checker.check_model(str(out), full_check=True)
    assert [o.name for o in onnx.load(str(out)).graph.output] == ["m", "r"]
    ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])


def test_convert_marks_before_fp16_and_leaves_no_temporary(tmp_path: Path, main, monkeypatch):
    import tempfile

    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", None)
    model, out = chain(tmp_path / "m.onnx"), tmp_path / "m16.onnx"
    code, _, err = main("convert", model, "-o", out, "--fp-to-fp16", "--onnx-outputs", "m", "y")
    assert code == 0, err
    proto = onnx.load(str(out))
    onnx.checker.check_model(proto, full_check=True)
    assert [o.name for o in proto.graph.output] == ["m", "y"]
    assert proto.graph.initializer[0].data_type == TensorProto.FLOAT16
    assert list((tmp_path / "tmp").iterdir()) == []


def test_convert_refuses_tensorflow_flags(tmp_path: Path, main):
    model = chain(tmp_path / "m.onnx")
    code, _, err = main("convert", model, "-o", tmp_path / "o.onnx", "--opset", "13")
    assert code == 2 and "no TensorFlow backend" in err and not (tmp_path / "o.onnx").exists()
    code, _, err = main("convert", model, "-o", tmp_path / "o.onnx", "--onnx-outputs-by-type", "Relu", "--tf-outputs", "a")
    assert code == 2 and "--tf-outputs" in err


def test_run_excludes_from_outputs_marked_by_type(tmp_path: Path, main):
    model, saved = chain(tmp_path / "m.onnx"), tmp_path / "o.json"
    code, _, err = main("run", model, "--onnxrt", "--onnx-outputs-by-type", "Relu", "MatMul", "--onnx-exclude-outputs", "m", "--save-outputs", saved)
    assert code == 0, err
    from parity import load_results

    ((_, iterations),) = load_results(str(saved))
    assert sorted(iterations[0]) == ["r"]


def test_pluginref_under_polygraphys_internal_checks(tmp_path: Path, parity_cli):
    """Polygraphy's own tests run with its internal correctness checks on; --pluginref passes them."""
    instance_norm(tmp_path / "inorm.onnx")
    ran = parity_cli("run", "inorm.onnx", "--pluginref", "--onnxrt", cwd=tmp_path, env={"POLYGRAPHY_INTERNAL_CORRECTNESS_CHECKS": "1"})
    assert ran.returncode == 0, ran.stderr
    assert "PASSED" in ran.stdout.splitlines()[-1]


def test_convert_marks_a_model_whose_output_has_no_shape(tmp_path: Path, main):
    """An older model's output may declare a type without a shape (onnx.checker refuses that in a written model):
    the written model's outputs get the shapes inference finds."""
    path = tmp_path / "ii.onnx"
    nodes = [helper.make_node("Identity", ["x"], ["a"]), helper.make_node("Identity", ["a"], ["b"])]
    out = helper.make_tensor_value_info("b", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "ii", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])], [out])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 7
    onnx.save(model, path)
    code, _, err = main("convert", path, "-o", tmp_path / "all.onnx", "--onnx-outputs", "mark", "all")
    assert code == 0, err
    written = onnx.load(str(tmp_path / "all.onnx"))
    onnx.checker.check_model(written, full_check=True)
    assert [(o.name, [d.dim_value for d in o.type.tensor_type.shape.dim]) for o in written.graph.output] == [("a", [4, 4]), ("b", [4, 4])]
