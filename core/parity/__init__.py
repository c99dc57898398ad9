"""Parity: run, compare and debug deep-learning models across inference backends.

The public Python API mirrors the CLI::

    from parity import Comparator, DataLoader, RunResults
    from parity_onnxrt import OnnxrtRunner, SessionFromOnnx

    runners = [OnnxrtRunner(SessionFromOnnx("model.onnx")), OnnxrtRunner(SessionFromOnnx("model_fp16.onnx"))]
    results = Comparator.run(runners, data_loader=DataLoader(iterations=2))
    assert Comparator.compare_accuracy(results)

or, as ``parity run model.onnx --onnxrt --onnxrt=graph-optimization-level=disable`` does, from option values::

    from parity import RunRequest, run_comparison

    outcome = run_comparison(RunRequest("model.onnx", [("onnxrt", {}), ("onnxrt", {"graph_optimization_level": "disable"})]))
    assert outcome.passed  # outcome.code: the exit code parity run would return

Heavy names are imported on first use, so ``import parity`` stays cheap.
"""

from __future__ import annotations

from parity.api import _EXPORTS as _API_EXPORTS
from parity.hookspecs import hookimpl
from parity.util.lazy import lazy_attributes

__version__ = "0.1.0"

# names the plugin surface also exports come from its table (parity.api._EXPORTS), so a move inside the core is
# recorded once; the rest are the Python API's own
_SHARED = ("DataLoader", "TensorMeta", "BaseRunner", "BaseLoader", "OutputCheck", "RunResults", "IterationResult",
           "save_inputs", "load_inputs", "save_results", "load_results", "Backend", "ModelKind", "ComparatorSpec",
           "DataLoaderSpec", "StrategySpec", "RunnerRequest", "get_registry")
_LAZY = {
    **{name: _API_EXPORTS[name] for name in _SHARED},
    "Comparator": "parity.compare.comparator",
    "AccuracyResult": "parity.compare.result",
    "DataRequest": "parity.registry",
    "RunRequest": "parity.run_engine",
    "RunOutcome": "parity.run_engine",
    "run_comparison": "parity.run_engine",
    "RunReporter": "parity.reporting",
    "QuietReporter": "parity.reporting",
    # the comparison functions run_comparison and Comparator take, one factory per registered metric
    "CompareFunc": "parity.compare.funcs",
}
# Polygraphy's own names (G_LOGGER, func, BytesFromPath, load_json, ...) live in the parity-polygraphy package
# (`parity_polygraphy`, docs/python-api.md's one import rule), not in Parity's namespace.

__all__ = ["hookimpl", "__version__", *_LAZY]
__getattr__ = lazy_attributes(__name__, _LAZY)
