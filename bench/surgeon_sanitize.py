"""Bench: ``surgeon sanitize --fold-constants``, Parity vs Polygraphy 0.53.6 (the anchor), issue 30.

    python bench/surgeon_sanitize.py [--repeat 5] [--models light_resnet50,encoder] [--quick]

Models: ``ppocr_det`` (PP-OCRv4's detector from the test corpus, dynamic shapes: symbolic shape inference is
most of the time), ``light_resnet50`` (onnx's own test model, shipped in the onnx wheel: ResNet-50 whose 239 weights are
``ConstantOfShape`` nodes, so folding writes 100 MB of weights; 415 nodes -> 176) and ``encoder`` (the
158-node BERT-style encoder of ``models.py``, 9 MB). Both CLIs run interleaved, one unmeasured warm-up
each first (page cache, bytecode); medians of wall time and peak RSS, the ratio, and a check that both folded
models have the same node count and compute the same output. Parity's time includes its final validation
(onnx checker full check + an onnxruntime load), which Polygraphy does not do. A third row, ``floor``,
times ``python -c "import onnx, onnxruntime, onnx_graphsurgeon, sympy"`` (sympy: onnxruntime's symbolic
shape inference, which both tools run). Target: Parity <= 0.35x Polygraphy's time on each model.
``--quick``: 2 repeats, light_resnet50 only (the lead's device run).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from common import clean_env, median, run_measured, table, tool, verdict  # noqa: E402

TARGET = 0.35


def light_resnet50(folder: Path) -> Path:
    """onnx's backend test model ``light_resnet50`` (in every onnx wheel), copied into ``folder``."""
    import shutil

    import onnx

    source = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_resnet50.onnx"
    if not source.exists():
        raise SystemExit(f"{source} is missing: this onnx installation has no backend test data")
    return Path(shutil.copy(source, folder / "light_resnet50.onnx"))


def encoder(folder: Path) -> Path:
    from models import transformer_encoder

    return transformer_encoder(folder / "encoder.onnx")


def ppocr_det(folder: Path) -> Path:
    """PP-OCRv4's text detector (rapidocr-onnxruntime's wheel, through the test corpus and its cache,
    ``PARITY_CORPUS_CACHE``): dynamic height and width, a chain of Resize nodes whose symbolic dims cost
    onnxruntime's shape inference (and sympy) most of a sanitize."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
    from corpus import model_path

    return Path(shutil.copy(model_path("ppocr_det"), folder / "ppocr_det.onnx"))


MODELS = {"light_resnet50": light_resnet50, "encoder": encoder, "ppocr_det": ppocr_det}


def _outputs(path: str) -> object:
    import numpy as np
    import onnxruntime as ort

    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feed = {}
    for i in s.get_inputs():
        shape = [d if isinstance(d, int) else (1 if k == 0 else 64) for k, d in enumerate(i.shape)]  # batch 1, other dims 64
        feed[i.name] = np.random.RandomState(0).rand(*shape).astype(np.float32)
    return s.run(None, feed)[0]


def bench(name: str, folder: Path, repeat: int, pyc: str) -> bool:
    import numpy as np
    import onnx

    model = MODELS[name](folder)
    outs = {k: str(folder / f"{name}.{k}.onnx") for k in ("polygraphy", "parity")}
    cmds = {k: [tool(k), "surgeon", "sanitize", str(model), "--fold-constants", "-o", outs[k]] for k in outs}
    # the floor of an in-process sanitize with symbolic shape inference: the interpreter and what it imports
    cmds["floor"] = [sys.executable, "-c", "import onnx, onnxruntime, onnx_graphsurgeon, sympy"]
    times: dict[str, list[float]] = {k: [] for k in cmds}
    rss: dict[str, list[float]] = {k: [] for k in cmds}
    for i in range(repeat + 1):
        for k, cmd in cmds.items():
            if k in outs:
                Path(outs[k]).unlink(missing_ok=True)
            wall, peak, code, out = run_measured(cmd, env=clean_env(pyc))
            if code != 0:
                print(out)
                return verdict(f"{name}: {k}", False, f"exit {code}")
            if i:  # the first round warms the page cache and the bytecode cache
                times[k].append(wall)
                rss[k].append(peak)
    nodes = {k: len(onnx.load(outs[k]).graph.node) for k in outs}
    same = bool(np.array_equal(_outputs(outs["polygraphy"]), _outputs(outs["parity"])))
    t, m = {k: median(v) for k, v in times.items()}, {k: median(v) for k, v in rss.items()}
    print(f"\n{name}: {model.stat().st_size / 1e6:.1f} MB, {len(onnx.load(str(model)).graph.node)} nodes; after folding {nodes}; outputs identical: {same}")
    print(table(["tool", "median s", "x Polygraphy", "peak MiB", "x Polygraphy"], [[k, t[k], t[k] / t["polygraphy"], m[k], m[k] / m["polygraphy"]] for k in cmds]))
    ratio = t["parity"] / t["polygraphy"]
    ok = verdict(f"{name}: sanitize --fold-constants <= {TARGET}x Polygraphy's time", ratio <= TARGET, f"{ratio:.2f}x")
    return verdict(f"{name}: same folded result", same and nodes["parity"] == nodes["polygraphy"], str(nodes)) and ok


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--models", default="light_resnet50,encoder", help=f"comma-separated: {', '.join(MODELS)}")
    parser.add_argument("--quick", action="store_true", help="2 repeats, light_resnet50 only")
    args = parser.parse_args()
    repeat = 2 if args.quick else args.repeat
    if args.quick:
        args.models = "light_resnet50"
    ok = True
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as pyc:
        for name in args.models.split(","):
            ok &= bench(name.strip(), Path(tmp), repeat, pyc)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
