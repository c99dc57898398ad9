"""TensorRT loader flows of Parity's Python API (network, config and engine loaders) against the TensorRT model
(trt_model: a behavioural model of TensorRT's documented Python API, NOT TensorRT), over every modelled version
(and the real TensorRT where it imports).

What Polygraphy's TensorRT loaders have to get right, in Parity's terms: marking every tensor (``mark all``) skips
what TensorRT cannot output (loop bodies, shape and constant layers) and the engine still builds and runs; exact
output lists (mark / unmark) with one-line errors for unknown names; network postprocess callables; engines saved
and loaded back unchanged; timing caches saved, merged and loaded (a miss fails the build only when asked to);
parser and build failures as one line carrying TensorRT's reason.
"""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from parity.errors import BackendError, ModelError, UsageError
from parity.testing import relu_add, save_model

# ---- models ---------------------------------------------------------------------------------------------------

def with_loop(path: Path) -> Path:
    """a = relu(x); v = a doubled three times in a Loop (body tensors 'doubled', 'cond_out'); s = shape(v) (a SHAPE
    layer); y = sigmoid(v)."""
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond"),
         helper.make_node("Add", ["v_in", "v_in"], ["doubled"], name="body_add")],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), helper.make_tensor_value_info("doubled", TensorProto.FLOAT, [2, 3])],
    )
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="relu"),
        helper.make_node("Loop", ["trips", "keep_going", "a"], ["v"], name="loop", body=body),
        helper.make_node("Shape", ["v"], ["s"], name="shape"),
        helper.make_node("Sigmoid", ["v"], ["y"], name="sigmoid"),
    ]
    inits = [numpy_helper.from_array(np.array(3, np.int64), "trips"), numpy_helper.from_array(np.array(True), "keep_going")]
    return save_model(path, nodes, [x], [y], inits)


def unsupported(path: Path) -> Path:
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [])
    return save_model(path, [helper.make_node("Det", ["x"], ["y"], name="det")], [x], [y])


X = np.array([[-1.0, 0.5, 2.0], [3.0, -4.0, 0.25]], np.float32)


# ---- helpers --------------------------------------------------------------------------------------------------
@pytest.fixture
def trt(trt_backend: types.ModuleType) -> types.ModuleType:  # noqa: F811 - the imported fixture, by a short name
    return trt_backend


def network_of(path: Path, **modify: Any) -> Any:
    from parity_trt import ModifyNetwork, NetworkFromOnnxPath

    network = NetworkFromOnnxPath(str(path))
    return ModifyNetwork(network, **modify) if modify else network


def engine_bytes(network: Any, **config: Any) -> Any:
    from parity_trt import CreateConfig, EngineBytesFromNetwork

    save = config.pop("save_timing_cache", None)
    return EngineBytesFromNetwork(network, CreateConfig(progress=False, **config), save_timing_cache=save)


def outputs_of(network_loader: Any) -> list[str]:
    from parity_trt.network import unpack

    _, network, _ = unpack(network_loader())
    return [network.get_output(i).name for i in range(network.num_outputs)]


def run(engine: Any, feed: dict) -> dict:
    from parity_trt import TrtRunner

    with TrtRunner(engine) as runner:
        return runner.infer(feed)


def one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text and "Traceback" not in text, text
    return text


def sigmoid(v: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-v))


# ---- mark all ------------------------------------------------------------------------------------------------
def test_mark_all_skips_loop_bodies_and_shape_layers_and_still_builds(trt, tmp_path: Path) -> None:
    from parity_trt.options import MARK_ALL

    network = network_of(with_loop(tmp_path / "m.onnx"), outputs=MARK_ALL)
    with pytest.warns(UserWarning, match="mark all changes the engine"):
        marked = outputs_of(network)
    assert sorted(marked) == ["a", "v", "y"]  # not the body's 'doubled'/'cond_out', not the SHAPE layer's 's'
    with pytest.warns(UserWarning, match="mark all"):
        out = run(engine_bytes(network), {"x": X})
    a = np.maximum(X, 0)
    np.testing.assert_allclose(out["a"], a)
    np.testing.assert_allclose(out["v"], a * 8)
    np.testing.assert_allclose(out["y"], sigmoid(a * 8), rtol=1e-6)


