"""Parity vs Polygraphy ``debug reduce`` on a real fault: the PP-OCRv4 detector converted to fp16 with
clamped out-of-range weights (the classic broken conversion), checked the way Polygraphy's reduce guide
does: every candidate runs on the fp32 model's intermediate tensors (``polygraphy data merge`` of the
inputs and the mark-all outputs) and is compared with the fp32 outputs at atol/rtol 0.1, ``--fail-code 1``.
Both tools run the same check script, which counts its invocations.

    python bench/reduce_real_fault.py [--budgets 16,32]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import onnx

CHECK = """import os, sys
with open(os.environ["COUNT_FILE"], "a") as f:
    f.write("x")
exe = os.path.join(os.path.dirname(sys.executable), "polygraphy")
os.execv(exe, [exe, "run", sys.argv[1], "--onnxrt", "--load-inputs", "layer_in.json", "--load-outputs", "golden.json", "--atol", "0.1", "--rtol", "0.1"])
"""


def tool(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def sh(cmd: list[str], work: Path, **env: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env={**os.environ, **env})
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])} ... failed ({proc.returncode}): {(proc.stderr or proc.stdout)[-400:]}")
    return proc


def reduce(name: str, cmd: list[str], work: Path, out: str) -> tuple[int, int]:
    count = work / f"count_{out}"
    count.write_text("")
    sh(cmd + ["-o", out, "--load-inputs", "layer_in.json", "--fail-code", "1", "--check", sys.executable, "check.py", "ARTIFACT"], work, COUNT_FILE=str(count))
    return len(count.read_text()), len(onnx.load(str(work / out)).graph.node)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", default="16,32", help="Parity --max-checks budgets for --mode staged")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import corpus

    work = Path(tempfile.mkdtemp(prefix="reduce_real_"))
    try:
        shutil.copy(corpus.model_path("ppocr_det"), work / "det.onnx")
        (work / "check.py").write_text(CHECK)
        parity, poly = tool("parity"), tool("polygraphy")
        sh([parity, "surgeon", "sanitize", "det.onnx", "-o", "san.onnx", "--override-input-shapes", "x:[1,3,64,64]", "--fold-constants"], work)
        sh([parity, "convert", "--fp-to-fp16", "--clamp-out-of-range", "san.onnx", "-o", "f16.onnx"], work)
        golden = ["--onnx-outputs", "mark", "all", "--input-shapes", "x:[1,3,64,64]", "--save-inputs", "in.json", "--save-outputs", "golden.json"]
        sh([poly, "run", "san.onnx", "--onnxrt", *golden], work)
        sh([poly, "data", "merge", "in.json", "golden.json", "-o", "layer_in.json"], work)
        total = len(onnx.load(str(work / "f16.onnx")).graph.node)
        print(f"model: ppocr_det sanitized, fp16 --clamp-out-of-range, {total} nodes; check: polygraphy run --onnxrt on fp32 intermediates, atol/rtol 0.1")
        rows = []

        def run(label: str, cmd: list[str], out: str) -> None:
            artifact = "polygraphy_debug.onnx" if cmd[0] == poly else "parity_debug.onnx"
            checks, nodes = reduce(label, [c if c != "ARTIFACT" else artifact for c in cmd], work, out)
            rows.append((label, checks, nodes))
            print(f"  {label:34s} {checks:4d} checks -> {nodes:4d} nodes", flush=True)

        run("polygraphy bisect", [poly, "debug", "reduce", "f16.onnx", "--mode", "bisect"], "poly.onnx")
        p_checks, p_nodes = rows[0][1], rows[0][2]
        base = [parity, "debug", "reduce", "f16.onnx", "--no-repro", "--no-resume", "-q"]
        for budget in [int(b) for b in args.budgets.split(",") if b]:
            run(f"parity staged --max-checks {budget}", base + ["--mode", "staged", "--max-checks", str(budget)], f"staged_{budget}.onnx")
        run("parity bisect", base + ["--mode", "bisect"], "pbisect.onnx")
        for label, checks, nodes in rows[1:]:
            print(f"  {label:34s} checks/polygraphy = {checks / p_checks:.2f}, nodes/polygraphy = {nodes / p_nodes:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
