"""The core's pieces behind Polygraphy-style scripting (issue 15): ``CompareFunc`` factories, ``func.extend``,
``BytesFromPath``/``bytes_from_path``, ``load_json``/``save_json`` (against the real Polygraphy 0.53.6) and
``G_LOGGER``, each driven as a script drives it, on real onnxruntime sessions. Only ``Comparator``, ``CompareFunc``
and ``RunResults`` are names of ``parity`` itself; the rest are core modules that plugins reach through
``parity.api`` and Polygraphy scripts through ``parity_polygraphy`` (issue 28's one import rule)."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import numpy as np
import pytest

import parity
from parity import Comparator, CompareFunc, RunResults, func
from parity.backend.common import BytesFromPath, bytes_from_path
from parity.console import SETTINGS
from parity.errors import ParityError, UsageError
from parity.logger import G_LOGGER
from parity.results import IterationResult
from parity.results.polygraphy import load_json, save_json
from parity.testing import relu_add

polygraphy_json = pytest.importorskip("polygraphy.json")


def results(*runs: tuple[str, list[dict[str, np.ndarray]]]) -> RunResults:
    return RunResults([(name, [IterationResult(it, 0.001, name) for it in iters]) for name, iters in runs])


# --- CompareFunc -----------------------------------------------------------------------------------------


def test_compare_func_simple_takes_polygraphy_arguments():
    a = {"y": np.array([1.0, 2.0], np.float32)}
    b = {"y": np.array([1.0, 2.0 + 1e-6], np.float32)}
    runs = results(("a", [a]), ("b", [b]))
    assert not Comparator.compare_accuracy(runs, compare_func=CompareFunc.simple(atol=1e-8, rtol=1e-8))
    assert Comparator.compare_accuracy(runs, compare_func=CompareFunc.simple(atol=1e-5))
    # per-output tolerances and an error statistic, as Polygraphy's dicts spell them
    assert Comparator.compare_accuracy(runs, compare_func=CompareFunc.simple(atol={"y": 1e-5, "": 0.0}, rtol=0.0, check_error_stat="max"))
    check = Comparator.compare_accuracy(runs, compare_func=CompareFunc.simple(atol=0.0, rtol=0.0))[0].iterations[0].checks[0]
    assert not check.passed and check.name == "y"


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        ({"check_shapes": False}, "always checks shapes"),
        ({"save_heatmaps": "maps"}, "for a whole run, not inside a compare function: parity run MODEL ... --save-heatmaps DIR"),
        ({"show_error_metrics_plot": True}, "--save-error-metrics-plot DIR, or parity.run_comparison"),
        ({"find_output_func": lambda name, index, result: [name]}, "outputs of the same name"),
    ],
)
def test_compare_func_simple_refuses_what_parity_lacks_in_one_line(kwargs, said):
    with pytest.raises(UsageError) as info:
        CompareFunc.simple(**kwargs)
    assert said in str(info.value) and "\n" not in str(info.value) and "CompareFunc.simple(" in str(info.value)


def test_compare_func_indices_compares_top_k_classes():
    logits_a = {"p": np.array([[0.1, 0.7, 0.2]], np.float32)}
    logits_b = {"p": np.array([[0.1, 0.3, 0.6]], np.float32)}
    runs = results(("a", [logits_a]), ("b", [logits_b]))
    assert not Comparator.compare_accuracy(runs, compare_func=CompareFunc.indices())
    assert Comparator.compare_accuracy(runs, compare_func=CompareFunc.indices(index_tolerance=1))


def test_compare_func_builds_registered_metrics_by_name():
    """A metric a plugin registers (the contrib parity-metrics' cosine) comes through the same factory."""
    if "cosine" not in parity.get_registry().comparators:
        pytest.skip("parity-metrics is not installed")
    a = {"y": np.array([1.0, 2.0, 3.0], np.float32)}
    b = {"y": np.array([1.0, 2.0, 3.3], np.float32)}
    runs = results(("a", [a]), ("b", [b]))
    assert Comparator.compare_accuracy(runs, compare_func=CompareFunc.cosine(cosine_min=0.99))
    assert not Comparator.compare_accuracy(runs, compare_func=CompareFunc.cosine(cosine_min=0.99999))
    with pytest.raises(AttributeError, match="no metric 'nosuch' .*registered: .*cosine"):
        CompareFunc.nosuch()


# --- func.extend and BytesFromPath -------------------------------------------------------------------------


def test_func_extend_on_an_onnxrt_loader(tmp_path):
    from parity_onnxrt import OnnxrtRunner, SessionFromOnnx

    model = relu_add(tmp_path / "m.onnx", (2, 3))
    seen = []

    @func.extend(SessionFromOnnx(str(model)))
    def load_session(session):
        seen.append([i.name for i in session.get_inputs()])  # returns None: the session goes on

    with OnnxrtRunner(load_session) as runner:
        out = runner.infer({"x": np.array([[-1, 2, 3], [4, -5, 6]], np.float32)})
    assert seen == [["x"]]
    assert np.array_equal(out["y"], np.array([[0, 4, 6], [8, 0, 12]], np.float32))


def test_func_extend_spreads_tuples_and_returns_the_function_value():
    @func.extend(lambda: (1, 2))
    def pair(a, b):
        assert (a, b) == (1, 2)

    @func.extend(lambda x: x + 1)
    def replaced(value):
        return value * 10

    assert pair() == (1, 2)
    assert replaced(4) == 50  # the loader is called with the loader function's arguments
    assert func.extend(5)(lambda v: None)() == 5  # a ready value is used as it is


def test_bytes_from_path_lazy_and_immediate(tmp_path):
    path = tmp_path / "engine.bin"
    path.write_bytes(b"\x00plan\xff")
    loader = BytesFromPath(str(path))
    assert loader() == b"\x00plan\xff" and bytes_from_path(path) == b"\x00plan\xff"
    assert BytesFromPath(lambda: str(path))() == b"\x00plan\xff"  # the path from another loader
    with pytest.raises(UsageError, match=r"no such file: .*missing\.engine"):
        bytes_from_path(tmp_path / "missing.engine")


# --- load_json / save_json ----------------------------------------------------------------------------------


def test_load_json_reads_what_parity_run_saves(tmp_path):
    model = relu_add(tmp_path / "m.onnx", (2, 3))
    proc = subprocess.run(
        ["parity", "run", model, "--onnxrt", "--save-inputs", tmp_path / "inputs.json", "--save-outputs", tmp_path / "outputs.json"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    [feed] = load_json(tmp_path / "inputs.json")
    assert set(feed) == {"x"} and feed["x"].shape == (2, 3)
    outputs = load_json(str(tmp_path / "outputs.json"))
    assert isinstance(outputs, RunResults)
    [(runner, [iteration])] = list(outputs.items())
    assert np.array_equal(iteration["y"], 2 * np.maximum(feed["x"], 0))


def test_save_json_is_read_by_polygraphy_and_back(tmp_path):
    runs = results(("onnxrt", [{"y": np.arange(6, dtype=np.float32).reshape(2, 3)}]))
    obj = {"feeds": [{"x": np.ones((1, 2), np.float16)}], "results": runs, "note": "kept", "n": np.int64(3)}
    save_json(obj, tmp_path / "mixed.json")
    theirs = polygraphy_json.load_json(str(tmp_path / "mixed.json"))
    assert theirs["note"] == "kept" and theirs["n"] == 3
    assert np.array_equal(theirs["feeds"][0]["x"], np.ones((1, 2), np.float16))
    assert np.array_equal(theirs["results"]["onnxrt"][0]["y"], runs["onnxrt"][0]["y"])
    # and what Polygraphy saves, Parity loads
    polygraphy_json.save_json({"a": np.array([1, 2], np.int32), "items": [np.zeros(2)]}, str(tmp_path / "theirs.json"))
    ours = load_json(tmp_path / "theirs.json")
    assert np.array_equal(ours["a"], [1, 2]) and ours["a"].dtype == np.int32 and np.array_equal(ours["items"][0], np.zeros(2))
    # open files both ways
    buffer = io.StringIO()
    save_json([np.eye(2)], buffer)
    assert np.array_equal(load_json(io.StringIO(buffer.getvalue()))[0], np.eye(2))


def test_load_json_never_unpickles(tmp_path):
    pickled = io.BytesIO()
    np.save(pickled, np.array([{"evil": 1}], dtype=object), allow_pickle=True)
    import base64

    (tmp_path / "evil.json").write_text(json.dumps({"polygraphy_class": "ndarray", "array": base64.b64encode(pickled.getvalue()).decode()}))
    with pytest.raises(UsageError, match="evil.json"):
        load_json(tmp_path / "evil.json")
    (tmp_path / "other.json").write_text(json.dumps({"polygraphy_class": "TacticReplayData", "x": 1}))
    with pytest.raises(UsageError, match="Polygraphy TacticReplayData object, which Parity does not read"):
        load_json(tmp_path / "other.json")
    with pytest.raises(UsageError, match="cannot be saved as JSON"):
        save_json({"f": object()}, tmp_path / "no.json")
    assert not (tmp_path / "no.json").exists()


# --- G_LOGGER ------------------------------------------------------------------------------------------------


def test_g_logger_severities_and_verbosity(capsys):
    old = G_LOGGER.severity
    G_LOGGER.info("shown at INFO")
    G_LOGGER.verbose("hidden at INFO")
    G_LOGGER.verbose(lambda: pytest.fail("a lazy message is not built when hidden"))
    with G_LOGGER.verbosity(G_LOGGER.VERBOSE):
        G_LOGGER.verbose("shown at VERBOSE")
        assert SETTINGS["verbose"]  # backend logs show, as with -v
    assert G_LOGGER.severity == old and not SETTINGS["verbose"]
    err = capsys.readouterr().err
    assert "[I] shown at INFO" in err and "[V] shown at VERBOSE" in err and "hidden" not in err


def test_g_logger_above_warning_hides_parity_warnings(capsys):
    from parity.util.text import warn

    with G_LOGGER.verbosity(G_LOGGER.CRITICAL):
        warn("not shown")
        G_LOGGER.error("not shown either")
    warn("shown")
    err = capsys.readouterr().err
    assert "not shown" not in err and "parity: warning: shown" in err


def test_g_logger_critical_raises_and_sits_on_logging(capsys):
    import logging

    assert G_LOGGER.logger is logging.getLogger("parity") and G_LOGGER.handler in G_LOGGER.logger.handlers
    with pytest.raises(ParityError, match="^cannot go on$"):
        G_LOGGER.critical("cannot go on")
    assert "[!] cannot go on" in capsys.readouterr().err
    G_LOGGER.module_severity = {"": G_LOGGER.ERROR}
    try:
        assert G_LOGGER.severity == logging.ERROR
    finally:
        G_LOGGER.module_severity = G_LOGGER.INFO


def test_importing_the_logger_leaves_cli_settings_alone():
    code = "from parity.console import SETTINGS\nSETTINGS['verbose'] = True\nfrom parity.logger import G_LOGGER\nprint(SETTINGS['verbose'])"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "True", proc.stderr


def test_polygraphys_utility_names_live_in_parity_polygraphy_not_in_parity():
    """Issue 28's one rule: Parity's namespace holds Parity's API; Polygraphy's names are parity_polygraphy's."""
    for name in ("G_LOGGER", "Logger", "BytesFromPath", "bytes_from_path", "load_json", "save_json", "to_json"):
        assert name not in parity.__all__
        with pytest.raises(AttributeError):
            getattr(parity, name)
    import parity_polygraphy.backend.common
    import parity_polygraphy.json
    import parity_polygraphy.logger

    assert parity_polygraphy.logger.G_LOGGER is not None and callable(parity_polygraphy.backend.common.BytesFromPath)
    assert callable(parity_polygraphy.json.load_json) and callable(parity_polygraphy.json.save_json)
    assert "CompareFunc" in parity.__all__  # Parity's own factory of compare functions stays