def test_mark_all_leaves_out_excluded_tensors(trt, tmp_path: Path) -> None:
    from parity_trt.options import MARK_ALL

    with pytest.warns(UserWarning, match="mark all"):
        assert sorted(outputs_of(network_of(with_loop(tmp_path / "m.onnx"), outputs=MARK_ALL, exclude=["a"]))) == ["v", "y"]


def test_marking_a_loop_body_tensor_by_name_fails_the_build_with_tensorrt_s_reason(trt, tmp_path: Path) -> None:
    network = network_of(with_loop(tmp_path / "m.onnx"), outputs=["doubled", "y"])
    assert sorted(outputs_of(network)) == ["doubled", "y"]  # the name exists; TensorRT refuses it when building
    with pytest.raises(BackendError) as exc:
        engine_bytes(network)()
    assert "TensorRT failed to build the engine" in one_line(exc) and "doubled" in one_line(exc)
    assert exc.value.exit_code == 3


# ---- mark / unmark outputs ----------------------------------------------------------------------------------
def test_outputs_are_exactly_the_names_given(trt, tmp_path: Path) -> None:
    model = relu_add(tmp_path / "m.onnx", (2, 3))
    assert outputs_of(network_of(model)) == ["y"]
    only_h = network_of(model, outputs=["h"])
    assert outputs_of(only_h) == ["h"]  # y unmarked, h marked
    assert list(run(engine_bytes(only_h), {"x": X})) == ["h"]
    both = run(engine_bytes(network_of(model, outputs=["h", "y"])), {"x": X})
    np.testing.assert_allclose(both["h"], np.maximum(X, 0))
    np.testing.assert_allclose(both["y"], 2 * np.maximum(X, 0))


def test_an_unknown_output_name_is_refused_in_one_line_with_a_suggestion(trt, tmp_path: Path) -> None:
    with pytest.raises(UsageError) as exc:
        outputs_of(network_of(relu_add(tmp_path / "m.onnx", (2, 3)), outputs=["hh"]))
    assert "no tensor 'hh'" in one_line(exc) and "'h'" in one_line(exc)
    with pytest.raises(UsageError) as exc:
        outputs_of(network_of(relu_add(tmp_path / "m.onnx", (2, 3)), debug=["yy"]))
    assert "--mark-debug" in one_line(exc) and "'y'" in one_line(exc)


# ---- network postprocess ------------------------------------------------------------------------------------
def test_postprocess_runs_last_on_the_network(trt, tmp_path: Path) -> None:
    seen: list[list[str]] = []

    def swap_outputs(network: Any) -> None:  # sees the outputs ModifyNetwork set, then changes them
        from parity_trt.network import tensors_by_name

        seen.append([network.get_output(i).name for i in range(network.num_outputs)])
        tensors = tensors_by_name(network)
        network.unmark_output(tensors["h"])
        network.mark_output(tensors["y"])

    network = network_of(relu_add(tmp_path / "m.onnx", (2, 3)), outputs=["h"], postprocess=[swap_outputs])
    out = run(engine_bytes(network), {"x": X})
    assert seen == [["h"]] and list(out) == ["y"]
    np.testing.assert_allclose(out["y"], 2 * np.maximum(X, 0))


def test_cli_network_postprocess_script(trt, tmp_path: Path, parity_invoke) -> None:
    script = tmp_path / "post.py"
    script.write_text(
        "def postprocess(network):\n"
        "    for i in range(network.num_layers):\n"
        "        layer = network.get_layer(i)\n"
        "        if layer.name == 'relu':\n"
        "            network.mark_output(layer.get_output(0))\n"
    )
    model = relu_add(tmp_path / "m.onnx", (2, 3))
    code, out, err = parity_invoke("run", model, "--trt", "--onnxrt", "--onnx-outputs", "h", "y", "--trt-npps", script)
    assert code == 0, err
    assert "h" in out and "y" in out
    script.write_text("def postprocess(network):\n    raise ValueError('the script says no')\n")
    code, _, err = parity_invoke("run", model, "--trt", "--trt-npps", script)
    assert code != 0 and "Traceback" not in err and "the script says no" in err


