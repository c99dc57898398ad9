"""Parity's Python API in a process that holds many objects (a notebook beside PyTorch), against onnxruntime.

Anchor: the same work with onnxruntime and numpy alone, in the same process: two sessions of the model (the
default and one without graph optimisations), one inference each on the same input, ``np.allclose``. Parity:
docs/python-api.md's first example on the same model: ``Comparator.run`` of two ``OnnxrtRunner(SessionFromOnnx)``
(the second with ``graph_optimization_level="disable"``), then ``Comparator.compare_accuracy`` with
``CompareFunc.simple``. Cases interleaved, ``--repeat`` times, medians and the ratio printed. The process imports
PyTorch first where it is installed (``--no-torch``: not): Parity collects the garbage of each runner it releases,
and a full collection walks every object of the process (80 ms beside PyTorch), where Parity's collections walk
only what the run made (``parity.api.frozen_heap``). Target: at most 3x the anchor.

    python bench/api_run.py [--repeat 30] [--no-torch]
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from common import median, table, verdict  # noqa: E402
from models import small_cnn  # noqa: E402

TARGET = 3.0


def anchor(model: str) -> None:
    import onnxruntime as ort

    feed = {"x": np.random.default_rng(1).uniform(0, 1, (1, 3, 32, 32)).astype(np.float32)}
    outs = []
    for level in (ort.GraphOptimizationLevel.ORT_ENABLE_ALL, ort.GraphOptimizationLevel.ORT_DISABLE_ALL):
        options = ort.SessionOptions()
        options.graph_optimization_level = level
        session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        outs.append(session.run(None, feed)[0])
        del session
    assert np.allclose(outs[0], outs[1], rtol=1e-5, atol=1e-5)


def parity_run(model: str) -> None:
    from parity_onnxrt import OnnxrtRunner, SessionFromOnnx

    from parity import Comparator, CompareFunc, DataLoader

    runners = [OnnxrtRunner(SessionFromOnnx(model)), OnnxrtRunner(SessionFromOnnx(model, graph_optimization_level="disable"))]
    results = Comparator.run(runners, data_loader=DataLoader(iterations=1))
    assert Comparator.compare_accuracy(results, compare_func=CompareFunc.simple(atol=1e-5, rtol=1e-5))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--no-torch", action="store_true")
    args = parser.parse_args()
    if not args.no_torch:
        try:
            import torch  # noqa: F401
        except ImportError:
            print("info  PyTorch is not installed: the process holds only Parity's and onnxruntime's objects")
    print(f"objects the garbage collector tracks in this process: {len(gc.get_objects())}")
    with tempfile.TemporaryDirectory() as tmp:
        model = str(small_cnn(Path(tmp) / "cnn.onnx"))
        cases = {"onnxruntime + numpy (anchor)": anchor, "parity Comparator.run + compare_accuracy": parity_run}
        for fn in cases.values():  # warm-up: imports, plugin discovery
            fn(model)
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.repeat):
            for name, fn in cases.items():
                start = time.perf_counter()
                fn(model)
                times[name].append(time.perf_counter() - start)
    med = {name: median(values) * 1000 for name, values in times.items()}
    print(table(["case", "median ms"], [[name, ms] for name, ms in med.items()]))
    ratio = med["parity Comparator.run + compare_accuracy"] / med["onnxruntime + numpy (anchor)"]
    return 0 if verdict(f"Parity's API <= {TARGET:g}x the anchor", ratio <= TARGET, f"{ratio:.2f}x") else 1


if __name__ == "__main__":
    raise SystemExit(main())
