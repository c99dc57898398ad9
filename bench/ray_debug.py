"""``debug repeat --until 16`` with a check that sleeps a fixed time: the Ray executor against the local one.

Prints wall times of: local --jobs 1, local --jobs N, ray --jobs N (a local Ray started for the run; its
start-up is counted, and shown apart: the time to the first check), and the ratios: speed-up of ray --jobs N
over local --jobs 1, and the overhead per check of ray against local at the same --jobs.

    python bench/ray_debug.py [--iterations 16] [--jobs 4] [--sleep 1.0]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHECK = "import sys, time; time.sleep(float(sys.argv[1]))"


def run(workdir: Path, iterations: int, sleep: float, extra: list[str]) -> tuple[float, float]:
    """Wall time of the whole command, and the sum of the checks' own times (from --report)."""
    report = workdir / "report.json"
    report.unlink(missing_ok=True)
    args = [sys.executable, "-m", "parity", "-q", "debug", "repeat", "--until", str(iterations), "--report", str(report), *extra]
    args += ["--check", sys.executable, "-c", CHECK, str(sleep)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARITY_")}
    start = time.perf_counter()
    proc = subprocess.run(args, cwd=workdir, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(extra) or 'local'}: exit {proc.returncode}\n{proc.stdout}{proc.stderr}")
    data = json.loads(report.read_text())
    return wall, sum(c["seconds"] or 0 for c in data["checks"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=16)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--sleep", type=float, default=1.0)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        serial, _ = run(workdir, a.iterations, a.sleep, [])
        local, _ = run(workdir, a.iterations, a.sleep, ["--jobs", str(a.jobs)])
        start = time.perf_counter()
        import ray  # the start-up of a local Ray, measured alone (the ray run below pays it too)

        ray.init(include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        ray.shutdown()
        startup = time.perf_counter() - start
        remote, remote_checks = run(workdir, a.iterations, a.sleep, ["--executor", "ray", "--jobs", str(a.jobs)])
    ideal = a.iterations * a.sleep / a.jobs
    print(f"debug repeat --until {a.iterations}, a check sleeping {a.sleep:g}s, --jobs {a.jobs} ({os.cpu_count()} cores)")
    print(f"  local --jobs 1          {serial:7.2f}s")
    print(f"  local --jobs {a.jobs:<2d}         {local:7.2f}s  (ideal {ideal:.2f}s)")
    print(f"  ray   --jobs {a.jobs:<2d}         {remote:7.2f}s  (of which ~{startup:.2f}s starting a local Ray)")
    print(f"  speed-up ray --jobs {a.jobs} / local --jobs 1: {serial / remote:.2f}x (without Ray's start-up: {serial / max(1e-9, remote - startup):.2f}x)")
    print(f"  overhead per check, ray vs local at --jobs {a.jobs}: {(remote - local) / a.iterations:+.3f}s wall "
          f"({(remote - startup - local) / a.iterations:+.3f}s without start-up); check time as measured by the driver: "
          f"{remote_checks / a.iterations:.3f}s per check for {a.sleep:g}s of sleep")
    print(f"  ratio ray/local wall at --jobs {a.jobs}: {remote / local:.2f}x ({(remote - startup) / local:.2f}x without start-up)")


if __name__ == "__main__":
    main()
