"""Errors on trained models: no wall of names, distinct labels on the two sides of every comparison, and shape
hints in the caller's terms (command line or Python) that never suggest a size the model cannot take."""

from __future__ import annotations

import shutil
import warnings

import numpy as np
import pytest

from parity.errors import UsageError

pytestmark = pytest.mark.corpus

DET_SHAPE = ("--input-shapes", "x:[1,3,64,64]")


def error_line(err: str) -> str:
    [line] = [line for line in err.splitlines() if line.startswith("parity: error:")]
    return line


def test_names_preview_and_unique_labels():
    from parity.util.text import names_preview, unique_labels

    assert names_preview(["a", "b"]) == "a, b"
    assert names_preview([f"t{i}" for i in range(1000)]) == "t0, t1, t2, t3, t4, ... (1000 in all)"
    assert names_preview([]) == "none"
    assert unique_labels(["onnxrt", "onnxrt", "onnxrt"]) == ["onnxrt", "onnxrt~1", "onnxrt~2"]
    assert unique_labels(["a"], taken=["a", "a~1"]) == ["a~2"]


def test_no_common_outputs_names_a_few_and_counts(main, corpus_model, tmp_path):
    golden = tmp_path / "det.npz"
    code, _, err = main("run", corpus_model("ppocr_det"), "--onnxrt", *DET_SHAPE, "--save-outputs", golden)
    assert code == 0, err
    # every tensor of ppocr_rec marked as an output, against ppocr_det's one output: nothing in common
    code, _, err = main("run", corpus_model("ppocr_rec"), "--onnxrt", "--onnx-outputs", "mark", "all", "--input-shapes", "x:[1,3,48,64]", "--load-outputs", golden)
    assert code == 2
    line = error_line(err)
    assert len(line) < 600, f"{len(line)} characters"
    assert line.startswith("parity: error: no common outputs to compare: onnxrt-0 has ")
    assert "in all)" in line and "det.npz:onnxrt-0 has sigmoid_0.tmp_0" in line


