"""Every command on LLM-size decoders with external weights, beside Polygraphy 0.53.6 with the same commands.

    python bench/big_models.py --gib 2.4 7.5 --workdir /tmp/big [--timeout 600] [--only run,convert]

Generates one decoder per size (bench/llm_decoder.py: hidden 2048, 32 heads, vocabulary 32000, sequence 128, an
fp16 overflow planted in block 3), then runs each command as a child process and prints, per command, wall time,
peak RSS (the child's own, from ``os.wait4``), exit code and the first line of its error for Parity and for
Polygraphy, with the ratios: time against Polygraphy's, memory against the model's weights. Outputs go to a
fresh folder per command and are removed after it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from llm_decoder import build_decoder, layers_for_gib  # noqa: E402

SHAPE = {"hidden": 2048, "heads": 32, "vocab": 32000, "seq": 128}
VALS = ["--val-range", "input_ids:[0,31999]"]
# what debug reduce/precision check: no NaN or Inf in any tensor (the planted fp16 overflow)
NONFINITE = ["--onnxrt", "--validate", "--onnx-outputs", "mark", "all", *VALS]


def commands(model: Path, fp16: Path, out: Path, weights: int) -> dict[str, tuple[list[str] | None, list[str] | None]]:
    """name -> (Parity's argv, Polygraphy's argv or None where Polygraphy has no such command)."""
    m, h = str(model), str(fp16)
    block0 = "block0/mlp/residual:0"
    return {
        "inspect model": (["parity", "inspect", "model", m], ["polygraphy", "inspect", "model", m]),
        "check lint": (["parity", "check", "lint", m], ["polygraphy", "check", "lint", m]),
        "run --onnxrt": (["parity", "run", m, "--onnxrt", *VALS], ["polygraphy", "run", m, "--onnxrt", *VALS]),
        "run --onnxrt --onnxrt": (["parity", "run", m, "--onnxrt", "--onnxrt", *VALS], ["polygraphy", "run", m, "--onnxrt", "--onnxrt", *VALS]),
        "convert --fp-to-fp16": (
            ["parity", "convert", "--fp-to-fp16", m, "-o", f"{out}/fp16.onnx", "--save-external-data"],
            ["polygraphy", "convert", "--fp-to-fp16", m, "-o", f"{out}/fp16.onnx", "--save-external-data"],
        ),
        "surgeon sanitize": (
            ["parity", "surgeon", "sanitize", m, "-o", f"{out}/s.onnx", "--save-external-data"],
            ["polygraphy", "surgeon", "sanitize", m, "-o", f"{out}/s.onnx", "--save-external-data"],
        ),
        "surgeon sanitize --fold-constants": (
            ["parity", "surgeon", "sanitize", m, "-o", f"{out}/f.onnx", "--fold-constants", "--save-external-data"],
            ["polygraphy", "surgeon", "sanitize", m, "-o", f"{out}/f.onnx", "--fold-constants", "--save-external-data"],
        ),
        "surgeon extract": (
            ["parity", "surgeon", "extract", m, "-o", f"{out}/x.onnx", "--inputs", "input_ids:auto:auto", "--outputs", f"{block0}:auto", "--save-external-data"],
            ["polygraphy", "surgeon", "extract", m, "-o", f"{out}/x.onnx", "--inputs", "input_ids:auto:auto", "--outputs", f"{block0}:auto", "--save-external-data"],
        ),
        "run --onnx-outputs mark all": (
            ["parity", "run", m, "--onnxrt", "--onnx-outputs", "mark", "all", *VALS, "--save-outputs", f"{out}/all.npz"],
            ["polygraphy", "run", m, "--onnxrt", "--onnx-outputs", "mark", "all", *VALS, "--save-outputs", f"{out}/all.json"],
        ),
        "debug reduce (fp16 overflow)": (
            [
                "parity",
                "debug",
                "reduce",
                h,
                "-o",
                f"{out}/red.onnx",
                "--save-external-data",
                "--no-repro",
                "--no-reduce-inputs",
                "--check",
                "parity",
                "run",
                "parity_debug.onnx",
                *NONFINITE,
            ],
            [
                "polygraphy",
                "debug",
                "reduce",
                h,
                "-o",
                f"{out}/red.onnx",
                "--save-external-data",
                "--no-reduce-inputs",
                "--check",
                "polygraphy",
                "run",
                "polygraphy_debug.onnx",
                *NONFINITE,
            ],
        ),
        "debug precision (fp32 nodes for fp16)": (
            ["parity", "debug", "precision", m, "-o", f"{out}/mixed.onnx", "--save-external-data", "--check", "parity", "run", "parity_debug.onnx", *NONFINITE],
            None,  # Polygraphy's debug precision builds TensorRT engines; it has no ONNX-level search
        ),
        "debug localize (fp16 vs fp32)": (
            ["parity", "debug", "localize", h, "--onnxrt", "--reference-model", m, "--atol", "1", "--rtol", "1", "--memory-budget", str(weights // 4), *VALS],
            None,
        ),
    }


# Linux counts a forked child's copy of its parent's memory in the child's peak RSS, and exec keeps that peak: a
# command forked straight from a large process (a test worker that ran other tests) reports the worker's size. This
# small launcher (python -S) forks the command instead and writes the command's own wait4 peak to a file.
_LAUNCHER = (
    "import os, subprocess, sys\n"
    "p = subprocess.Popen(sys.argv[2:])\n"
    "_, status, usage = os.wait4(p.pid, 0)\n"
    "open(sys.argv[1], 'w').write(str(usage.ru_maxrss))\n"
    "sys.exit(os.waitstatus_to_exitcode(status) % 256)\n"
)


def measure(argv: list[str], cwd: Path, timeout: float) -> dict:
    """Run ``argv``; wall time, the command's own peak RSS (wait4, through _LAUNCHER), exit code, the last line of
    stderr and stdout."""
    start = time.perf_counter()
    peak_file = cwd / "peak_rss.txt"
    with open(cwd / "stderr.txt", "wb") as err, open(cwd / "stdout.txt", "wb") as out:
        launched = [sys.executable, "-S", "-c", _LAUNCHER, str(peak_file), *argv]
        proc = subprocess.Popen(launched, cwd=cwd, stdout=out, stderr=err, start_new_session=True)
        deadline = start + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)  # the launcher and the command
                pid, status, usage = os.wait4(proc.pid, 0)
                status = -9
                break
            time.sleep(0.05)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status) if status != -9 else 124
    lines = [ln for ln in (cwd / "stderr.txt").read_text(errors="replace").splitlines() if ln.strip()]
    stdout = (cwd / "stdout.txt").read_text(errors="replace")
    (cwd / "stdout.txt").unlink()
    (cwd / "stderr.txt").unlink()
    peak = int(peak_file.read_text()) if peak_file.exists() else usage.ru_maxrss  # killed: the launcher's own peak
    peak_file.unlink(missing_ok=True)
    return {"wall": wall, "rss": peak * 1024, "code": proc.returncode, "last": lines[-1][:140] if lines else "", "out": stdout}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gib", type=float, nargs="+", default=[2.4])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/parity-big"))
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--only", default="", help="comma-separated substrings of command names to run")
    parser.add_argument("--no-polygraphy", action="store_true")
    parser.add_argument("--polygraphy-only", default="", help="comma-separated substrings: Polygraphy runs only these commands")
    args = parser.parse_args()
    for gib in args.gib:
        folder = args.workdir / f"{gib}g"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        t = time.perf_counter()
        info = build_decoder(folder / "model.onnx", layers=layers_for_gib(gib, SHAPE["hidden"], SHAPE["vocab"], seq=SHAPE["seq"]), overflow_block=3, **SHAPE)
        weights = info["weight_bytes"]
        print(f"\n## decoder {gib} GiB: {info['layers']} blocks, {weights / 2**30:.2f} GiB of weights, generated in {time.perf_counter() - t:.1f} s")
        fp16 = folder / "fp16" / "model_fp16.onnx"
        fp16.parent.mkdir()
        made = measure(["parity", "convert", "--fp-to-fp16", str(folder / "model.onnx"), "-o", str(fp16), "--save-external-data"], folder, args.timeout)
        print(f"(fp16 twin for localize: exit {made['code']}, {made['wall']:.1f} s)")
        print("| command | parity s | parity peak RSS (x weights) | exit | polygraphy s | polygraphy peak RSS | exit | time ratio |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        notes = []
        for name, (ours, theirs) in commands(folder / "model.onnx", fp16, folder / "out", weights).items():
            if args.only and not any(part in name for part in args.only.split(",")):
                continue
            row = [name]
            results = []
            skip_theirs = args.no_polygraphy or (args.polygraphy_only and not any(part in name for part in args.polygraphy_only.split(",")))
            for argv, completed in ((ours, (0, 1)), (None if skip_theirs else theirs, (0,))):
                # Parity's exit 1 is a verdict (a divergence found); Polygraphy exits 1 on errors too, so only 0 counts
                if argv is None:
                    row += ["-", "-", "-"]
                    results.append(None)
                    continue
                out = folder / "out"
                shutil.rmtree(out, ignore_errors=True)
                out.mkdir()
                r = measure(argv, folder, args.timeout)
                r["ok"] = r["code"] in completed
                results.append(r)
                row += [f"{r['wall']:.1f}", f"{r['rss'] / 2**30:.2f} GiB ({r['rss'] / weights:.2f}x)", str(r["code"])]
                if not r["ok"]:
                    notes.append(f"{argv[0]} {name}: exit {r['code']}: {r['last']}")
                shutil.rmtree(out, ignore_errors=True)
            ours_r, theirs_r = results
            ratio = "-"
            if ours_r and theirs_r and theirs_r["ok"] and ours_r["ok"]:
                ratio = f"{ours_r['wall'] / theirs_r['wall']:.2f}x"
            row.append(ratio)
            print("| " + " | ".join(row) + " |", flush=True)
        for note in notes:
            print(f"- {note}")
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
