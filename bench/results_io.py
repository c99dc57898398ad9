"""Saving and loading one 64Mi-element float32 output: Parity's archive vs Polygraphy's JSON.

Targets (issue 2): at least 5x faster than Polygraphy, file at most 1.1x the raw array bytes.
Measured, interleaved, ``--repeat`` times (default 3), medians printed:

* ``save``: ``RunResults.save`` of one runner with one output, in a fresh process (time inside the process).
* ``load``: ``RunResults.load`` and one full pass over the array (a float64 sum), so a lazy or memory-mapped
  load pays for reading its data like an eager one.
* ``cli save``: ``run m.onnx --onnxrt --save-outputs`` end to end (start-up and inference included), and
  ``cli run``, the same without ``--save-outputs``; their difference is what saving adds to a CLI run.

    python bench/results_io.py [--repeat N] [--side 8192]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import clean_env, make_big_model, median, run_measured, table, tool, verdict  # noqa: E402

SNIPPETS = {
    "parity": {
        "save": """
from parity.results.model import RunResults, IterationResult
results = RunResults([("runner", [IterationResult({"y": array}, 0.1, "runner")])])
start = time.perf_counter(); results.save(path)
""",
        "load": """
from parity.results.model import RunResults
start = time.perf_counter(); array = RunResults.load(path)["runner"][0]["y"]
""",
    },
    "polygraphy": {
        "save": """
from polygraphy.comparator import RunResults
from polygraphy.comparator.struct import IterationResult
results = RunResults([("runner", [IterationResult({"y": array}, 0.1, "runner")])])
start = time.perf_counter(); results.save(path)
""",
        "load": """
from polygraphy.comparator import RunResults
start = time.perf_counter(); array = RunResults.load(path)[0][1][0]["y"]
""",
    },
}

PROLOGUE = """
import json, sys, time
import numpy as np
path, side, op = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if op == "save":
    array = np.random.default_rng(0).random((side, side), dtype=np.float32)
"""
EPILOGUE = """
checksum = float(np.add.reduce(np.asarray(array).reshape(-1), dtype=np.float64))
print(json.dumps({"seconds": time.perf_counter() - start, "checksum": checksum}))
"""


def in_process(tool_name: str, op: str, path: Path, side: int, env: dict) -> tuple[float, float, float]:
    """(seconds inside the process, peak RSS MiB, checksum)."""
    code = PROLOGUE + SNIPPETS[tool_name][op] + EPILOGUE
    wall, rss, rc, out = run_measured([sys.executable, "-c", code, str(path), str(side), op], env)
    if rc != 0:
        raise SystemExit(f"{tool_name} {op} failed:\n{out}")
    report = json.loads(out.strip().splitlines()[-1])
    return report["seconds"], rss, report["checksum"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--side", type=int, default=8192)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_io_"))
    env = clean_env(tmp / "pycache")  # cached bytecode for both tools, as installed
    raw = args.side * args.side * 4
    files = {"parity": tmp / "out.parity", "polygraphy": tmp / "out.json"}
    times: dict[tuple[str, str], list[float]] = {}
    rss: dict[tuple[str, str], list[float]] = {}
    try:
        model = make_big_model(tmp, args.side)
        sizes = {}
        for rep in range(args.repeat):
            for name in ("polygraphy", "parity"):
                for op in ("save", "load"):
                    seconds, peak, checksum = in_process(name, op, files[name], args.side, env)
                    times.setdefault((op, name), []).append(seconds)
                    rss.setdefault((op, name), []).append(peak)
                    print(f"  [{rep + 1}/{args.repeat}] {op:8} {name:10} {seconds:7.3f} s {peak:7.0f} MiB  checksum {checksum:.6g}", flush=True)
                sizes[name] = files[name].stat().st_size
                cli_out = tmp / f"cli.{name}"
                wall, peak, code, out = run_measured([tool(name), "run", str(model), "--onnxrt", "--save-outputs", str(cli_out)], env)
                if code != 0:
                    raise SystemExit(f"{name} run --save-outputs failed:\n{out}")
                times.setdefault(("cli save", name), []).append(wall)
                rss.setdefault(("cli save", name), []).append(peak)
                print(f"  [{rep + 1}/{args.repeat}] cli save {name:10} {wall:7.3f} s {peak:7.0f} MiB", flush=True)
                cli_out.unlink()
                wall, peak, code, out = run_measured([tool(name), "run", str(model), "--onnxrt"], env)
                times.setdefault(("cli run", name), []).append(wall)
                rss.setdefault(("cli run", name), []).append(peak)
                print(f"  [{rep + 1}/{args.repeat}] cli run  {name:10} {wall:7.3f} s {peak:7.0f} MiB", flush=True)
        rows = []
        for op in ("save", "load", "cli save", "cli run"):
            p, q = median(times[(op, "polygraphy")]), median(times[(op, "parity")])
            rows.append([op, p, q, p / q, median(rss[(op, "polygraphy")]), median(rss[(op, "parity")])])
        # what --save-outputs adds to a CLI run: same run with and without it, per repetition
        extra = {name: median([a - b for a, b in zip(times[("cli save", name)], times[("cli run", name)])]) for name in ("polygraphy", "parity")}
        rows.append(["cli save - run", extra["polygraphy"], extra["parity"], extra["polygraphy"] / extra["parity"], "-", "-"])
        print()
        print(f"one float32[{args.side},{args.side}] output ({raw / 2**20:.0f} MiB raw), median of {args.repeat}")
        print(table(["operation", "polygraphy s", "parity s", "speed-up", "polygraphy MiB", "parity MiB"], rows))
        print(table(["file", "bytes", "x raw"], [[name, sizes[name], f"{sizes[name] / raw:.4f}"] for name in ("polygraphy", "parity")]))
        print()
        ok = True
        for op, _, _, speedup, _, _ in rows[:2]:
            ok &= verdict(f"{op}", speedup >= 5.0, f"{speedup:.1f}x faster than Polygraphy's JSON (target >= 5x)")
        print(f"info  cli save (start-up and inference included): {rows[2][3]:.1f}x faster; the time --save-outputs adds to a run: {rows[4][3]:.1f}x less")
        ok &= verdict("file size", sizes["parity"] <= 1.1 * raw, f"{sizes['parity'] / raw:.4f}x the raw bytes (target <= 1.1x)")
        return 0 if ok else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
