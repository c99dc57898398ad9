"""Parity vs Polygraphy ``debug reduce`` on a real fault: the PP-OCRv4 detector converted to fp16 with
clamped out-of-range weights (the classic broken conversion), checked the way Polygraphy's reduce guide
does: every candidate runs on the fp32 model's intermediate tensors (``polygraphy data merge`` of the
inputs and the mark-all outputs) and is compared with the fp32 outputs at atol/rtol 0.1, ``--fail-code 1``.
Both tools run the same check script, which counts its invocations.

    python bench/reduce_real_fault.py [--budgets 16,32] [--keep]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import onnx

# Exit 1 only on an accuracy mismatch (Polygraphy's "Difference exceeds tolerance" line); a candidate that
# cannot run (e.g. a cut tensor the fp32 model has no value for, such as the fp16 cast of x) passes, so
# neither tool is steered by load errors. Each call appends one mark to COUNT_FILE: "x" a checked candidate
# (passed or mismatch), "e" one polygraphy could not run, "!" a candidate path that does not exist (a broken
# --check command line: the bench stops on it). The earlier version exited with polygraphy's own status,
# and every candidate "failed"; the one after it was handed the literal path "ARTIFACT", and every
# candidate "passed".
CHECK = """import os, subprocess, sys
path = sys.argv[1]
exe = os.path.join(os.path.dirname(sys.executable), "polygraphy")
if not os.path.isfile(path):
    mark, code = "!", 0
else:
    args = ["run", path, "--onnxrt", "--load-inputs", "layer_in.json", "--load-outputs", "golden.json", "--atol", "0.1", "--rtol", "0.1"]
    p = subprocess.run([exe, *args], capture_output=True, text=True)
    out = p.stdout + p.stderr
    code = 1 if "Difference exceeds tolerance" in out else 0
    mark = "x" if code or p.returncode == 0 else "e"
with open(os.environ["COUNT_FILE"], "a") as f:
    f.write(mark)
sys.exit(code)
"""


def tool(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def sh(cmd: list[str], work: Path, **env: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env={**os.environ, **env})
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])} ... failed ({proc.returncode}): {(proc.stderr or proc.stdout)[-400:]}")
    return proc


def check_cmd(artifact: str) -> list[str]:
    """The check command line both tools run (and the validation runs), on ``artifact``."""
    return [sys.executable, "check.py", artifact]


def reduce(cmd: list[str], work: Path, out: str, artifact: str) -> tuple[int, int, int, float]:
    """(checks, nodes of the result, candidates polygraphy could not run, seconds)."""
    count = work / f"count_{out}"
    count.write_text("")
    started = time.perf_counter()
    sh(cmd + ["-o", out, "--load-inputs", "layer_in.json", "--fail-code", "1", "--check", *check_cmd(artifact)], work, COUNT_FILE=str(count))
    seconds = time.perf_counter() - started
    marks = count.read_text()
    if "!" in marks:
        raise SystemExit(f"{cmd[0]}: the check was handed a path that does not exist ({marks.count('!')} of {len(marks)} checks): fix its --check")
    return len(marks), len(onnx.load(str(work / out)).graph.node), marks.count("e"), seconds


def validate_check(work: Path) -> None:
    """The check must fail on the full fp16 model and pass on a harmless one-node subgraph."""
    from parity_reduce.graph import GraphIndex, prepare
    from polygraphy.json import load_json

    def check(path: str) -> int:
        return subprocess.run(check_cmd(path), cwd=work, env={**os.environ, "COUNT_FILE": os.devnull}).returncode

    if check("f16.onnx") != 1:
        raise SystemExit("the check does not fail on the full fp16 model: nothing to reduce")
    known = set(load_json(str(work / "layer_in.json"))[0])
    index = GraphIndex(prepare(onnx.load(str(work / "f16.onnx"))))
    for i, node in enumerate(index.nodes):
        reads = [t for t in index.reads[i] if t not in index.weights]
        if node.op_type == "Relu" and reads and all(t in known for t in reads) and all(o in known for o in node.output):
            onnx.save(index.build(frozenset([i])), str(work / "harmless.onnx"))
            if check("harmless.onnx") != 0:
                raise SystemExit(f"the check fails on the one-node model of {node.name} ({node.op_type}): it does not test accuracy only")
            print(f"check validated: the full model fails, the one-node model of {node.name} ({node.op_type}) passes")
            return
    raise SystemExit("no one-node Relu model with fp32 values for all its tensors to validate the check with")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", default="16", help="Parity --max-checks budgets for --mode staged (also run without)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (models, inputs, goldens, reduced models)")
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
        validate_check(work)
        print(f"model: ppocr_det sanitized, fp16 --clamp-out-of-range, {total} nodes; check: polygraphy run --onnxrt on fp32 intermediates, atol/rtol 0.1")
        rows = []

        def run(label: str, cmd: list[str], out: str) -> None:
            artifact = "polygraphy_debug.onnx" if cmd[0] == poly else "parity_debug.onnx"
            checks, nodes, errors, seconds = reduce(cmd, work, out, artifact)
            rows.append((label, checks, nodes))
            print(f"  {label:34s} {checks:4d} checks -> {nodes:4d} nodes  ({errors} candidates could not run, {seconds:.0f} s)", flush=True)

        run("polygraphy bisect", [poly, "debug", "reduce", "f16.onnx", "--mode", "bisect"], "poly.onnx")
        p_checks, p_nodes = rows[0][1], rows[0][2]
        if p_nodes == total:
            raise SystemExit("polygraphy bisect kept the whole model: no candidate failed, so the check is not what it was validated as")
        base = [parity, "debug", "reduce", "f16.onnx", "--no-repro", "--no-resume", "-q"]
        for budget in [int(b) for b in args.budgets.split(",") if b]:
            run(f"parity staged --max-checks {budget}", base + ["--mode", "staged", "--max-checks", str(budget)], f"staged_{budget}.onnx")
        run("parity staged (no budget)", base + ["--mode", "staged"], "staged.onnx")
        run("parity dichotomic (default)", base + ["--mode", "dichotomic"], "dich.onnx")
        run("parity bisect", base + ["--mode", "bisect"], "pbisect.onnx")
        print("\n| run | checks | nodes | checks / Polygraphy | nodes / Polygraphy |\n|---|---|---|---|---|")
        for label, checks, nodes in rows:
            print(f"| {label} | {checks} | {nodes} | {checks / p_checks:.2f} | {nodes / p_nodes:.2f} |")
    finally:
        if args.keep:
            print(f"files kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
