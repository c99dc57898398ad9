"""Shared helpers for the bench scripts: run a command, time it, read its peak RSS, print a table.

Every bench measures Parity and Polygraphy in the same run, interleaved and repeated, and reports medians
and ratios, because other work on the machine makes single timings noisy.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent  # console scripts beside this interpreter (not pyenv's bash shims)


def tool(name: str) -> str:
    path = BIN / name
    return str(path) if path.exists() else name


def run_measured(cmd: list[str], env: dict | None = None, cwd: str | None = None) -> tuple[float, float, int, str]:
    """``(wall seconds, peak RSS MiB, exit code, stdout+stderr)`` of one command (RSS via GNU time)."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as rss_file:
        full = ["/usr/bin/time", "-o", rss_file.name, "-f", "%M", *cmd] if Path("/usr/bin/time").exists() else cmd
        start = time.perf_counter()
        proc = subprocess.run(full, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wall = time.perf_counter() - start
        lines = [line for line in Path(rss_file.name).read_text().split() if line.isdigit()]
        rss = int(lines[-1]) / 1024 if lines else float("nan")
    return wall, rss, proc.returncode, proc.stdout


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def table(header: list[str], rows: list[list]) -> str:
    cells = [header, *[[_fmt(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)


def verdict(name: str, ok: bool, detail: str) -> bool:
    print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}")
    return ok


def clean_env(bytecode_dir: str | Path | None = None, **extra: str) -> dict:
    """The environment without ``PARITY_*`` settings. With ``bytecode_dir``, both tools get cached bytecode
    there, as a pip install has it: this machine sets PYTHONDONTWRITEBYTECODE, which recompiles Parity's
    editable sources on every start (~0.2 s) while Polygraphy's wheel ships its .pyc files."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARITY_")}
    if bytecode_dir is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(bytecode_dir)
    env.update(extra)
    return env


def make_big_model(directory: str | Path, side: int = 8192) -> Path:
    """x float32[1,1024] -> Tile -> outer product (MatMul, K=1) -> y float32[side,side] (64Mi elements by default):
    inference is cheap, so the run is dominated by moving and comparing the big output."""
    import onnx
    from onnx import TensorProto, helper

    reps = helper.make_tensor("reps", TensorProto.INT64, [2], [1, side // 1024])
    nodes = [
        helper.make_node("Tile", ["x", "reps"], ["row"]),
        helper.make_node("Transpose", ["row"], ["col"], perm=[1, 0]),
        helper.make_node("MatMul", ["col", "row"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "big_output",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1024])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [side, side])],
        [reps],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10  # onnxruntime cannot load the IR version onnx writes by default
    path = Path(directory) / "big_output.onnx"
    onnx.save(model, path)
    return path
