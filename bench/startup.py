"""CLI start-up (``--help``, ``run --help``, a whole ``run``) vs Polygraphy, and what each stand-in saves.

Parity vs Polygraphy on ``--help``, ``run --help`` and a whole ``run`` of the bundled tiny model; and what each of
Parity's start-up stand-ins for the standard library saves.

Targets (issue 27, which relaxed issue 13's 0.5x): ``parity --help`` and ``parity run --help`` at most 0.6x
Polygraphy's wall time, a whole ``parity run examples/models/tiny_cnn.onnx --onnxrt`` at most 0.8x ``polygraphy run``
of the same model. There is no help cache: commands load lazily (``parity.cli.lazy``), and modules only some
commands need are imported where used (``tests/test_startup_imports.py`` checks which). The floor of a run is
importing numpy and onnxruntime.

Stand-ins (issue 27's rule: the standard library, unless a stand-in saves more than 15 ms of start-up): the value
types a run creates are ``parity.util.record`` Records, not ``@dataclass`` classes, and plugin discovery reads
the ``entry_points.txt`` files itself (``parity.plugins._entry_points``), not through ``importlib.metadata``. The
second table times each against the standard library in fresh interpreters of the measured install, after what
precedes it at start-up (pluggy, click, and ``parity.plugins`` for discovery): every Record class of the core
against a generated module of the same classes as dataclasses (importing ``dataclasses`` included), and
``_entry_points("parity")`` against ``importlib.metadata.entry_points(group="parity")`` with each entry point's
distribution name and version (importing it included). ``--no-stand-ins`` skips that table.

Parity is measured as a wheel install leaves it, like Polygraphy's: its distributions (those requirements.txt
installs) are built as wheels and installed (``pip install --target``) into a temporary folder that a bare virtual
environment puts first on ``sys.path``, the dependencies coming from the running environment; ``--editable``
measures the README's editable install instead (each editable distribution adds a path finder to every start). Commands run interleaved
``--repeat`` times (default 15); medians and ratios are printed. Bytecode is cached in a temporary
PYTHONPYCACHEPREFIX, as a pip install would have it (this machine sets PYTHONDONTWRITEBYTECODE);
``--no-bytecode`` measures that setting.

    python bench/startup.py [--repeat N] [--editable] [--no-bytecode] [--no-stand-ins]
"""

from __future__ import annotations

import argparse
import importlib
import math
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
# every distribution requirements.txt installs (editable): one left out would still be found through its
# dist-info in site-packages and fail to load in every measured command
DISTRIBUTIONS = [line[3:].strip() for line in (ROOT / "requirements.txt").read_text().splitlines() if line.startswith("-e ")]
RUN = [MODEL, "--onnxrt", "--input-shapes", "x:[4,3,16,16]"]
TARGETS = {"--help": 0.6, "run --help": 0.6, "run": 0.8}
STAND_IN_LIMIT_MS = 15.0  # issue 27: a stand-in for the standard library stays only if it saves more than this


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


