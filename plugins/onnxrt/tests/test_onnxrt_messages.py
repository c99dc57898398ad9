"""onnxrt's own words reach the user in one line, and its C++ logger stays quiet unless ``-v`` is given."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests"))

from corpus import MODELS  # noqa: E402


def parity(*args: object, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(["parity", *map(str, args)], capture_output=True, text=True, timeout=timeout, env={**os.environ, "PARITY_NO_CACHE": "1"})


def ort_lines(stderr: str) -> list[str]:
    """Lines of onnxruntime's own logger (``[W:onnxruntime:...]``, ``[E:onnxruntime:...]``)."""
    return [line for line in stderr.splitlines() if ":onnxruntime:" in line]


def save(model: onnx.ModelProto, path: Path) -> Path:
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_reason_strips_wrappers_and_keeps_the_key_sentence():
    from parity_onnxrt.messages import reason

    load = RuntimeError(
        "[ONNXRuntimeError] : 1 : FAIL : Load model from /tmp/m.onnx failed:Type Error: Type (tensor(float16)) of input parameter (x) "
        "of operator (Add) in node () is invalid."
    )
    assert reason(load) == "Type Error: Type (tensor(float16)) of input parameter (x) of operator (Add) in node () is invalid."
    topo = RuntimeError(
        '[ONNXRuntimeError] : 10 : INVALID_GRAPH : This is an invalid model. In Node, ("br", If, "", -1) : ("c": tensor(bool),) -> '
        "(\"y\": tensor(float),) , Error Nodes in a graph must be topologically sorted, however input 't' of node: \nname:  OpType: Relu\n"
        " is not output of any previous nodes."
    )
    text = reason(topo)
    assert "\n" not in text and text.startswith("This is an invalid model. Nodes in a graph must be topologically sorted")
    assert text.endswith("(in If node 'br')")
    nested = RuntimeError(
        "[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : Non-zero status code returned while running If node. Name:'If_0' Status Message: "
        "Non-zero status code returned while running Pad node. Name:'pad' Status Message: Pad reflect requires axis length >= 2."
    )
    assert reason(nested) == "Pad node 'pad': Pad reflect requires axis length >= 2."
    assert len(reason(RuntimeError("x " * 1000))) <= 300


def test_type_error_at_load_is_onnxruntimes_own_text(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    w = helper.make_tensor("w", TensorProto.FLOAT, [1, 4], [1, 2, 3, 4])
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g", [x], [y], [w])
    path = save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "typed.onnx")
    proc = parity("run", path, "--onnxrt")
    assert proc.returncode == 3, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert "not a valid ONNX model" not in line
    assert "Type Error" in line and "tensor(float16)" in line and "Load model from" not in line


def test_unsorted_subgraph_error_names_the_reason_on_one_line(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    c = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    yb = helper.make_tensor_value_info("yb", TensorProto.FLOAT, [1, 4])
    then = helper.make_graph([helper.make_node("Relu", ["t"], ["yb"]), helper.make_node("Relu", ["x"], ["t"])], "then", [], [yb])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["yb"])], "else", [], [yb])
    node = helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then, else_branch=other)
    graph = helper.make_graph([node], "g", [x, c], [y])
    path = save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "unsorted.onnx")
    proc = parity("run", path, "--onnxrt")
    assert proc.returncode == 3, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert "topologically sorted" in line and "input 't'" in line and "not output of any previous nodes" in line


@pytest.mark.corpus
def test_onnxruntime_warnings_only_with_verbose(corpus_model):
    # light_resnet50 holds initializers no node uses: onnxruntime warns (CleanUnusedInitializersAndNodeArgs)
    path = corpus_model("light_resnet50")
    quiet = parity("run", path, "--onnxrt", *MODELS["light_resnet50"].run_args)
    assert quiet.returncode == 0, quiet.stderr
    assert ort_lines(quiet.stderr) == []
    loud = parity("run", path, "--onnxrt", "-v", *MODELS["light_resnet50"].run_args)
    assert loud.returncode == 0, loud.stderr
    assert any("[W:onnxruntime" in line and "CleanUnusedInitializers" in line for line in ort_lines(loud.stderr))


@pytest.mark.corpus
def test_inference_failure_is_one_line_without_onnxruntime_log_lines(corpus_model):
    # silero_vad cannot take a 1-sample chunk: a Pad inside its If fails; onnxruntime used to log it twice first
    args = ["--input-shapes", "input:[1,1]", "state:[2,1,128]", "--val-range", "sr:[16000,16000]"]
    proc = parity("run", corpus_model("silero_vad"), "--onnxrt", *args)
    assert proc.returncode == 3
    assert ort_lines(proc.stderr) == []
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("parity: error: onnxrt-0: inference failed: Pad node ") and "Pad reflect" in line


@pytest.mark.corpus
def test_python_api_sessions_are_quiet_and_take_a_severity(corpus_model):
    code = (
        "import sys; from parity_onnxrt import SessionFromOnnx; "
        f"SessionFromOnnx({str(corpus_model('light_resnet50'))!r}, log_severity_level=int(sys.argv[1]))()"
    )
    quiet = subprocess.run([sys.executable, "-c", code, "4"], capture_output=True, text=True, timeout=300)
    assert quiet.returncode == 0 and ort_lines(quiet.stderr) == [], quiet.stderr
    default = subprocess.run([sys.executable, "-c", code.replace(", log_severity_level=int(sys.argv[1])", "")], capture_output=True, text=True, timeout=300)
    assert default.returncode == 0 and ort_lines(default.stderr) == [], default.stderr
    loud = subprocess.run([sys.executable, "-c", code, "2"], capture_output=True, text=True, timeout=300)
    assert loud.returncode == 0 and any("[W:onnxruntime" in line for line in ort_lines(loud.stderr)), loud.stderr
