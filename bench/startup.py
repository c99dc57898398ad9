"""CLI start-up: ``--help``, ``run --help`` and a whole ``run`` of the bundled tiny model, Parity vs Polygraphy.

Targets (issue 13): ``parity --help`` and ``parity run --help`` at most 0.5x Polygraphy's wall time, a whole
``parity run examples/models/tiny_cnn.onnx --onnxrt`` at most 0.8x ``polygraphy run`` of the same model. There is no
help cache: commands load lazily (``parity.cli.lazy``). The floor of a run is importing numpy and onnxruntime.

Commands run interleaved ``--repeat`` times (default 15); medians and ratios are printed. Console scripts are
called directly (pyenv's bash shims add ~0.1 s to both). Bytecode is cached in a temporary PYTHONPYCACHEPREFIX, as
a pip install would have it (this machine sets PYTHONDONTWRITEBYTECODE, which makes Parity's editable install
recompile every module on every run while Polygraphy's wheel has its .pyc); ``--no-bytecode`` measures that setting.

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

MODEL = str(Path(__file__).resolve().parents[1] / "examples" / "models" / "tiny_cnn.onnx")
RUN = [MODEL, "--onnxrt", "--input-shapes", "x:[4,3,16,16]"]
TARGETS = {"--help": 0.5, "run --help": 0.5, "run": 0.8}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--no-bytecode", action="store_true", help="keep PYTHONDONTWRITEBYTECODE as this machine sets it")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_startup_"))
    try:
        env = clean_env(None if args.no_bytecode else tmp / "pycache")
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "import numpy, onnxruntime": [sys.executable, "-c", "import numpy, onnxruntime"],
            "polygraphy --help": [tool("polygraphy"), "--help"],
            "parity --help": [tool("parity"), "--help"],
            "polygraphy run --help": [tool("polygraphy"), "run", "--help"],
            "parity run --help": [tool("parity"), "run", "--help"],
            "polygraphy run": [tool("polygraphy"), "run", *RUN],
            "parity run": [tool("parity"), "run", *RUN],
        }
        for cmd in commands.values():  # warm-up: write bytecode, check each command works
            _, _, code, out = run_measured(cmd, env)
            if code != 0:
                raise SystemExit(f"{' '.join(cmd)} failed:\n{out}")
        times: dict[str, list[float]] = {name: [] for name in commands}
        rss: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.repeat):
            for name, cmd in commands.items():
                wall, peak, _, _ = run_measured(cmd, env)
                times[name].append(wall)
                rss[name].append(peak)
        med = {name: median(v) for name, v in times.items()}
        rows = []
        for name in commands:
            what = name.split(" ", 1)[1] if name.startswith(("parity ", "polygraphy ")) else None
            base = med[f"polygraphy {what}"] if what else None
            rows.append([name, med[name], min(times[name]), median(rss[name]), f"{med[name] / base:.2f}" if base else "-"])
        print(f"median of {args.repeat} interleaved runs; bytecode {'not cached (PYTHONDONTWRITEBYTECODE)' if args.no_bytecode else 'cached'}")
        print(table(["command", "median s", "min s", "peak MiB", "x Polygraphy"], rows))
        print()
        ok = True
        for what, target in TARGETS.items():
            ratio = med[f"parity {what}"] / med[f"polygraphy {what}"]
            ok &= verdict(f"parity {what}", ratio <= target, f"{ratio:.2f}x Polygraphy's time (target <= {target}x)")
        floor = med["import numpy, onnxruntime"] / med["polygraphy run"]
        print(f"info  importing numpy and onnxruntime alone: {floor:.2f}x polygraphy run")
        return 0 if ok else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