def test_unknown_input_message_lists_a_few_model_inputs(main, tmp_path):
    import onnx
    from onnx import TensorProto, helper

    names = [f"in{i}" for i in range(300)]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1]) for n in names]
    graph = helper.make_graph([helper.make_node("Sum", names, ["y"])], "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "wide.onnx"))
    code, _, err = main("run", tmp_path / "wide.onnx", "--onnxrt", "--val-range", "nope:[0,1]")
    assert code == 2
    line = error_line(err)
    assert len(line) < 300 and line.endswith("inputs: in0, in1, in2, in3, in4, ... (300 in all)")


def test_python_runners_with_the_same_name_get_distinct_labels(corpus_model):
    from parity_onnxrt import OnnxrtRunner, SessionFromOnnx

    from parity import Comparator, DataLoader

    path = str(corpus_model("ppocr_cls"))
    runners = [OnnxrtRunner(SessionFromOnnx(path)), OnnxrtRunner(SessionFromOnnx(path, graph_optimization_level="disable"))]
    results = Comparator.run(runners, data_loader=DataLoader(input_shapes={"x": (1, 3, 48, 192)}))
    assert results.runners() == ["onnxrt", "onnxrt~1"]
    accuracy = Comparator.compare_accuracy(results)
    assert [(p.actual, p.reference) for p in accuracy] == [("onnxrt", "onnxrt~1")]
    assert accuracy
    assert [r.name for r in runners] == ["onnxrt", "onnxrt"]  # the runners themselves are not renamed


def test_golden_run_named_like_the_live_runner_is_compared_not_replaced(corpus_model):
    from parity_onnxrt import OnnxrtRunner, SessionFromOnnx

    from parity import DataLoader, run_engine
    from parity.onnx_models import read_inputs
    from parity.results.model import IterationResult, RunResults

    path = str(corpus_model("ppocr_cls"))
    loader = DataLoader(read_inputs(path), input_shapes={"x": (1, 3, 48, 192)})
    live = OnnxrtRunner(SessionFromOnnx(path))
    with live:
        real = live.infer(loader[0])
    wrong = {name: value + 1.0 for name, value in real.items()}
    golden = RunResults([("onnxrt", [IterationResult(wrong, None, "onnxrt")])])
    summary = run_engine.run([OnnxrtRunner(SessionFromOnnx(path))], loader, golden)
    [pair] = list(summary.accuracy)
    assert (pair.actual, pair.reference) == ("onnxrt", "onnxrt~1")
    assert not summary.passed  # before, the golden replaced the live result and was compared with itself


def test_cli_labels_distinct_for_golden_files_named_like_the_live_runner(main, corpus_model, tmp_path):
    model, shape = corpus_model("ppocr_cls"), ("--input-shapes", "x:[1,3,48,192]")
    code, out, err = main("run", model, "--onnxrt", "--onnxrt", *shape)
    assert code == 0, err
    assert "[onnxrt-0 vs onnxrt-1]" in out
    assert main("run", model, "--onnxrt", *shape, "--save-outputs", tmp_path / "g.npz")[0] == 0
    for folder in ("a", "b"):  # two golden files of one name, each holding a runner named like the live one
        (tmp_path / folder).mkdir()
        shutil.copy(tmp_path / "g.npz", tmp_path / folder / "g.npz")
    code, out, err = main("run", model, "--onnxrt", *shape, "--onnx-outputs", "mark", "all", "--load-outputs", tmp_path / "a" / "g.npz", tmp_path / "b" / "g.npz")
    assert code == 0, err
    pairs = [line.split("]")[0][1:].split(" vs ") for line in out.splitlines() if line.startswith("[")]
    assert pairs == [["onnxrt-0", "g.npz:onnxrt-0"], ["onnxrt-0", "g.npz:onnxrt-0~1"]]
    skipped = [line for line in out.splitlines() if "missing (not in " in line]
    assert skipped and all("(not in g.npz:onnxrt-0" in line for line in skipped)  # never "not in onnxrt-0", the live side


def test_compare_accuracy_refuses_a_run_against_itself():
    from parity import Comparator
    from parity.results.model import IterationResult, RunResults

    results = RunResults([("a", [IterationResult({"y": np.zeros(2)})])])
    with pytest.raises(UsageError, match="compares a run with itself"):
        Comparator.compare_accuracy(results, comparisons=[("a", "a")])


def test_dynamic_image_dims_are_required_from_the_cli(main, corpus_model):
    code, _, err = main("run", corpus_model("ppocr_det"), "--onnxrt")
    assert code == 2
    line = error_line(err)
    assert "input 'x' has dynamic dims 2, 3" in line
    assert "--input-shapes x:[1,3,D2,D3]" in line and "DataLoader(" not in line
    assert "[1,3,1,1]" not in line and "[1, 3, 1, 1]" not in line


def test_dynamic_audio_dims_are_required_before_the_model_crashes(main, corpus_model):
    # silero_vad's chunk length is dynamic; with 1 sample its Pad fails deep inside an If (exit 3 before)
    code, _, err = main("run", corpus_model("silero_vad"), "--onnxrt", "--val-range", "sr:[16000,16000]")
    assert code == 2
    line = error_line(err)
    assert "input 'input' has dynamic dim 1" in line and "--input-shapes input:[1,D1]" in line


def test_dynamic_dims_from_python_speak_python(corpus_model):
    from parity_onnxrt import OnnxrtRunner, SessionFromOnnx

    from parity import Comparator, DataLoader
    from parity.data.meta import TensorMeta
    from parity.onnx_models import read_inputs

    with pytest.raises(UsageError) as info:
        Comparator.run([OnnxrtRunner(SessionFromOnnx(str(corpus_model("ppocr_det"))))])
    text = str(info.value)
    assert "DataLoader(input_shapes={'x': (1, 3, D2, D3)})" in text and "--input-shapes" not in text
    with pytest.raises(UsageError, match=r"^DataLoader\(input_shapes=\.\.\.\): the model has no input 'X'; inputs: x$"):
        DataLoader(read_inputs(str(corpus_model("ppocr_det"))), input_shapes={"X": (1, 3, 64, 64)}).check_names()
    # a dynamic batch dim alone still defaults to 1, with a warning in Python's terms
    loader = DataLoader(read_inputs(str(corpus_model("ppocr_cls"))), input_shapes={})
    with pytest.raises(UsageError, match=r"DataLoader\(input_shapes=\{'x': \(1, 3, D2, D3\)\}\)"):
        loader[0]
    light = DataLoader({"data_0": TensorMeta(np.dtype(np.float32), ("N", 3, 8, 8))})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert light[0]["data_0"].shape == (1, 3, 8, 8)
    assert "DataLoader(input_shapes={'data_0': (1, 3, 8, 8)})" in str(caught[0].message)
    # and with the shapes it names, the model runs
    results = Comparator.run([OnnxrtRunner(SessionFromOnnx(str(corpus_model("ppocr_det"))))], DataLoader(input_shapes={"x": (1, 3, 64, 64)}))
    assert results[0][0]["sigmoid_0.tmp_0"].shape == (1, 1, 64, 64)
