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

from parity.hookspecs import hookimpl
from parity.util.lazy import lazy_attributes

__version__ = "0.1.0"

_LAZY = {
    "Comparator": "parity.compare.comparator",
    "AccuracyResult": "parity.compare.result",
    "OutputCheck": "parity.compare.result",
    "DataLoader": "parity.data.loader",
    "TensorMeta": "parity.data.meta",
    "BaseRunner": "parity.backend.base",
    "BaseLoader": "parity.backend.base",
    "RunResults": "parity.results.model",
    "IterationResult": "parity.results.model",
    "save_inputs": "parity.results.files",
    "load_inputs": "parity.results.files",
    "save_results": "parity.results.files",
    "load_results": "parity.results.files",
    "Backend": "parity.registry",
    "ModelKind": "parity.registry",
    "ComparatorSpec": "parity.registry",
    "DataLoaderSpec": "parity.registry",
    "StrategySpec": "parity.registry",
    "RunnerRequest": "parity.registry",
    "DataRequest": "parity.registry",
    "RunRequest": "parity.runflow",
    "RunOutcome": "parity.runflow",
    "run_comparison": "parity.runflow",
    "RunReporter": "parity.reporting",
    "QuietReporter": "parity.reporting",
    "get_registry": "parity.plugins",
}

__all__ = ["hookimpl", "__version__", *_LAZY]
__getattr__ = lazy_attributes(__name__, _LAZY)
