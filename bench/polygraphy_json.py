"""Polygraphy's JSON both ways: Parity's writer and reader of it against Polygraphy's own, one 64Mi-element output.

Target (issue 30): Parity's save and load of a ``.json`` results file take at most 0.25x Polygraphy's time.
Each tool runs in a fresh process, interleaved (the order alternates), ``--repeat`` times (default 5); medians:

* ``save``: ``RunResults.save(path.json)`` of one runner, one iteration, one float32[side, side] output
  (Parity's is atomic: an unnamed file, fsync'd, then named).
* ``load``: ``RunResults.load(path.json)`` and one full pass over the array (a float64 sum).

Each file is then loaded by the other tool, and the sums must agree (the files are interchangeable both ways).

    python bench/polygraphy_json.py [--repeat 5] [--side 8192]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import clean_env, median, table, verdict  # noqa: E402
from results_io import in_process  # noqa: E402

TARGET = 0.25
TOOLS = ("polygraphy", "parity")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--side", type=int, default=8192)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_pjson_"))
    env = clean_env(tmp / "pycache")
    files = {name: tmp / f"{name}.json" for name in TOOLS}
    times: dict[tuple[str, str], list[float]] = {}
    rss: dict[tuple[str, str], list[float]] = {}
    sums: dict[str, float] = {}
    try:
        from parity.results import b64

        backend = "libcrypto" if b64._crypto() else "binascii"
        print(f"base64: {backend}, {b64.threads()} thread(s)")
        for rep in range(args.repeat):
            for name in TOOLS if rep % 2 == 0 else TOOLS[::-1]:
                for op in ("save", "load"):
                    seconds, peak, checksum = in_process(name, op, files[name], args.side, env)
                    times.setdefault((op, name), []).append(seconds)
                    rss.setdefault((op, name), []).append(peak)
                    if op == "load":
                        sums[name] = checksum
                    print(f"  [{rep + 1}/{args.repeat}] {op} {name:10} {seconds:7.3f} s {peak:7.0f} MiB  checksum {checksum:.9g}", flush=True)
        crossed = {name: in_process(other, "load", files[name], args.side, env)[2] for name, other in zip(TOOLS, TOOLS[::-1])}
        sizes = {name: files[name].stat().st_size for name in TOOLS}
        rows = []
        for op in ("save", "load"):
            p, q = median(times[(op, "polygraphy")]), median(times[(op, "parity")])
            rows.append([op, p, q, q / p, median(rss[(op, "polygraphy")]), median(rss[(op, "parity")])])
        raw = args.side * args.side * 4
        print()
        print(f"one float32[{args.side},{args.side}] output ({raw / 2**20:.0f} MiB raw) in Polygraphy's JSON, median of {args.repeat}")
        print(table(["operation", "polygraphy s", "parity s", "x polygraphy", "polygraphy MiB", "parity MiB"], rows))
        read = [[n, sizes[n], f"{sums[n]:.9g}", f"{crossed[n]:.9g}"] for n in TOOLS]
        print(table(["file written by", "bytes", "sum read by its writer", "sum read by the other tool"], read))
        print()
        ok = True
        for op, _, _, ratio, _, _ in rows:
            ok &= verdict(op, ratio <= TARGET, f"{ratio:.3f}x Polygraphy's time (target <= {TARGET}x)")
        same = len({*sums.values(), *crossed.values()}) == 1
        ok &= verdict("interchange", same, "each tool reads the other's file to the same sum" if same else f"sums differ: {sums} / crossed {crossed}")
        return 0 if ok else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
