"""Parity vs Polygraphy ``debug reduce``: checks needed and the size of the result, same planted faults.

A planted fault is a check script that fails iff the candidate still contains given node names; both
tools run the *same* script as a subprocess ``--check``, and the script counts its own invocations,
so the check counts are measured the same way for both. Models: an 800-node chain and a 158-node
transformer encoder (``parity_reduce.testing``). Also measures wall time per iteration with a cheap
check that Parity runs in-process (``parity run ... --validate`` on a planted NaN fault).

    python bench/reduce_bench.py                 # bisect for Polygraphy, every Parity mode
    python bench/reduce_bench.py --poly-linear   # also Polygraphy's linear mode (hundreds of checks)
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import onnx
from parity_reduce.testing import chain, encoder

CHECK = """import os, sys
import onnx
with open(os.environ["COUNT_FILE"], "a") as f:
    f.write("x")
names = {n.name for n in onnx.load(sys.argv[1], load_external_data=False).graph.node}
sys.exit(1 if all(n in names for n in sys.argv[2:]) else 0)
"""

FAULTS = {
    "chain": {"single": ["n400"], "pair": ["n100", "n700"]},
    "encoder": {"single": ["softmax_67"], "pair": ["softmax_17", "erf_136"]},
}
TARGETS = {("chain", "single"): 18, ("encoder", "single"): 40, ("chain", "pair"): 60, ("encoder", "pair"): 60}


def run_tool(tool: str, model: str, mode: str, fault: list[str], work: Path) -> tuple[int, int, float]:
    """(checks, nodes in the result, seconds)."""
    count = work / f"count_{tool}_{mode}"
    count.write_text("")
    out = work / f"out_{tool}_{mode}.onnx"
    artifact = "polygraphy_debug.onnx" if tool == "polygraphy" else "parity_debug.onnx"
    cmd = [tool, "debug", "reduce", model, "-o", str(out), "--mode", mode]
    if tool == "parity":
        cmd += ["--no-repro", "-q", "--no-resume"]
    cmd += ["--check", sys.executable, str(work / "check.py"), artifact, *fault]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=work, env={**os.environ, "COUNT_FILE": str(count)}, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0 or not out.exists():
        print(f"  {tool} {mode} failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip().splitlines()[-1:]}")
        return -1, -1, seconds
    return len(count.read_text()), len(onnx.load(str(out)).graph.node), seconds


def nan_chain(n: int = 200) -> onnx.ModelProto:
    """A chain whose nodes n100 (Neg) and n101 (Sqrt) together make NaNs from positive inputs."""
    model = chain(n)
    nodes = model.graph.node
    nodes[100].op_type, nodes[101].op_type = "Neg", "Sqrt"
    for k in (100, 101):
        del nodes[k].input[1:]
    return model


def per_iteration(work: Path) -> None:
    model = work / "nan_chain.onnx"
    onnx.save(nan_chain(), str(model))
    rows = []
    for tool, artifact in (("polygraphy", "polygraphy_debug.onnx"), ("parity", "parity_debug.onnx")):
        cmd = [tool, "debug", "reduce", str(model), "-o", str(work / f"nan_{tool}.onnx"), "--mode", "bisect"]
        if tool == "parity":
            cmd += ["--no-repro", "--no-resume"]
        cmd += ["--check", tool, "run", artifact, "--onnxrt", "--validate"]
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        text = proc.stdout + proc.stderr
        # One line per check: "parity: [N3] bad | ..." / "[I]     PASSED | Iteration 3 | Duration 1.9s"
        checks = text.count("parity: [N") if tool == "parity" else len(re.findall(r"(?:PASSED|FAILED) \| Iteration \d+ \| Duration", text))
        nodes = len(onnx.load(str(work / f"nan_{tool}.onnx")).graph.node) if proc.returncode == 0 else -1
        rows.append((tool, checks, nodes, seconds))
        print(f"  {tool:10s} bisect: {checks:3d} checks, {nodes:3d} nodes, {seconds:6.1f}s, {seconds / max(checks, 1):.3f}s per iteration (rc {proc.returncode})")
    (_, pc, _, ps), (_, qc, _, qs) = rows
    if pc > 0 and qc > 0:
        print(f"  per-iteration wall time ratio Polygraphy/Parity: {(ps / pc) / (qs / qc):.1f}x (target >= 3x)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--poly-linear", action="store_true", help="also run Polygraphy's linear mode (slow)")
    parser.add_argument("--parity-modes", default="dichotomic,quickxplain,ddmin,bisect", help="Parity modes to run")
    parser.add_argument("--skip-timing", action="store_true", help="skip the per-iteration wall time comparison")
    parser.add_argument("--only-timing", action="store_true", help="only the per-iteration wall time comparison")
    args = parser.parse_args()
    if not shutil.which("polygraphy"):
        print("polygraphy is not installed: pip install polygraphy")
        return 2
    work = Path(tempfile.mkdtemp(prefix="reduce_bench_"))
    (work / "check.py").write_text(CHECK)
    onnx.save(chain(800), str(work / "chain.onnx"))
    onnx.save(encoder(), str(work / "encoder.onnx"))
    poly_modes = ["bisect", *(["linear"] if args.poly_linear else [])]
    modes = args.parity_modes.split(",")
    print(f"work dir: {work}")
    for model_name, faults in ({} if args.only_timing else FAULTS).items():
        model = str(work / f"{model_name}.onnx")
        for kind, fault in faults.items():
            print(f"{model_name} ({len(onnx.load(model).graph.node)} nodes), {kind} fault {fault}:")
            poly = {m: run_tool("polygraphy", model, m, fault, work) for m in poly_modes}
            for m, (c, n, s) in poly.items():
                print(f"  polygraphy {m:11s}: {c:4d} checks -> {n:4d} nodes  ({s:.1f}s)")
            base_checks, base_nodes, _ = poly["bisect"]
            for m in modes:
                c, n, s = run_tool("parity", model, m, fault, work)
                ratio = f"checks polygraphy-bisect/parity = {base_checks / c:.2f}, nodes polygraphy-bisect/parity = {base_nodes / n:.1f}" if c > 0 and n > 0 else ""
                print(f"  parity     {m:11s}: {c:4d} checks -> {n:4d} nodes  ({s:.1f}s)  {ratio}")
            target = TARGETS[(model_name, kind)]
            print(f"  target: {len(fault)} node(s) in <= {target if kind == 'pair' or model_name == 'encoder' else base_checks} checks")
    if not args.skip_timing:
        print("wall time per iteration, cheap check (parity run in-process vs polygraphy run subprocess), 200-node chain, NaN fault:")
        per_iteration(work)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