# ---- engines saved and loaded -------------------------------------------------------------------------------
def test_an_engine_saved_and_loaded_back_is_the_same_engine(trt, tmp_path: Path) -> None:
    from parity_trt import EngineFromPath, SaveEngine, engine_from_bytes, save_engine

    built = engine_bytes(network_of(relu_add(tmp_path / "m.onnx", (2, 3))))
    path = tmp_path / "m.engine"
    data = SaveEngine(built, str(path))()  # passes on what it saved
    assert isinstance(data, bytes) and path.read_bytes() == data
    from_file = run(EngineFromPath(str(path)), {"x": X})
    np.testing.assert_array_equal(from_file["y"], run(data, {"x": X})["y"])
    # an ICudaEngine saves as its serialization
    engine = engine_from_bytes(data)
    assert save_engine(engine, str(tmp_path / "again.engine")) is engine
    assert (tmp_path / "again.engine").read_bytes() == bytes(engine.serialize())
    np.testing.assert_array_equal(run(engine, {"x": X})["y"], from_file["y"])


def test_loading_a_missing_engine_file_is_usage(trt, tmp_path: Path) -> None:
    from parity_trt import engine_from_path

    with pytest.raises(UsageError) as exc:
        engine_from_path(str(tmp_path / "none.engine"))
    assert "no such engine file" in one_line(exc)


def test_cli_convert_then_run_the_engine(trt, tmp_path: Path, parity_invoke) -> None:
    engine = tmp_path / "m.engine"
    assert parity_invoke("convert", relu_add(tmp_path / "m.onnx", (2, 3)), "-o", engine).exit_code == 0
    assert engine.stat().st_size > 0
    assert parity_invoke("run", engine, "--trt").exit_code == 0
    engine.write_bytes(b"garbage")
    code, _, err = parity_invoke("run", engine, "--trt")
    assert code == 3, err
    lines = [line for line in err.splitlines() if line.startswith("parity: error")]
    assert len(lines) == 1 and "Traceback" not in err and "Magic tag does not match" in lines[0]


# ---- timing caches ------------------------------------------------------------------------------------------
def test_timing_cache_is_saved_merged_and_loaded(trt, tmp_path: Path) -> None:
    cache = tmp_path / "timing.cache"
    first, second = relu_add(tmp_path / "a.onnx", (2, 3)), with_loop(tmp_path / "b.onnx")
    engine_bytes(network_of(first), save_timing_cache=str(cache))()
    assert cache.stat().st_size > 0
    only_first = cache.read_bytes()
    # a second build loading and saving the same file adds its timings and keeps the first's
    engine_bytes(network_of(second), load_timing_cache=str(cache), save_timing_cache=str(cache))()
    assert len(cache.read_bytes()) > len(only_first)
    # both models now build with ERROR_ON_TIMING_CACHE_MISS: every layer's timing is in the cache
    for model in (first, second):
        assert engine_bytes(network_of(model), load_timing_cache=str(cache), error_on_timing_cache_miss=True)()


def test_a_timing_cache_miss_fails_the_build_only_when_asked(trt, tmp_path: Path) -> None:
    model = relu_add(tmp_path / "m.onnx", (2, 3))
    assert engine_bytes(network_of(model), load_timing_cache=str(tmp_path / "absent.cache"))()  # absent: empty cache
    with pytest.raises(BackendError) as exc:
        engine_bytes(network_of(model), error_on_timing_cache_miss=True)()
    assert "TensorRT failed to build the engine:" in one_line(exc) and "it logged no error" not in one_line(exc)


# ---- parser failures -------------------------------------------------------------------------------------------
def test_an_operator_the_parser_lacks_is_one_line_with_the_parser_s_reason(trt, tmp_path: Path) -> None:
    with pytest.raises(ModelError) as exc:
        network_of(unsupported(tmp_path / "m.onnx"))()
    text = one_line(exc)
    assert "node 0 (Det 'det')" in text and "No importer registered for op: Det" in text and exc.value.exit_code == 3


def test_a_missing_model_file_is_usage(trt, tmp_path: Path) -> None:
    with pytest.raises(UsageError) as exc:
        network_of(tmp_path / "none.onnx")()
    assert "no such model file" in one_line(exc)
