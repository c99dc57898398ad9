"""Comparing two 64Mi-element float32 outputs: ``run m.onnx --onnxrt --onnxrt`` and ``--load-outputs`` + compare.

Target (issue 2): Parity at least 2x faster than Polygraphy, with at most half its peak RSS.
Both tools run the same model, interleaved, ``--repeat`` times (default 3); medians and ratios are printed.
Both compares compute full statistics (mean/std/min/max/median/percentiles of both outputs and both errors).

    python bench/compare_large.py [--repeat N] [--side 8192]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import clean_env, make_big_model, median, run_measured, table, tool, verdict  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--side", type=int, default=8192, help="output is side x side float32 [8192: 64Mi elements]")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_compare_"))
    env = clean_env(tmp / "pycache")  # cached bytecode for both tools, as installed
    try:
        model = make_big_model(tmp, args.side)
        # golden files for the load+compare case, written once by each tool in its own format
        golden = {"parity": tmp / "golden.parity", "polygraphy": tmp / "golden.json"}
        for name in golden:
            wall, rss, code, out = run_measured([tool(name), "run", str(model), "--onnxrt", "--save-outputs", str(golden[name])], env)
            assert code == 0, out
        cases = {
            "two runners": lambda name: [tool(name), "run", str(model), "--onnxrt", "--onnxrt"],
            "load + compare": lambda name: [tool(name), "run", str(model), "--onnxrt", "--load-outputs", str(golden[name])],
        }
        results: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for rep in range(args.repeat):
            for case, make in cases.items():
                for name in ("polygraphy", "parity"):  # interleaved, so machine load hits both alike
                    wall, rss, code, out = run_measured(make(name), env)
                    if code != 0:
                        print(out)
                        raise SystemExit(f"{name} {case} failed with exit code {code}")
                    results.setdefault((case, name), []).append((wall, rss))
                    print(f"  [{rep + 1}/{args.repeat}] {case:15} {name:10} {wall:7.2f} s {rss:7.0f} MiB", flush=True)
        rows, ok = [], True
        for case in cases:
            pw, pr = median([w for w, _ in results[(case, "polygraphy")]]), median([r for _, r in results[(case, "polygraphy")]])
            qw, qr = median([w for w, _ in results[(case, "parity")]]), median([r for _, r in results[(case, "parity")]])
            rows.append([case, pw, qw, pw / qw, pr, qr, qr / pr])
        print()
        print(f"output: float32[{args.side},{args.side}] ({args.side * args.side / 2**20:.0f}Mi elements), median of {args.repeat}")
        print(table(["case", "polygraphy s", "parity s", "speed-up", "polygraphy MiB", "parity MiB", "RSS ratio"], rows))
        print()
        for case, _, _, speedup, _, _, rss_ratio in rows:
            ok &= verdict(f"{case}: time", speedup >= 2.0, f"{speedup:.2f}x faster (target >= 2x)")
            ok &= verdict(f"{case}: peak RSS", rss_ratio <= 0.5, f"{rss_ratio:.2f}x of Polygraphy's (target <= 0.5x)")
        return 0 if ok else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