def record_twins(folder: Path) -> int:
    """Write ``bench_records.py`` and ``bench_dataclasses.py`` into ``folder``: every Record class of the core
    (found in the modules that import ``parity.util.record``) with its fields, defaults and frozenness, once as a
    Record and once as a dataclass. Returns how many classes; 0 if the core has no ``parity.util.record``."""
    try:
        from parity.util.record import Factory, Record, _annotations
    except ImportError:
        return 0
    for path in sorted((ROOT / "core" / "parity").rglob("*.py")):
        if "from parity.util.record import" in path.read_text(encoding="utf-8"):
            importlib.import_module(".".join(path.relative_to(ROOT / "core").with_suffix("").parts))
    classes, todo = [], list(Record.__subclasses__())
    while todo:
        cls = todo.pop(0)
        todo += cls.__subclasses__()
        if cls.__module__.startswith("parity.") and cls.__dict__.get("_record") is cls:
            classes.append(cls)
    head = ["from __future__ import annotations"]
    records = [*head, "from parity.util.record import DICT, LIST, SET, Record, fill"]
    dataclasses = [*head, "from dataclasses import dataclass, field"]
    made = {dict: "DICT", list: "LIST", set: "SET"}
    for cls in classes:
        annotations, code = _annotations(cls), cls.__init__.__code__
        names = code.co_varnames[1 : code.co_argcount]
        defaults = dict(zip(reversed(names), reversed(cls.__init__.__defaults__ or ())))
        params, fields = [], []  # the Record's __init__ parameters, the dataclass's fields
        for name in names:
            default = defaults.get(name, ...)
            if default is ...:
                params.append(f"{name}: {annotations[name]}")
                fields.append(f"    {name}: {annotations[name]}")
            elif type(default) is Factory:
                params.append(f"{name}: {annotations[name]} = {made[default.make]}")
                fields.append(f"    {name}: {annotations[name]} = field(default_factory={default.make.__name__})")
            else:
                text = f"float('{default}')" if isinstance(default, float) and not math.isfinite(default) else repr(default)
                params.append(f"{name}: {annotations[name]} = {text}")
                fields.append(f"    {name}: {annotations[name]} = {text}")
        records += [
            f"class {cls.__name__}(Record{', frozen=True' if cls._frozen else ''}):",
            *(f"    {name}: {annotations[name]}" for name in names),
            f"    def __init__(self, {', '.join(params)}) -> None:",
            "        fill(self, locals())",
        ]
        dataclasses += [f"@dataclass{'(frozen=True)' if cls._frozen else ''}", f"class {cls.__name__}:", *fields]
    (folder / "bench_records.py").write_text("\n".join(records) + "\n")
    (folder / "bench_dataclasses.py").write_text("\n".join(dataclasses) + "\n")
    return len(classes)


def stand_ins(python: str, env: dict, repeat: int, folder: Path) -> bool:
    """Time each stand-in against the standard library it replaces (see the module's docstring); print the table
    and one verdict each. False if one saves 15 ms or less (it should give way to the standard library)."""
    folder.mkdir()
    count = record_twins(folder)
    after_cli = "import pluggy, click"
    after_plugins = "import pluggy, click, parity.plugins"
    metadata = "import importlib.metadata\n[(ep.name, ep.value, ep.dist.name, ep.dist.version) for ep in importlib.metadata.entry_points(group='parity')]"
    pairs = {}  # stand-in -> (after what, what is timed) for it and for the standard library
    if count:
        pairs[f"{count} Records vs @dataclass"] = ((after_cli, "import bench_records"), (after_cli, "import bench_dataclasses"))
    pairs["entry points: _entry_points vs importlib.metadata"] = ((after_plugins, "parity.plugins._entry_points('parity')"), (after_plugins, metadata))

    def program(setup: str, timed: str) -> list[str]:
        code = f"import sys, time\nsys.path.insert(0, {str(folder)!r})\n{setup}\nt = time.process_time()\n{timed}\nprint((time.process_time() - t) * 1e3)\n"
        return [python, "-c", code]

    commands = {(name, side): program(*pair[side]) for name, pair in pairs.items() for side in (0, 1)}
    for cmd in commands.values():  # warm-up: write bytecode, check each works
        out = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"stand-in timing failed:\n{out.stderr}")
    times: dict[tuple[str, int], list[float]] = {key: [] for key in commands}
    for _ in range(repeat):
        for key, cmd in commands.items():
            times[key].append(float(subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout))
    rows, ok = [], True
    for name in pairs:
        own, std = median(times[(name, 0)]), median(times[(name, 1)])
        rows.append([name, own, std, std - own])
    print(table(["stand-in vs standard library (CPU time in-process)", "stand-in ms", "stdlib ms", "saved ms"], rows))
    print()
    for name, _, _, saved in rows:
        ok &= verdict(name, saved > STAND_IN_LIMIT_MS, f"the stand-in saves {saved:.1f} ms (kept only above {STAND_IN_LIMIT_MS:.0f} ms)")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--no-bytecode", action="store_true", help="keep PYTHONDONTWRITEBYTECODE as this machine sets it")
    parser.add_argument("--editable", action="store_true", help="measure the editable install (the README's) instead of wheels")
    parser.add_argument("--no-stand-ins", action="store_true", help="skip timing the stand-ins for the standard library")
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
        if not args.no_stand_ins:
            print()
            ok &= stand_ins(sys.executable if args.editable else parity[0], env, args.repeat, tmp / "stand_ins")
        return 0 if ok else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
