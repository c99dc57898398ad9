"""Heatmaps of a layerwise run: the old way (a matplotlib figure per picture, constrained layout, colorbars,
savefig) against the new (parity_reports.plots.render_heatmap: numpy and Pillow), on the tensors of a CNN-like run.

    python bench/heatmaps.py [--count 165] [--out DIR]

Prints the seconds each way and the ratio. The tensors are NCHW activations of the sizes a small detector
gives at 64x64-640x640 (16-96 channels, 8-160 pixels a side) and 2-D logits, with fp16-like errors.

Measured on the 2-core dev machine (shared with other work): 40 pictures here 45.3 s -> 4.5 s (10.1x); and
end to end, ``parity run det16.onnx --onnxrt --load-outputs golden.npz --tolerance-preset fp16 --onnx-outputs
mark all --save-heatmaps maps`` on PP-OCRv4 det (64x64, 396 pictures) 481.8 s -> 66.4 s (the run alone: 3.9 s),
7.6x on the drawing. What is left is mostly Pillow's PNG encoding of noisy error maps (compress_level=1).
"""

from __future__ import annotations

import argparse
import io
import tempfile
import time
from pathlib import Path

import numpy as np


def tensors(count: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    shapes = [(1, c, s, s) for c, s in ((16, 160), (24, 80), (40, 40), (64, 20), (96, 10), (32, 160), (64, 40))] + [(1, 1000)]
    out = []
    for k in range(count):
        shape = shapes[k % len(shapes)]
        ref = rng.standard_normal(shape).astype(np.float32) * 10
        out.append((ref.astype(np.float16).astype(np.float32), ref))
    return out


def old(pairs: list[tuple[np.ndarray, np.ndarray]], folder: Path) -> float:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from parity_reports.plots import _errors, _mosaic, heatmap_figure

    start = time.perf_counter()
    for k, (a, b) in enumerate(pairs):
        mosaics = tuple(_mosaic(e) for e in _errors(a, b))
        height, width = mosaics[0].shape
        fig = Figure(figsize=(12.5, min(max(5.5 * height / max(width, 1), 1.5), 9.0) + 1.2), dpi=100, layout="constrained")
        FigureCanvasAgg(fig)
        heatmap_figure(fig, mosaics, f"t{k} | iteration 0 | a vs b\nshape {list(a.shape)}")
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png")
        (folder / f"old_{k}.png").write_bytes(buffer.getvalue())
    return time.perf_counter() - start


def new(pairs: list[tuple[np.ndarray, np.ndarray]], folder: Path) -> float:
    from parity_reports.plots import ErrorPictures

    class Pair:
        actual, reference = "a", "b"

    pictures = ErrorPictures(save_heatmaps=folder)
    start = time.perf_counter()
    pictures.on_compared(0, Pair(), {f"t{k}": a for k, (a, _) in enumerate(pairs)}, {f"t{k}": b for k, (_, b) in enumerate(pairs)})
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=165, help="pictures (165: the layerwise run of the issue)")
    parser.add_argument("--out", type=Path, help="keep the PNG files here (default: a temporary folder)")
    args = parser.parse_args()
    pairs = tensors(args.count)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.out or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        new(pairs[:2], folder / "warm")  # imports, fonts
        t_new = new(pairs, folder / "new")
        t_old = old(pairs, folder)
    print(
        f"{args.count} heatmaps: matplotlib figure each {t_old:.1f} s ({t_old / args.count * 1000:.0f} ms each), "
        f"numpy+Pillow {t_new:.1f} s ({t_new / args.count * 1000:.0f} ms each): {t_old / t_new:.1f}x faster"
    )


if __name__ == "__main__":
    main()
