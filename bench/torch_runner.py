"""Bench: PyTorch on the GPU (parity-torch's ``--torch`` runner) against onnxruntime on the CPU, and what comparing
them costs (issue 31).

    python bench/torch_runner.py [--repeat 20] [--warm-up 5] [--device cuda] [--models cnn,encoder] [--cli]

Models, built and exported here (seeded weights): ``cnn``, a ResNet-style network (stem, 8 residual blocks of 64 to
512 channels, 8x3x224x224 input) and ``encoder``, a transformer encoder (6 layers, d=512, 8 heads, 8x256 tokens).
Each is saved with ``torch.export.save`` and exported with ``torch.onnx.export(dynamo=True)``. Runners, in-process
through the plugins' public modules, exactly as ``parity run model.onnx --onnxrt --torch --torch-model model.pt2``
builds them: ``TorchRunner`` on ``--device`` (CUDA is synchronised before the clock stops; host-device copies
included) and onnxruntime's CPU provider on every core. Warm-up runs are excluded; medians of ``--repeat``.

Printed per model: each runner's median inference time and their ratio, the ``simple`` comparison of the two
outputs (time, max abs error, verdict), and the layerwise cost: the torch runner with every tensor that has an ONNX
counterpart marked (``--torch-outputs mark all``), against the unmarked run. With ``--cli``, also the wall time of
the whole ``parity run`` of the pair. No target: figures for the closing note (the issue asks for real timings).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from common import median, table  # noqa: E402


def cnn_model(torch):
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
            self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
            self.skip = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)) if stride != 1 or cin != cout else nn.Identity()

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            return torch.relu(self.bn2(self.conv2(y)) + self.skip(x))

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
            plan = [(64, 64, 1), (64, 64, 1), (64, 128, 2), (128, 128, 1), (128, 256, 2), (256, 256, 1), (256, 512, 2), (512, 512, 1)]
            self.blocks = nn.Sequential(*(Block(*p) for p in plan))
            self.head = nn.Linear(512, 1000)

        def forward(self, x):
            return self.head(self.blocks(self.stem(x)).mean(dim=(2, 3)))

    return Net().eval(), (torch.randn(8, 3, 224, 224),)


def encoder_model(torch):
    nn = torch.nn
    layer = nn.TransformerEncoderLayer(512, 8, 2048, dropout=0.0, batch_first=True)
    model = nn.TransformerEncoder(layer, 6, enable_nested_tensor=False).eval()
    return model, (torch.randn(8, 256, 512),)


MODELS = {"cnn": cnn_model, "encoder": encoder_model}


def export(torch, name: str, folder: Path, device: str) -> tuple[Path, Path, dict[str, np.ndarray]]:
    """The program exported on the device it will run on (a program traced on the CPU may bake in the CPU's strides:
    the encoder's attention, exported on the CPU and moved to CUDA, fails a view there), the ONNX export on the CPU."""
    torch.manual_seed(0)
    model, args = MODELS[name](torch)
    with torch.no_grad():
        pt2, onnx_path = folder / f"{name}.pt2", folder / f"{name}.onnx"
        torch.onnx.export(model, args, dynamo=True, verbose=False).save(str(onnx_path))
        torch.export.save(torch.export.export(model.to(device), tuple(a.to(device) for a in args)), str(pt2))
    import onnx

    names = [i.name for i in onnx.load(str(onnx_path), load_external_data=False).graph.input]
    return pt2, onnx_path, {n: a.numpy() for n, a in zip(names, args)}


def timed_runs(runner, feed: dict[str, np.ndarray], warm_up: int, repeat: int) -> tuple[float, dict[str, np.ndarray]]:
    for _ in range(warm_up):
        runner.infer(feed)
    times = []
    for _ in range(repeat):
        outputs = runner.infer(feed)
        times.append(runner.last_inference_time)
    return median(times), outputs


def bench(torch, name: str, folder: Path, args: argparse.Namespace) -> list[list[object]]:
    from parity_onnxrt.api import OnnxrtRunner, SessionFromOnnx
    from parity_torch.api import ProgramFromPath, TorchRunner

    from parity.compare.simple import SimpleCompare  # the metric parity run compares with

    pt2, onnx_path, feed = export(torch, name, folder, args.device)
    with OnnxrtRunner(SessionFromOnnx(str(onnx_path))) as ort_runner:
        ort_s, ort_out = timed_runs(ort_runner, feed, args.warm_up, args.repeat)
    with TorchRunner(ProgramFromPath(pt2), device=args.device) as torch_runner:
        torch_s, torch_out = timed_runs(torch_runner, feed, args.warm_up, args.repeat)
    with TorchRunner(ProgramFromPath(pt2), device=args.device, outputs="mark all", onnx_model=str(onnx_path)) as marked:
        marked_s, marked_out = timed_runs(marked, feed, args.warm_up, max(3, args.repeat // 4))
    compare = SimpleCompare(atol=1e-3, rtol=1e-3, statistics="shown")
    common = sorted(set(ort_out) & set(torch_out))
    checks = [compare(out, torch_out[out], ort_out[out]) for out in common]  # warm-up: the compare kernel's session is built once
    compare_times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        checks = [compare(out, torch_out[out], ort_out[out]) for out in common]
        compare_times.append(time.perf_counter() - start)
    compare_s = median(compare_times)
    worst = max((c.values["max_abs"] for c in checks), default=float("nan"))
    passed = "PASS" if checks and all(c.passed for c in checks) else "FAIL"
    rows = [
        [name, "onnxruntime CPU", ort_s * 1e3, 1.0, ""],
        [name, f"torch {args.device}", torch_s * 1e3, ort_s / torch_s, "x faster than onnxruntime CPU"],
        [name, f"torch {args.device}, {len(marked_out)} tensors marked", marked_s * 1e3, marked_s / torch_s, "x the unmarked run"],
        [name, f"simple compare of {len(common)} output(s)", compare_s * 1e3, compare_s / torch_s, f"x torch's inference; max abs {worst:.3g}, {passed}"],
    ]
    if args.cli:
        cmd = ["parity", "run", str(onnx_path), "--onnxrt", "--torch", "--torch-model", str(pt2), "--torch-device", args.device, "--atol", "1e-3", "--rtol", "1e-3"]
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env={k: v for k, v in os.environ.items() if not k.startswith("PARITY_")})
        wall = time.perf_counter() - start
        verdict = (proc.stdout.strip().splitlines() or ["?"])[-1]
        rows.append([name, "parity run (whole command)", wall * 1e3, float("nan"), f"exit {proc.returncode}: {verdict[:60]}"])
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--warm-up", type=int, default=5)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--models", default="cnn,encoder")
    parser.add_argument("--cli", action="store_true", help="also time the whole `parity run` of the pair")
    args = parser.parse_args()
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: give --device cpu")
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    print(f"torch {torch.__version__}, GPU {gpu}, {os.cpu_count()} CPU cores; medians of {args.repeat} after {args.warm_up} warm-up runs")
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            rows += bench(torch, name, Path(tmp), args)
    print(table(["model", "case", "median ms", "ratio", "ratio of"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
