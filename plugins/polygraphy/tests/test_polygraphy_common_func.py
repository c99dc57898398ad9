"""parity_polygraphy.common (TensorMetadata, typed containers), parity_polygraphy.func (extend, constantmethod),
the util/mod helpers scripts use, and the test harness's import rule (tools/polygraphy_tests.py)."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from parity_polygraphy import func, mod, util
from parity_polygraphy.common import TensorMetadata
from parity_polygraphy.common.interface import TypedDict, TypedList
from parity_polygraphy.datatype import DataType
from parity_polygraphy.exception import PolygraphyException, PolygraphyInternalException

from parity import api as parity_api

HARNESS = Path(__file__).resolve().parents[1] / "tools" / "polygraphy_tests.py"


# --- TensorMetadata -----------------------------------------------------------------------------------------
def test_metadata_converts_dtypes_and_prints_like_polygraphy():
    meta = TensorMetadata().add("x", np.float32, (1, "batch", 3), min_shape=(1, 1, 3), max_shape=(1, 8, 3)).add("y", "int8", None)
    assert meta["x"].dtype is DataType.FLOAT32 and meta["y"].dtype is DataType.INT8
    dtype, shape = meta["x"]
    assert list(shape) == [1, "batch", 3] and shape.min == (1, 1, 3) and shape.max == (1, 8, 3)
    assert str(meta) == "{x [dtype=float32, shape=(1, 'batch', 3)],\n y [dtype=int8]}"
    assert repr(meta) == "TensorMetadata().add('x', DataType.FLOAT32, [1, 'batch', 3], min_shape=(1, 1, 3), max_shape=(1, 8, 3)).add('y', DataType.INT8, None)"
    assert str(TensorMetadata().add("z", None, None)) == "{z}"


def test_metadata_of_a_feed_dict_and_of_a_real_model_input():
    model = helper.make_model(
        helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["n", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT16, ["n", 4])]),
        opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    onnx.checker.check_model(model, full_check=True)
    tensor = model.graph.input[0]
    dims = [d.dim_param or d.dim_value for d in tensor.type.tensor_type.shape.dim]
    meta = TensorMetadata().add(tensor.name, tensor.type.tensor_type.elem_type, dims)
    assert str(meta) == "{x [dtype=float16, shape=('n', 4)]}"
    fed = TensorMetadata.from_feed_dict({"x": np.zeros((2, 4), np.float16)})
    assert fed["x"].dtype is DataType.FLOAT16 and tuple(fed["x"].shape) == (2, 4)
    assert copy.deepcopy(meta) == meta and copy.copy(fed) is not fed


def test_typed_containers_refuse_wrong_types():
    Floats = TypedDict(lambda: str, lambda: float)  # noqa: N806
    floats = Floats({"a": 1.0})
    with pytest.raises(PolygraphyException, match="Unsupported key type"):
        floats[1] = 2.0
    with pytest.raises(PolygraphyException, match="Unsupported value type"):
        floats.update({"b": "two"})
    assert dict(floats) == {"a": 1.0}  # a refused update adds nothing
    Ints = TypedList(lambda: int)  # noqa: N806
    ints = Ints([1])
    ints += [2, 3]
    assert list(ints) == [1, 2, 3] and ints[1:] == [2, 3]
    with pytest.raises(PolygraphyException, match="Unsupported element type"):
        ints.extend([4, "five"])
    assert len(ints) == 3


# --- func ---------------------------------------------------------------------------------------------------
def test_extend_passes_results_forwards_arguments_and_keeps_or_replaces_the_return():
    def load(a, b=1):
        return a + b, [a]

    @func.extend(load)
    def add_to_list(total, lst):
        lst.append(total)

    assert add_to_list(2, b=3) == (5, [2, 5])

    @func.extend(load)
    def with_arguments(a, b, total, lst):
        return f"{a}+{b}={total}"

    assert with_arguments(2, b=5) == "2+5=7"

    @func.extend(lambda: None)
    def takes_nothing():
        return "ran"

    assert takes_nothing() == "ran"

    @func.extend(load)
    def wrong(total):
        pass

    with pytest.raises(PolygraphyException, match=r"Function: wrong accepts 1 parameter\(s\), but needs to accept 2"):
        wrong(1)


def test_extend_wraps_a_parity_loader_and_a_ready_value():
    @func.extend(parity_api.BytesFromPath(__file__))
    def first_line(data):
        return data.splitlines()[0]

    assert first_line().startswith(b'"""')
    assert func.extend(41)(lambda x: x + 1)() == 42


