"""Marking outputs is not neutral (issue 26, part 4): when a run with marked tensors computes the model's own
outputs differently from an unmarked run, ``parity run`` says so once per runner, with both errors, in the
output and the JSON report."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

CORPUS = Path.home() / ".cache" / "parity-corpus" / "models"


def conv_bn(path: Path, dtype: int = TensorProto.FLOAT16) -> Path:
    """Conv then BatchNormalization: unmarked, onnxruntime folds the BN into the Conv; with ``c`` marked it
    cannot, and in fp16 the two give outputs 0.0078 apart (a real fusion, not a planted difference)."""
    rng = np.random.default_rng(0)
    np_dtype = helper.tensor_dtype_to_np_dtype(dtype)

    def init(name: str, array: np.ndarray) -> onnx.TensorProto:
        return numpy_helper.from_array(array.astype(np_dtype), name)

    inits = [
        init("w", rng.standard_normal((4, 4, 3, 3)) * 0.5),
        init("b", rng.standard_normal(4)),
        init("sc", rng.random(4) + 0.5),
        init("bi", rng.standard_normal(4)),
        init("mu", rng.standard_normal(4)),
        init("va", rng.random(4) + 0.1),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "sc", "bi", "mu", "va"], ["y"], name="bn"),
    ]
    graph = helper.make_graph(
        nodes, "conv_bn", [helper.make_tensor_value_info("x", dtype, [1, 4, 8, 8])], [helper.make_tensor_value_info("y", dtype, [1, 4, 8, 8])], inits
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


@pytest.fixture
def fp16_case(tmp_path: Path, main):
    """The fp16 model, inputs, and golden outputs of its fp32 twin on them."""
    fp16, fp32 = conv_bn(tmp_path / "m16.onnx"), conv_bn(tmp_path / "m32.onnx", TensorProto.FLOAT)
    inputs, golden = tmp_path / "in.npz", tmp_path / "golden.npz"
    code, _, err = main("run", fp32, "--onnxrt", "--val-range", "[-3,3]", "--save-inputs", inputs, "--save-outputs", golden)
    assert code == 0, err
    return fp16, inputs, golden


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("parity: warning:") and "changed" in line]


def test_mark_all_that_changes_outputs_is_said_once_with_both_errors(fp16_case, tmp_path: Path, main):
    fp16, inputs, golden = fp16_case
    plain_report, marked_report = tmp_path / "plain.json", tmp_path / "marked.json"
    common = ("--onnxrt", "--load-inputs", inputs, "--load-outputs", golden)
    code, _, err = main("run", fp16, *common, "--report", plain_report)
    assert code == 1 and not _warnings(err), err  # unmarked: nothing to say about marking
    assert "marking" not in json.loads(plain_report.read_text())

    page = tmp_path / "marked.html"
    code, out, err = main(
        "run", fp16, *common, "--onnx-outputs", "mark", "all", "--report", marked_report, "--save-outputs", tmp_path / "out.npz", "--save-report-html", page
    )
    assert code == 1
    (line,) = _warnings(err)  # once, for the one marked runner
    import html

    (shown,) = re.findall(r'<ul class="warnings"><li>(.*?)</li></ul>', page.read_text())  # the report says it too, at the top
    assert "parity: warning: " + html.unescape(shown) == line
    assert line.startswith("parity: warning: --onnx-outputs mark all changed onnxrt-0's output y: max abs error vs golden.npz:onnxrt-0 ")
    assert " unmarked, " in line and " marked;" in line and "does not fuse" in line

    plain = json.loads(plain_report.read_text())["comparisons"][0]["iterations"][0]["outputs"]
    unmarked_error = next(c["values"]["max_abs"] for c in plain if c["name"] == "y")
    report = json.loads(marked_report.read_text())
    (effect,) = report["marking"]
    marked = report["comparisons"][0]["iterations"][0]["outputs"]
    marked_error = next(c["values"]["max_abs"] for c in marked if c["name"] == "y")
    assert (effect["runner"], effect["output"], effect["marking"], effect["reference"]) == ("onnxrt-0", "y", "--onnx-outputs mark all", "golden.npz:onnxrt-0")
    # the errors are those of the unmarked run and of the marked run, each against the same golden outputs
    assert effect["unmarked_error"] == pytest.approx(unmarked_error, rel=1e-6)
    assert effect["marked_error"] == pytest.approx(marked_error, rel=1e-6)
    assert effect["shift"] > 1e-3  # the marked and unmarked values of y differ (their max errors may coincide)
    assert f"{effect['unmarked_error']:.4g} unmarked, {effect['marked_error']:.4g} marked" in line

    # the unmarked twin is only a check: it is neither saved nor timed nor reported as a runner
    from parity.results.files import load_results

    assert load_results(tmp_path / "out.npz").runners() == ["onnxrt-0"]
    assert list(report["runtimes_ms"]) == ["onnxrt-0"]
    from importlib import resources

    import jsonschema

    schema = json.loads(resources.files("parity").joinpath("schemas", "run-report.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(report)


def test_marking_that_changes_nothing_is_not_warned(tmp_path: Path, main):
    fp32 = conv_bn(tmp_path / "m32.onnx", TensorProto.FLOAT)
    code, _, err = main("run", fp32, "--onnxrt", "--onnxrt", "--onnx-outputs", "mark", "all", "--report", tmp_path / "r.json")
    assert code == 0 and not _warnings(err), err
    assert "marking" not in json.loads((tmp_path / "r.json").read_text())


def test_no_marking_check_skips_the_unmarked_run(fp16_case, tmp_path: Path, main, monkeypatch):
    import onnxruntime as ort

    fp16, inputs, golden = fp16_case
    built = []
    real = ort.InferenceSession
    monkeypatch.setattr(ort, "InferenceSession", lambda source, *a, **k: built.append(source) or real(source, *a, **k))
    common = ("--onnxrt", "--load-inputs", inputs, "--load-outputs", golden, "--onnx-outputs", "mark", "all", "--report", tmp_path / "r.json")
    code, _, err = main("run", fp16, *common, "--no-marking-check")
    assert code == 1 and not _warnings(err), err
    assert len(built) == 1 and "marking" not in json.loads((tmp_path / "r.json").read_text())
    code, _, err = main("run", fp16, *common)  # the default: the unmarked twin runs and the change is said
    assert code == 1 and len(_warnings(err)) == 1 and len(built) == 3
    code, _, err = main("run", fp16, "--onnxrt", "--load-inputs", inputs, "--no-marking-check")
    # every backend's marking flag is named (the installed plugins': --onnx-outputs, --torch-outputs, --trt-outputs)
    assert code == 2 and "--no-marking-check applies to outputs marked with --mark-debug or --onnx-outputs or " in err, err
    assert "--trt-outputs; this command has none" in err, err


def test_two_marked_runners_each_named_against_the_other(tmp_path: Path, main):
    fp16 = conv_bn(tmp_path / "m16.onnx")
    code, _, err = main("run", fp16, "--onnxrt", "--onnxrt", "--onnx-outputs", "mark", "all", "--val-range", "[-3,3]")
    assert code == 0  # the two marked runs agree with each other...
    lines = _warnings(err)  # ...yet each changed its model's output
    assert [line.split("changed ")[1].split("'s")[0] for line in lines] == ["onnxrt-0", "onnxrt-1"]
    assert "max abs error vs onnxrt-1 0 unmarked, 0 marked" in lines[0]


def test_python_run_takes_unmarked_twins(tmp_path: Path):
    from parity_onnxrt.loaders import ModifyOnnxOutputs, OnnxFromPath, SessionFromOnnx
    from parity_onnxrt.runner import OnnxrtRunner

    from parity.run_engine import run

    fp16 = str(conv_bn(tmp_path / "m16.onnx"))
    marked = OnnxrtRunner(SessionFromOnnx(ModifyOnnxOutputs(OnnxFromPath(fp16), ["mark", "all"])), name="marked")
    plain = OnnxrtRunner(SessionFromOnnx(fp16), name="plain")
    feed = {"x": np.linspace(-3, 3, 256, dtype=np.float16).reshape(1, 4, 8, 8)}
    summary = run([marked], [feed], unmarked={0: (plain, "mark all")})
    (effect,) = summary.marking
    assert (effect.runner, effect.output, effect.reference) == ("marked", "y", None)
    assert "marked and unmarked values differ by up to" in effect.message() and effect.shift > 1e-3
    assert list(summary.runtimes) == ["marked"]


@pytest.mark.skipif(not (CORPUS / "ppocr_cls.onnx").exists(), reason="corpus model not cached")
def test_corpus_fp16_classifier(tmp_path: Path, main):
    """ppocr_cls converted to fp16 against its fp32 outputs: 1e-6 unmarked, 2.2e-3 with every tensor marked."""
    fp16, inputs, golden = tmp_path / "cls16.onnx", tmp_path / "in.npz", tmp_path / "golden.npz"
    assert main("convert", "--fp-to-fp16", CORPUS / "ppocr_cls.onnx", "-o", fp16)[0] == 0
    shapes = ("--input-shapes", "x:[1,3,48,192]")
    assert main("run", CORPUS / "ppocr_cls.onnx", "--onnxrt", *shapes, "--save-inputs", inputs, "--save-outputs", golden)[0] == 0
    code, _, err = main("run", fp16, "--onnxrt", "--onnx-outputs", "mark", "all", "--load-inputs", inputs, "--load-outputs", golden, "--report", tmp_path / "r.json")
    assert code == 1
    (line,) = _warnings(err)
    (effect,) = json.loads((tmp_path / "r.json").read_text())["marking"]
    assert effect["unmarked_error"] < 1e-4 < 1e-3 < effect["marked_error"], line


TWIN_BACKEND = """
    import click
    from pathlib import Path

    from parity import hookimpl
    from parity.api import Backend


    def make_runner(request):
        from parity_onnxrt.loaders import ModifyOnnxOutputs, OnnxFromPath, SessionFromOnnx
        from parity_onnxrt.runner import OnnxrtRunner

        marked = bool(request.get("twinny_mark"))
        if request.get("twinny_save"):  # as TensorRT's --save-engine writes the engine it built
            Path(request.get("twinny_save")).write_text("marked" if marked else "unmarked")
        source = OnnxFromPath(request.model)
        return OnnxrtRunner(SessionFromOnnx(ModifyOnnxOutputs(source, ["mark", "all"]) if marked else source))


    @hookimpl
    def parity_register_backends(register):
        options = (click.Option(["--twinny-mark"], is_flag=True), click.Option(["--twinny-save"], type=click.Path()))
        register(Backend("twinny", make_runner, options=options, mark_options=("twinny_mark",), writes=("twinny_save",)))
"""


def test_any_backends_mark_options_get_an_unmarked_twin_that_writes_nothing(tmp_path: Path, main):
    """The check follows Backend.mark_options (TensorRT's --trt-outputs/--mark-debug as well as --onnx-outputs);
    the twin is built without the marks and without the backend's written files (a saved engine stays the
    marked run's)."""
    import textwrap

    plugin = tmp_path / "twinny.py"
    plugin.write_text(textwrap.dedent(TWIN_BACKEND))
    fp16, saved = conv_bn(tmp_path / "m16.onnx"), tmp_path / "saved.txt"
    code, _, err = main("--plugin", plugin, "run", fp16, "--twinny", "--twinny-mark", "--twinny-save", saved, "--val-range", "[-3,3]")
    assert code == 0, err
    (line,) = _warnings(err)
    assert line.startswith("parity: warning: --twinny-mark changed twinny-0's output y: marked and unmarked values differ by up to ")
    assert saved.read_text() == "marked"
