"""CLI start-up: ``--help``, ``run --help`` and a whole ``run`` of the bundled tiny model, Parity vs Polygraphy.

Targets (issue 13): ``parity --help`` and ``parity run --help`` at most 0.5x Polygraphy's wall time, a whole
``parity run examples/models/tiny_cnn.onnx --onnxrt`` at most 0.8x ``polygraphy run`` of the same model. There is no
help cache: commands load lazily (``parity.cli.lazy``), the value types start-up creates are ``parity.util.record``
Records rather than dataclasses, and modules only some commands need are imported where used
(``tests/test_startup_imports.py`` checks which). The floor of a run is importing numpy and onnxruntime.

Parity is measured as a wheel install leaves it, like Polygraphy's: its eight distributions are built as wheels
and installed (``pip install --target``) into a temporary folder that a bare virtual environment puts first on
``sys.path``, the dependencies coming from the running environment; ``--editable`` measures the README's editable
install instead (each editable distribution adds a path finder to every start). Commands run interleaved
``--repeat`` times (default 15); medians and ratios are printed. Bytecode is cached in a temporary
PYTHONPYCACHEPREFIX, as a pip install would have it (this machine sets PYTHONDONTWRITEBYTECODE);
``--no-bytecode`` measures that setting.

    python bench/startup.py [--repeat N] [--editable] [--no-bytecode]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import clean_env, median, run_measured, table, tool, verdict  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MODEL = str(ROOT / "examples" / "models" / "tiny_cnn.onnx")
DISTRIBUTIONS = [".", "plugins/onnxrt", "plugins/surgeon", "plugins/reduce", "plugins/tactics", "plugins/trt",
                 "contrib/parity-onnx-reference", "contrib/parity-metrics"]
RUN = [MODEL, "--onnxrt", "--input-shapes", "x:[4,3,16,16]"]
TARGETS = {"--help": 0.5, "run --help": 0.5, "run": 0.8}


def wheel_install(tmp: Path) -> list[str]:
    """A command that starts ``parity`` installed from wheels: a bare venv whose one ``.pth`` puts the wheels'
    target folder first and this environment's site-packages after it (its ``.pth`` files, which hold the editable
    finders, are not run; discovery takes the first copy of each distribution on ``sys.path``)."""
    wheels, target, venv = tmp / "wheels", tmp / "site", tmp / "venv"
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), *(str(ROOT / d) for d in DISTRIBUTIONS)], check=True)
    subprocess.run([*pip, "install", "--no-deps", "--no-index", "--target", str(target), *map(str, sorted(wheels.glob("*.whl")))], check=True)
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "parity_bench.pth").write_text(f"{target}\n{sysconfig.get_paths()['purelib']}\n")
    launcher = tmp / "parity_main.py"  # what the console script does
    launcher.write_text("import sys\nfrom parity.cli import main\nsys.exit(main())\n")
    return [str(python), str(launcher)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--no-bytecode", action="store_true", help="keep PYTHONDONTWRITEBYTECODE as this machine sets it")
    parser.add_argument("--editable", action="store_true", help="measure the editable install (the README's) instead of wheels")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_startup_"))
    try:
        env = clean_env(None if args.no_bytecode else tmp / "pycache")
        parity = [tool("parity")] if args.editable else wheel_install(tmp)
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "import numpy, onnxruntime": [sys.executable, "-c", "import numpy, onnxruntime"],
            "polygraphy --help": [tool("polygraphy"), "--help"],
            "parity --help": [*parity, "--help"],
            "polygraphy run --help": [tool("polygraphy"), "run", "--help"],
            "parity run --help": [*parity, "run", "--help"],
            "polygraphy run": [tool("polygraphy"), "run", *RUN],
            "parity run": [*parity, "run", *RUN],
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
        print(f"median of {args.repeat} interleaved runs; bytecode {'not cached (PYTHONDONTWRITEBYTECODE)' if args.no_bytecode else 'cached'}; "
              f"Parity installed {'editable' if args.editable else 'from wheels'}")
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