def test_constantmethod_catches_mutation_only_with_internal_checks(monkeypatch):
    from parity_polygraphy import config

    monkeypatch.setattr(config, "INTERNAL_CORRECTNESS_CHECKS", True)

    class Checked:
        @func.constantmethod
        def mutate(self):
            self.x = 1

    with pytest.raises(PolygraphyInternalException, match="was mutated in a constant method"):
        Checked().mutate()
    monkeypatch.setattr(config, "INTERNAL_CORRECTNESS_CHECKS", False)

    class Unchecked:
        @func.constantmethod
        def mutate(self):
            self.x = 1

    Unchecked().mutate()


# --- util / mod ---------------------------------------------------------------------------------------------
def test_util_helpers(tmp_path):
    with util.NamedTemporaryFile("w+") as f:
        f.write("text")
        f.flush()
        assert Path(f.name).read_text() == "text"
    assert not Path(f.name).exists()  # a stray file per use would pile up in the temporary folder
    kept = util.NamedTemporaryFile(suffix=".onnx")
    name = kept.name
    assert Path(name).exists() and name.endswith(".onnx")
    del kept
    assert not Path(name).exists()
    target = tmp_path / "a" / "b.bin"
    util.save_file(b"\x00\x01", str(target))
    assert util.load_file(str(target)) == b"\x00\x01"
    assert util.invert_dict({"a": 1}) == {1: "a"} and util.volume((2, 3, 4)) == 24 and util.is_empty_shape((3, 0))
    assert mod.version("10.16.1.11") > mod.version("8.7") and mod.version("10.2.x") == mod.version("10.2")


def test_array_helpers_on_numpy():
    arr = np.array([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]], dtype=np.float32)
    values, indices = util.array.topk(arr, 2, axis=1)
    assert np.array_equal(values, [[3, 2], [5, 4]]) and np.array_equal(indices, [[0, 2], [1, 2]])
    assert util.array.topk(arr, 5, axis=0)[0].shape == (2, 3)  # k is clamped to the axis length
    assert util.array.equal(arr, arr.copy()) and util.array.allclose(arr, arr + 1e-9) and not util.array.any(util.array.isnan(arr))
    assert util.array.dtype(arr) is DataType.FLOAT32 and util.array.cast(arr, DataType.INT8).dtype == np.int8
    assert util.array.unravel_index(util.array.argmax(arr), util.array.shape(arr)) == (1, 1)
    with pytest.raises(PolygraphyException, match="unsupported for objects of type: str"):
        util.array.max("not an array")


# --- the harness's import rule ------------------------------------------------------------------------------
def harness():
    spec = importlib.util.spec_from_file_location("polygraphy_tests", HARNESS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_harness_rewrites_imports_and_nothing_else():
    rewrite = harness().rewrite
    source = ("import polygraphy\nfrom polygraphy.backend.onnx import OnnxFromPath\n    from polygraphy import util\n"
              "import polygraphy_extra\nx = 'polygraphy.json'\npatch('polygraphy.util.array')\n")
    assert rewrite(source) == ("import parity_polygraphy\nfrom parity_polygraphy.backend.onnx import OnnxFromPath\n    from parity_polygraphy import util\n"
                               "import polygraphy_extra\nx = 'polygraphy.json'\npatch('polygraphy.util.array')\n")


def test_the_harness_drops_marks_that_pytest_refuses_on_fixtures():
    source = ("import pytest\n\n@pytest.fixture()\n@pytest.mark.skipif(\n    True,\n    reason='x',\n)\ndef f():\n    return 1\n\n"
              "@pytest.mark.slow\ndef test_g():\n    pass\n")
    fixed = harness().unmark_fixtures(source)
    assert "skipif" not in fixed and "@pytest.mark.slow" in fixed and "def f():" in fixed
