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
