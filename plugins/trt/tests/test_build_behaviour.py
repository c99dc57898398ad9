"""Build-side behaviour of the plugin against trt_model, a model of TensorRT's documented Python API (NOT TensorRT).

``trt_model.make(version)`` has exactly that version's names and signatures (from shared/trt-api) and the behaviours
these tests reach, each cited from TensorRT's binding sources and headers in trt_model/behaviour.py. The tests drive
Parity's config/network/factory code with it and assert what Parity does.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trt_model
from trt_model.behaviour import cache_entries, cache_key
from trt_model.engine import MAGIC
from trt_model.tactics import LayerInfo, candidates, timing_key

from parity.errors import UsageError


@pytest.fixture
def trt(monkeypatch: pytest.MonkeyPatch):
    from parity_trt import _trt

    model = trt_model.make("10.7.0")
    monkeypatch.setitem(sys.modules, "tensorrt", model)
    monkeypatch.delenv("PARITY_TRT_LOG", raising=False)
    _trt.import_trt.cache_clear()
    _trt.get_logger.cache_clear()
    yield model
    _trt.import_trt.cache_clear()
    _trt.get_logger.cache_clear()


def _build(builder: Any, network: Any, config: Any) -> bytes:
    data = builder.build_serialized_network(network, config)
    assert data is not None, builder.logger._messages
    return data


# ---- item 2: a timing cache is always attached ---------------------------------------------------------
def test_config_always_has_a_timing_cache(trt, tmp_path: Path) -> None:
    from parity_trt.config import CreateConfig
    from parity_trt.network import CreateNetwork

    builder, network = CreateNetwork()()
    config = CreateConfig(progress=False)(builder, network)
    assert config.get_timing_cache() is not None and config.get_timing_cache()._entries == {}
    # a loaded cache is the one attached
    path = tmp_path / "old.cache"
    path.write_bytes(json.dumps({cache_key(9): [9, 1.5]}).encode())
    config = CreateConfig(load_timing_cache=str(path), progress=False)(builder, network)
    assert config.get_timing_cache()._entries == {cache_key(9): (9, 1.5)}


def test_save_timing_cache_alone_writes_one(trt, tmp_path: Path) -> None:
    from parity_trt.config import CreateConfig
    from parity_trt.engine import EngineBytesFromNetwork
    from parity_trt.network import CreateNetwork

    builder, network = CreateNetwork()()
    network._input("x", (2, 3))
    network.mark_output(network._layer(trt.LayerType.ELEMENTWISE, "y").get_output(0))
    path = tmp_path / "timing.cache"
    EngineBytesFromNetwork((builder, network), CreateConfig(progress=False), save_timing_cache=str(path))()
    # the build timed its one layer and recorded the fastest tactic (trt_model/tactics.py) in the cache it saved
    layer = network.get_layer(0)
    info = LayerInfo(0, layer.name, "ELEMENTWISE", [], [("y", (2, 3), "FLOAT")])  # a layer made by hand has no inputs
    fastest = min(candidates(info), key=lambda tactic: tactic.timing_ms)
    assert path.is_file() and cache_entries(path.read_bytes()) == {timing_key(info): [fastest.tactic_hash, fastest.timing_ms]}


# ---- item 3: shape-tensor inputs take values, and always need a profile ------------------------------
def _shape_tensor_network(trt: Any, dims: tuple[int, ...] = (2,)) -> tuple[Any, Any]:
    from parity_trt.network import CreateNetwork

    builder, network = CreateNetwork()()
    network._input("data", (-1, 3))
    network._input("new_shape", dims, is_shape_tensor=True)
    network.mark_output(network._layer(trt.LayerType.ELEMENTWISE, "y").get_output(0))
    return builder, network


def test_static_shape_tensor_input_still_gets_a_profile(trt) -> None:
    from parity_trt.config import CreateConfig
    from parity_trt.network import CreateNetwork

    builder, network = CreateNetwork()()
    network._input("new_shape", (2,), is_shape_tensor=True)  # static dims: only its values vary
    network.mark_output(network._layer(trt.LayerType.ELEMENTWISE, "y").get_output(0))
    with pytest.warns(UserWarning, match="shape-tensor input 'new_shape' has no profile values"):
        config = CreateConfig(progress=False)(builder, network)
    assert len(config._profiles) == 1
    assert config._profiles[0]._values == {"new_shape": ((1, 1), (1, 1), (1, 1))}
    _build(builder, network, config)


def test_shape_tensor_profile_takes_values(trt) -> None:
    from parity_trt.config import CreateConfig
    from parity_trt.options import Profile

    builder, network = _shape_tensor_network(trt)
    profile = Profile({"data": ((1, 3), (4, 3), (8, 3)), "new_shape": ((1, 6), (4, 6), (8, 6))})
    config = CreateConfig(profiles=[profile], progress=False)(builder, network)
    assert config._profiles[0]._values == {"new_shape": ((1, 6), (4, 6), (8, 6))}
    assert config._profiles[0]._shapes == {"data": ((1, 3), (4, 3), (8, 3))}
    _build(builder, network, config)


def test_shape_tensor_values_count_is_checked(trt) -> None:
    from parity_trt.config import CreateConfig
    from parity_trt.options import Profile

    builder, network = _shape_tensor_network(trt)
    profile = Profile({"data": ((1, 3), (4, 3), (8, 3)), "new_shape": ((1, 6, 1), (4, 6, 1), (8, 6, 1))})
    with pytest.raises(UsageError, match="'new_shape' is a shape tensor holding 2 value"):
        CreateConfig(profiles=[profile], progress=False)(builder, network)


def test_scalar_shape_tensor_holds_one_value(trt) -> None:
    from parity_trt.config import CreateConfig
    from parity_trt.options import Profile

    builder, network = _shape_tensor_network(trt, dims=())
    profile = Profile({"data": ((1, 3), (4, 3), (8, 3)), "new_shape": ((1,), (2,), (3,))})
    config = CreateConfig(profiles=[profile], progress=False)(builder, network)
    assert config._profiles[0]._values == {"new_shape": ((1,), (2,), (3,))}
    _build(builder, network, config)


# ---- item 4: mark all skips what TensorRT refuses -----------------------------------------------------
def test_mark_all_skips_loops_shape_constant_and_missing_outputs(trt) -> None:
    from parity_trt.config import CreateConfig
    from parity_trt.network import CreateNetwork, mark_all_outputs

    builder, network = CreateNetwork()()
    network._input("x", (2, 3))
    L = trt.LayerType
    network._layer(L.CONSTANT, "const")
    network._layer(L.SHAPE, "shape_of_x")  # an execution tensor here (not is_shape_tensor), still a SHAPE layer
    network._layer(L.ELEMENTWISE, "before_loop")
    network._layer(L.TRIP_LIMIT, in_loop=True)
    network._layer(L.RECURRENCE, "state", in_loop=True)
    network._layer(L.ELEMENTWISE, "body", in_loop=True)
    network._layer(L.LOOP_OUTPUT, "loop_out")
    network._layer(L.LOOP_OUTPUT, "loop_out2")
    network._layer(L.TOPK, "values", None)  # an optional output left out: get_output(1) is None
    network._layer(L.ELEMENTWISE, "sizes", shape_output=True)
    count = mark_all_outputs(network)
    marked = [network.get_output(i).name for i in range(network.num_outputs)]
    assert marked == ["before_loop", "loop_out", "loop_out2", "values"]
    assert count == 4
    _build(builder, network, CreateConfig(progress=False)(builder, network))
    # --trt-exclude-outputs still leaves names out
    _, network = CreateNetwork()()
    network._layer(L.ELEMENTWISE, "a")
    network._layer(L.ELEMENTWISE, "b")
    assert mark_all_outputs(network, exclude=["a"]) == 1
    assert [network.get_output(i).name for i in range(network.num_outputs)] == ["b"]


# ---- item 7: after_build runs once on CLI builds -----------------------------------------------------------
class _CountingExtension:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def postprocess_config(self, builder: Any, network: Any, config: Any) -> None:
        self.calls.append("postprocess_config")

    def after_build(self, builder: Any, network: Any, config: Any, engine_bytes: bytes) -> None:
        self.calls.append("after_build")


def test_cli_build_runs_each_extension_hook_once(trt, static_model: Path) -> None:
    from parity_trt import config as config_module
    from parity_trt.factory import engine_loader

    ext = _CountingExtension()

    def factory(options: Any) -> Any:
        return ext

    config_module.register_build_extension(factory)
    try:
        data = engine_loader(str(static_model), {"trt_progress": False})()
    finally:
        config_module._FACTORIES.remove(factory)
    assert json.loads(data[len(MAGIC):])["layers"]  # the model's serialized engine
    assert ext.calls == ["postprocess_config", "after_build"]


# ---- item 11: PARITY_TRT_LOG, and --strongly-typed with precision flags ---------------------------------
def test_parity_trt_log_sets_the_logger(trt, monkeypatch: pytest.MonkeyPatch) -> None:
    from parity_trt._trt import get_logger
    from parity_trt.network import CreateNetwork

    CreateNetwork()()
    assert get_logger().min_severity is trt.Logger.WARNING  # unset: the logger is left as it is
    monkeypatch.setenv("PARITY_TRT_LOG", "verbose")
    builder, _ = CreateNetwork()()
    assert builder.logger is get_logger()
    assert get_logger().min_severity is trt.Logger.VERBOSE


def test_parity_trt_log_rejects_unknown_levels(trt, monkeypatch: pytest.MonkeyPatch) -> None:
    from parity_trt.network import CreateNetwork

    monkeypatch.setenv("PARITY_TRT_LOG", "loud")
    with pytest.raises(UsageError, match="PARITY_TRT_LOG=loud: not a TensorRT log level.*choices: verbose"):
        CreateNetwork()()


def test_parity_trt_log_applies_to_cli_builds(trt, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, static_model: Path) -> None:
    from parity_trt._trt import get_logger
    from parity_trt.factory import convert

    monkeypatch.setenv("PARITY_TRT_LOG", "Info")
    convert(str(static_model), str(tmp_path / "m.engine"), {"trt_progress": False})
    assert get_logger().min_severity is trt.Logger.INFO


@pytest.mark.parametrize("flag", ["fp16", "bf16", "int8", "fp8"])
def test_strongly_typed_with_precision_flag_refused_on_10(flag: str) -> None:
    from parity_trt.options import validate_precisions

    with pytest.raises(UsageError, match=f"--strongly-typed with --{flag}") as info:
        validate_precisions({"strongly_typed": True, flag: True}, 10)
    assert "\n" not in str(info.value)
    assert validate_precisions({"strongly_typed": True}, 10) == []  # each alone is fine
    assert validate_precisions({flag: True}, 10) == [flag]


def test_progress_monitor_exception_resurfaces_after_the_build(trt) -> None:
    # pyCore.cpp's IProgressMonitor trampoline catches a Python exception, logs it and goes on: Parity keeps it.
    from parity_trt.callbacks import raise_pending
    from parity_trt.config import ProgressMonitorFactory

    from parity.errors import BackendError

    class BrokenDisplay:
        def update(self, *args: object, **kwargs: object) -> None:
            raise OSError("terminal gone")

    monitor = ProgressMonitorFactory.create(BrokenDisplay())
    monitor.phase_start("Building", None, 3)  # does not raise into TensorRT
    assert monitor.step_complete("Building", 0) is True  # the default keeps the build going
    with pytest.raises(BackendError, match="progress monitor's phase_start raised OSError: terminal gone"):
        raise_pending(monitor)


def test_progress_monitor_draws_nested_phases_through_the_live_display(trt) -> None:
    import io
    import re

    from parity_trt.config import ProgressMonitorFactory

    from parity.commands import LiveProgress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen = Terminal()
    monitor = ProgressMonitorFactory.create(LiveProgress(enabled=True, console_file=screen))
    monitor.phase_start("Building engine", None, 2)
    monitor.phase_start("Tactic selection", "Building engine", 4)
    for step in range(4):
        assert monitor.step_complete("Tactic selection", step) is True
    monitor.phase_finish("Tactic selection")
    monitor.step_complete("Building engine", 0)
    monitor.step_complete("Building engine", 1)
    monitor.phase_finish("Building engine")
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.getvalue()).replace("\r", "\n")
    assert re.search(r"^  Tactic selection .* 4/4", shown, re.M), shown  # nested: indented under its parent
    assert re.search(r"^Building engine .* 2/2", shown, re.M), shown


def test_parity_trt_log_reaches_python_api_engine_loads(trt, monkeypatch: pytest.MonkeyPatch) -> None:
    # Loading an engine from Python creates the logger without building a network: it must honour the variable too.
    from parity_trt._trt import get_logger

    get_logger.cache_clear()
    monkeypatch.setenv("PARITY_TRT_LOG", "error")
    try:
        assert get_logger().min_severity is trt.Logger.ERROR
    finally:
        get_logger.cache_clear()
