"""Reading model metadata: the fast wire-format scan agrees with the full parser and never loads weights."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from parity import onnx_models
from parity.errors import ModelError

ROOT = Path(__file__).resolve().parents[1]


def weights_listed_as_inputs(path: Path, external: bool = False) -> Path:
    """Old exporters list initializers among graph inputs; only 'x' is a real input."""
    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    sparse = helper.make_sparse_tensor(numpy_helper.from_array(np.ones(2, np.float32), "s"), numpy_helper.from_array(np.array([0, 3], np.int64), "i"), [4])
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", 1, ["n", 4]), helper.make_tensor_value_info("w", 1, [4, 4]), helper.make_tensor_value_info("s", 1, [4])],
        [helper.make_tensor_value_info("y", 1, ["n", 4])], [w], sparse_initializer=[sparse],
    )  # fmt: skip
    model = helper.make_model(graph)
    model.ir_version = 10
    if external:
        onnx.save(model, path, save_as_external_data=True, location=path.name + ".data", size_threshold=0)
    else:
        onnx.save(model, path)
    return path


@pytest.mark.parametrize("make", [
    lambda tmp: ROOT / "examples/models/tiny_cnn.onnx",
    lambda tmp: weights_listed_as_inputs(tmp / "old.onnx"),
    lambda tmp: weights_listed_as_inputs(tmp / "ext.onnx", external=True),
])  # fmt: skip
def test_scan_matches_full_parser(make, tmp_path):
    path = make(tmp_path)
    fast = onnx_models._scan_inputs(Path(path))
    full = onnx_models.graph_inputs(onnx.load(str(path), load_external_data=False))
    assert fast == full
    assert list(fast) == ["x"]  # weights listed as inputs, dense or sparse, are not inputs


@pytest.mark.parametrize("content", [b"", b"\x08\x0a\x3a\xff\xff\xff\x7f", b"not a model at all"])
def test_malformed_files_still_get_the_clean_error(tmp_path, content):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(content)
    with pytest.raises(ModelError, match="bad.onnx"):
        onnx_models.read_inputs(str(bad))


def _inputs_model(path, ir_version=10):
    import onnx
    from onnx import TensorProto, helper

    inputs = [
        helper.make_tensor_value_info("f", TensorProto.FLOAT, ["N", 3, None, 4]),
        helper.make_tensor_value_info("h", TensorProto.FLOAT16, [2]),
        helper.make_tensor_value_info("i", TensorProto.INT64, []),
        helper.make_tensor_value_info("b", TensorProto.BOOL, None),  # no shape at all
        helper.make_tensor_value_info("s", TensorProto.STRING, [1]),
        helper.make_tensor_value_info("d", TensorProto.DOUBLE, [0, 7]),
        helper.make_tensor_value_info("w", TensorProto.FLOAT, [3]),  # also an initializer (old exporters)
    ]
    outputs = [helper.make_tensor_value_info(n.name + "_o", n.type.tensor_type.elem_type, None) for n in inputs]
    nodes = [helper.make_node("Identity", [n.name], [n.name + "_o"]) for n in inputs]
    weight = helper.make_tensor("w", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, [weight]),
                              opset_imports=[helper.make_opsetid("", 17)], ir_version=ir_version)
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize("ir_version", [3, 10])
def test_input_metadata_without_onnx_matches_onnxs_parser(tmp_path, ir_version):
    """read_inputs reads the wire format (onnx is not imported by a plain run); it must agree with onnx's own
    parse on every kind of input: named/unknown/zero dims, no shape, scalars, strings, float16, old initializers."""
    from parity.onnx_models import _scan_inputs, graph_inputs, load

    path = _inputs_model(tmp_path / "inputs.onnx", ir_version)
    assert _scan_inputs(path) == graph_inputs(load(str(path)))
    assert set(_scan_inputs(path)) == {"f", "h", "i", "b", "s", "d"}


@pytest.mark.corpus
@pytest.mark.parametrize("name", ["ppocr_det", "ppocr_rec", "silero_vad", "silero_vad_op15", "light_resnet50"])
def test_input_metadata_without_onnx_matches_on_trained_models(corpus_model, name):
    from parity.onnx_models import _scan_inputs, graph_inputs, load

    path = corpus_model(name)
    assert _scan_inputs(path) == graph_inputs(load(str(path), load_external_data=False))


def test_a_plain_run_does_not_import_onnx(tmp_path):
    """onnx costs about 0.1 s of start-up; an onnxrt run reads its input metadata from the wire format."""
    import json
    import subprocess
    import sys

    model = Path(__file__).parents[1] / "examples" / "models" / "tiny_cnn.onnx"
    code = ("import sys, json\nfrom parity.cli import main\n"
            f"sys.argv = ['parity', 'run', {str(model)!r}, '--onnxrt', '--input-shapes', 'x:[4,3,16,16]']\n"
            "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
            "print(json.dumps({'onnx': 'onnx' in sys.modules}), file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "PASSED" in proc.stdout, proc.stdout + proc.stderr
    assert json.loads(proc.stderr.strip().splitlines()[-1]) == {"onnx": False}
