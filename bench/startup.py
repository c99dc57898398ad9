"""CLI start-up: ``--help`` and ``run --help``, Parity vs Polygraphy.

Target (issue 2): Parity at most half of Polygraphy's wall time.

Commands run interleaved ``--repeat`` times (default 15); medians and ratios are printed. Console scripts
are called directly (pyenv's bash shims add ~0.1 s to both). Bytecode is cached in a temporary
PYTHONPYCACHEPREFIX, as a pip install would have it (this machine sets PYTHONDONTWRITEBYTECODE, which
makes Parity's editable install recompile every module on every run while Polygraphy's wheel has its .pyc);
``--no-bytecode`` measures that setting instead. Parity is measured twice: as users get it (its help cache
warm, see ``parity.cli._HelpCache``) and with ``PARITY_NO_CACHE=1`` (first run after an install or upgrade).

    python bench/startup.py [--repeat N] [--no-bytecode]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import clean_env, median, run_measured, table, tool, verdict  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--no-bytecode", action="store_true", help="keep PYTHONDONTWRITEBYTECODE as this machine sets it")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_startup_"))
    try:
        env = clean_env(None if args.no_bytecode else tmp / "pycache", PARITY_CACHE_DIR=str(tmp / "cache"))
        nocache = {**env, "PARITY_NO_CACHE": "1"}
        commands = {
            "python -c pass": ([sys.executable, "-c", "pass"], env),
            "polygraphy --help": ([tool("polygraphy"), "--help"], env),
            "parity --help": ([tool("parity"), "--help"], env),
            "parity --help (no cache)": ([tool("parity"), "--help"], nocache),
            "polygraphy run --help": ([tool("polygraphy"), "run", "--help"], env),
            "parity run --help": ([tool("parity"), "run", "--help"], env),
            "parity run --help (no cache)": ([tool("parity"), "run", "--help"], nocache),
        }
        for cmd, cmd_env in commands.values():  # warm-up: write bytecode and the help cache, check it works
            wall, rss, code, out = run_measured(cmd, cmd_env)
            if code != 0:
                raise SystemExit(f"{' '.join(cmd)} failed:\n{out}")
        times: dict[str, list[float]] = {name: [] for name in commands}
        rss: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.repeat):
            for name, (cmd, cmd_env) in commands.items():
                wall, peak, _, _ = run_measured(cmd, cmd_env)
                times[name].append(wall)
                rss[name].append(peak)
        med = {name: median(v) for name, v in times.items()}
        ref = {"--help": med["polygraphy --help"], "run --help": med["polygraphy run --help"]}
        rows = []
        for name in commands:
            base = ref["run --help"] if "run --help" in name else ref["--help"] if "--help" in name else None
            rows.append([name, med[name], min(times[name]), median(rss[name]), f"{med[name] / base:.2f}" if base else "-"])
        print(f"median of {args.repeat} interleaved runs; bytecode {'not cached (PYTHONDONTWRITEBYTECODE)' if args.no_bytecode else 'cached'}")
        print(table(["command", "median s", "min s", "peak MiB", "x Polygraphy"], rows))
        print()
        ok = True
        for what in ("--help", "run --help"):
            ratio = med[f"parity {what}"] / ref[what]
            ok &= verdict(f"parity {what}", ratio <= 0.5, f"{ratio:.2f}x Polygraphy's time (target <= 0.5x)")
            ratio = med[f"parity {what} (no cache)"] / ref[what]
            print(f"info  parity {what}, cache off: {ratio:.2f}x Polygraphy's time")
        return 0 if ok else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
