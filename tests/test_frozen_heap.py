"""``parity.api.frozen_heap`` and the runs that use it: a collection inside scans only what the run made, a cycle
the run drops is still collected, and no run (passing, failing, interrupted) leaves the caller's heap frozen."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from parity.api import BaseRunner, TensorMeta, frozen_heap
from parity.testing import invoke, save_graph


@pytest.fixture(autouse=True)
def unfrozen():
    """Each test starts with nothing frozen (some interpreters start with objects frozen)."""
    gc.unfreeze()


class Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only a collection frees it


def test_a_cycle_made_inside_is_collected_and_the_outer_freeze_is_kept():
    with frozen_heap():
        frozen = gc.get_freeze_count()
        assert frozen > 0
        with frozen_heap():  # nested: keeps the outer freeze
            made = weakref.ref(Node())
            gc.collect()
            assert made() is None
        assert gc.get_freeze_count() == frozen
    assert gc.get_freeze_count() == 0


@pytest.fixture()
def relu(tmp_path):
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    return save_graph(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]), tmp_path / "relu.onnx")


@pytest.mark.parametrize("args", [("--onnxrt",), ("--onnxrt", "--onnxrt"), ("--onnxrt", "--atol", "-1", "--rtol", "-1", "--onnxrt")])
def test_no_run_leaves_the_heap_frozen(relu, args):
    invoke("run", relu, *args)
    assert gc.get_freeze_count() == 0


def test_a_failing_runner_leaves_the_heap_unfrozen(tmp_path):
    (tmp_path / "bad.onnx").write_bytes(b"\x08\x07not a model")
    result = invoke("run", tmp_path / "bad.onnx", "--onnxrt")
    assert result.exit_code in (2, 3)
    assert gc.get_freeze_count() == 0


class Doubler(BaseRunner):
    """y = 2x, no backend needed."""

    def activate_impl(self) -> None:
        pass

    def deactivate_impl(self) -> None:
        pass

    def get_input_metadata_impl(self) -> dict[str, TensorMeta]:
        return {"x": TensorMeta(np.dtype("float32"), (2,))}

    def infer_impl(self, feed_dict: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"y": feed_dict["x"] * 2}


def test_an_error_kept_by_the_caller_does_not_keep_the_heap_frozen():
    # a callback that raises mid-run, and a caller (a notebook) that keeps the exception, hence the run's frames
    from parity.run_engine import run

    def stop(index, pairs):
        raise RuntimeError("the user's callback failed")

    kept = []
    try:
        run([Doubler("a"), Doubler("b")], [{"x": np.ones(2, np.float32)}] * 3, on_iteration=stop)
    except RuntimeError as exc:
        kept.append(exc)
    assert kept and str(kept[0]) == "the user's callback failed" and kept[0].__traceback__ is not None
    assert gc.get_freeze_count() == 0


def test_a_stream_stopped_early_and_closed_unfreezes():
    from parity.compare.comparator import Comparator

    iterations = Comparator.stream([Doubler("a"), Doubler("b")], [{"x": np.ones(2, np.float32)}] * 3)
    next(iterations)
    assert gc.get_freeze_count() > 0  # documented: the caller's objects are frozen while the stream runs
    iterations.close()
    assert gc.get_freeze_count() == 0


def test_objects_frozen_before_do_not_pass_for_an_outer_block():
    # the GPU machine's Python 3.12 starts with 375 objects frozen: a block must freeze the heap all the same
    gc.freeze()
    before = gc.get_freeze_count()
    with frozen_heap():
        assert gc.get_freeze_count() > before
        made = weakref.ref(Node())
        gc.collect()
        assert made() is None
    assert gc.get_freeze_count() == 0  # gc has no partial unfreeze: the earlier freeze ends with the block
