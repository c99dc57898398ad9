"""Run Polygraphy's own tests against parity_polygraphy with only the one import rule applied (issue 28).

The tests come from a git mirror of NVIDIA/TensorRT (``tools/Polygraphy/tests``), are extracted into a temporary
folder, and every ``.py`` file there (tests, conftest.py, helper.py, models/meta.py) has its imports rewritten:
``import polygraphy...`` / ``from polygraphy... import`` name ``parity_polygraphy`` instead; nothing else changes.
pytest then runs the files named (paths relative to the tests folder) and this prints passed/failed/errors per file.

    python plugins/polygraphy/tools/polygraphy_tests.py comparator/test_compare.py common/test_datatype.py
    python plugins/polygraphy/tools/polygraphy_tests.py                 # the issue's non-TensorRT files
    python plugins/polygraphy/tools/polygraphy_tests.py --baseline ...  # the same files on Polygraphy itself
    python plugins/polygraphy/tools/polygraphy_tests.py --compare ...   # both, side by side
    python plugins/polygraphy/tools/polygraphy_tests.py --json out.json -k datatype common/test_datatype.py

The tool tests run the command ``polygraphy`` (through pytest-console-scripts' ``script_runner``): on the
parity_polygraphy side that command is ``parity``, the command-line half of the same rule (every Polygraphy command
works with ``parity`` in its place). script_runner looks a command up as a ``console_scripts`` entry point first (in
process) and on PATH second (subprocess), so the harness puts both a ``polygraphy`` entry point and a ``polygraphy``
script that run ``parity.cli:main`` ahead of Polygraphy's own.

Files that need TensorRT, TensorFlow or CUDA are skipped unless named or ``--all`` is given. ``import tensorrt``
(models/meta.py does it at the top) gives Parity's behavioural model of TensorRT (plugins/trt/tests/trt_model, NOT
TensorRT) unless ``--no-trt-model``.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
MIRROR = Path("/work/.mirror/NVIDIA+TensorRT/repo")
TESTS = "tools/Polygraphy/tests"
TRT_MODEL = ROOT / "plugins" / "trt" / "tests"

# The measure: Polygraphy's tests that need neither TensorRT, TensorFlow nor CUDA.
DEFAULT_FILES = [
    "backend/base/test_loader.py",
    "backend/base/test_runner.py",
    "backend/common/test_loader.py",
    "backend/onnx/test_loader.py",
    "backend/onnx/test_util.py",
    "backend/onnxrt/test_loader.py",
    "backend/onnxrt/test_runner.py",
    "common/test_datatype.py",
    "common/test_interface.py",
    "common/test_struct.py",
    "comparator/test_comparator.py",
    "comparator/test_compare.py",
    "comparator/test_data_loader.py",
    "comparator/test_postprocess.py",
    "comparator/test_struct.py",
    "func/test_func.py",
    "logger/test_logger.py",
    "util/test_serde.py",
    "tools/test_run.py",
    "tools/test_inspect.py",
    "tools/test_surgeon.py",
    "tools/test_convert.py",
    "tools/test_debug.py",
    "tools/test_check.py",
    "tools/test_data.py",
]
# Folders and files whose tests need TensorRT, TensorFlow or CUDA: run only when named or with --all.
NEEDS_ACCELERATOR = re.compile(r"(^|/)(trt|tf|cuda|pluginref)(/|$)|test_(cuda|tf)\b")

IMPORT = re.compile(r"^(?P<lead>\s*(?:from|import)\s+)polygraphy\b", re.MULTILINE)


def rewrite(source: str) -> str:
    """The one import rule: ``polygraphy`` -> ``parity_polygraphy`` in import statements, nothing else."""
    return IMPORT.sub(r"\g<lead>parity_polygraphy", source)


def unmark_fixtures(source: str) -> str:
    """pytest 9 refuses marks on fixtures (conftest.py's ``nvinfer_lean_path``; a mark there never had an effect):
    drop such marks so the conftest loads. This is a pytest-version fix, applied in --baseline runs too."""
    tree = ast.parse(source)
    drop: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names = [ast.unparse(d) for d in node.decorator_list]
            if any(n.startswith("pytest.fixture") for n in names):
                for decorator, name in zip(node.decorator_list, names):
                    if name.startswith("pytest.mark."):
                        drop.update(range(decorator.lineno - 1, (decorator.end_lineno or decorator.lineno)))
    if not drop:
        return source
    # the decorator's "@" is on its first line, one column left of the expression
    return "".join(line for i, line in enumerate(source.splitlines(keepends=True)) if i not in drop)


def extract(dest: Path, mirror: Path, commit: str, baseline: bool) -> Path:
    archive = subprocess.run(["git", "-C", str(mirror), "archive", commit, TESTS], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    tests = dest / TESTS
    for path in tests.rglob("*.py"):
        text = path.read_text()
        new = unmark_fixtures(text if baseline else rewrite(text))
        if new != text:
            path.write_text(new)
    return tests


def trt_model_env(env: dict[str, str], version: str | None) -> dict[str, str]:
    """PYTHONPATH and the variables that make ``import tensorrt`` give the behavioural model (NOT TensorRT)."""
    sys.path.insert(0, str(TRT_MODEL))
    from trt_model.manifest import versions  # the modelled TensorRT versions, oldest first

    model = TRT_MODEL / "trt_model"
    paths = [str(model / "site"), str(model / "site_host_cuda"), str(TRT_MODEL)]
    env = {**env, "PARITY_TRT_MODEL_VERSION": version or versions()[-1], "PARITY_TRT_MODEL_MEMORY": "host"}
    env["PYTHONPATH"] = os.pathsep.join([*paths, *filter(None, [env.get("PYTHONPATH")])])
    return env


def count(junit: Path) -> dict[str, dict[str, int]]:
    """Per file: passed, failed, errors, skipped (from pytest's junit XML)."""
    table: dict[str, dict[str, int]] = {}
    if not junit.is_file():
        return table
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("file") or (case.get("classname") or "").replace(".", "/").rsplit("/", 1)[0] + ".py"
        name = name.removeprefix("tests/")
        row = table.setdefault(name, {"passed": 0, "failed": 0, "errors": 0, "skipped": 0})
        tags = {child.tag for child in case}
        if "error" in tags:
            row["errors"] += 1
        elif "failure" in tags:
            row["failed"] += 1
        elif "skipped" in tags:
            row["skipped"] += 1
        else:
            row["passed"] += 1
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", help="test files relative to tools/Polygraphy/tests (default: the issue's non-TensorRT files)")
    parser.add_argument("--all", action="store_true", help="also run files that need TensorRT, TensorFlow or CUDA")
    parser.add_argument("--baseline", action="store_true", help="do not rewrite imports: run the tests on Polygraphy itself")
    parser.add_argument("--compare", action="store_true", help="run both ways; the table shows Polygraphy's passes beside parity_polygraphy's")
    parser.add_argument("--mirror", type=Path, default=MIRROR, help="git mirror of NVIDIA/TensorRT (default: %(default)s)")
    parser.add_argument("--commit", default="HEAD", help="commit of the mirror to take the tests from (default: %(default)s)")
    parser.add_argument("--no-trt-model", action="store_true", help="leave `import tensorrt` alone (no behavioural model)")
    parser.add_argument("--no-internal-checks", action="store_true", help="leave POLYGRAPHY_INTERNAL_CORRECTNESS_CHECKS unset (Polygraphy's test target sets it to 1)")
    parser.add_argument("--trt-model-version", help="modelled TensorRT version (default: the newest)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the per-file counts as JSON")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="extract into DIR (kept) instead of a temporary folder")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds for the whole pytest run (default: %(default)s)")
    args, pytest_args = parser.parse_known_args(argv)  # options this does not know go to pytest (-x, --tb=short, ...)

    named = [f.removeprefix("tests/") for f in args.files]
    files = named or DEFAULT_FILES
    if not args.all:
        files = [f for f in files if f in named or not NEEDS_ACCELERATOR.search(f)]
    if not files:
        parser.error("no files to run (files needing TensorRT/TF/CUDA run only when named or with --all)")

    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    if not args.no_internal_checks:  # as Polygraphy's own `make test` runs its tests
        env["POLYGRAPHY_INTERNAL_CORRECTNESS_CHECKS"] = "1"
    if not args.no_trt_model:
        env = trt_model_env(env, args.trt_model_version)
    runs = [True, False] if args.compare else [args.baseline]
    results = {}
    for baseline in runs:
        try:
            results[baseline] = run_pytest(args, files, pytest_args, env, baseline)
        except FileNotFoundError as exc:
            print(exc, file=sys.stderr)
            return 2
    table, out, rc = results[args.baseline if not args.compare else False]
    print("\n".join(out.strip().splitlines()[-40:]))
    print()
    totals = print_table(files, table, results[True][0] if args.compare else None)
    if args.json:
        report = {"files": {f: table.get(f) for f in files}, "totals": totals, "pytest_rc": rc}
        if args.compare:
            report["polygraphy"] = {f: results[True][0].get(f) for f in files}
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    # pytest's own codes: 0 all passed, 1 some failed; anything else (usage, collection, timeout) passes through
    return 0 if rc == 0 else (1 if rc == 1 else rc)


EMPTY = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}


def run_pytest(args: argparse.Namespace, files: list[str], pytest_args: list[str], env: dict[str, str], baseline: bool) -> tuple[dict[str, dict[str, int]], str, int]:
    """One pytest run over ``files`` (on Polygraphy itself where ``baseline``): per-file counts, output, exit code."""
    with tempfile.TemporaryDirectory(prefix="polygraphy-tests-") as tmp:
        work = (args.keep / ("polygraphy" if baseline else "parity_polygraphy")) if args.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        tests = extract(work, args.mirror, args.commit, baseline)
        # tests/helper.py runs <tests>/../bin/polygraphy where script_runner is not used (a --check command, say)
        repo_bin = tests.parent / "bin" / "polygraphy"
        repo_bin.parent.mkdir(exist_ok=True)
        if baseline:  # Polygraphy's own wrapper, from the same commit
            wrapper = ["git", "-C", str(args.mirror), "show", f"{args.commit}:tools/Polygraphy/bin/polygraphy"]
            repo_bin.write_bytes(subprocess.run(wrapper, check=True, capture_output=True).stdout)
            repo_bin.chmod(0o755)
        else:
            env = command_shim(env, work / "bin")
            repo_bin.write_text((work / "bin" / "polygraphy").read_text())
            repo_bin.chmod(0o755)
        missing = [f for f in files if not (tests / f).is_file()]
        if missing:
            raise FileNotFoundError(f"not in {TESTS} at {args.commit}: {', '.join(missing)}")
        # One pytest process per folder with its own conftest.py (tools/, mod/): a conftest that fails to import
        # ends its whole session, and should cost only the files under it.
        groups: dict[str, list[str]] = {}
        for f in files:
            top = f.split("/")[0]
            groups.setdefault(top if (tests / top / "conftest.py").is_file() else "", []).append(f)
        table: dict[str, dict[str, int]] = {}
        outputs, codes = [], []
        for index, group in enumerate(groups.values()):
            junit = work / f"junit-{index}.xml"
            cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--continue-on-collection-errors", "-o", "junit_family=xunit1", f"--junitxml={junit}"]
            cmd += ["--rootdir", str(tests.parent), *(["-k", args.keyword] if args.keyword else [])]
            cmd += [*(a for a in pytest_args if a != "--"), *(f"tests/{f}" for f in group)]
            try:
                proc = subprocess.run(cmd, cwd=tests.parent, env=env, capture_output=True, text=True, timeout=args.timeout)
                out, rc = proc.stdout + proc.stderr, proc.returncode
            except subprocess.TimeoutExpired as exc:
                out, rc = f"pytest timed out after {args.timeout} s\n{exc.stdout or ''}", 124
            found = count(junit)
            if not found and rc not in (0, 1, 5):  # the session never started (a conftest failed): each file, one error
                found = {f: {**EMPTY, "errors": 1} for f in group}
            table.update(found)
            outputs.append(out)
            codes.append(rc)
        rc = 0 if all(c in (0, 5) for c in codes) else (1 if all(c in (0, 1, 5) for c in codes) else max(codes))
        return table, "\n".join(outputs), rc


def command_shim(env: dict[str, str], bin_dir: Path) -> dict[str, str]:
    """``polygraphy`` runs Parity's CLI: a script first on PATH and a ``console_scripts`` entry point first on
    sys.path (a distribution of its own, found before Polygraphy's: ``script_runner`` takes the first match)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "polygraphy"
    script.write_text(f"#!{sys.executable}\nimport sys\nfrom parity.cli import main\nsys.exit(main())\n")
    script.chmod(0o755)
    dist = bin_dir / "site" / "parity_polygraphy_command-0.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: parity-polygraphy-command\nVersion: 0\n")
    (dist / "entry_points.txt").write_text("[console_scripts]\npolygraphy = parity.cli:main\n")
    path = os.pathsep.join(filter(None, [str(bin_dir / "site"), env.get("PYTHONPATH")]))
    return {**env, "PATH": os.pathsep.join([str(bin_dir), env.get("PATH", "")]), "PYTHONPATH": path}


def print_table(files: list[str], table: dict[str, dict[str, int]], polygraphy: dict[str, dict[str, int]] | None) -> dict[str, int]:
    """The per-file table and its totals (with Polygraphy's passes beside them under --compare)."""
    width = max(len(f) for f in [*files, "total"])
    extra = "  polygraphy" if polygraphy is not None else ""
    print(f"{'file':<{width}}  passed  failed  errors  skipped{extra}")
    totals = dict.fromkeys(EMPTY, 0)
    reference = 0
    for f in files:
        row = table.get(f, EMPTY)
        for key in totals:
            totals[key] += row[key]
        theirs = ""
        if polygraphy is not None:
            reference += polygraphy.get(f, EMPTY)["passed"]
            theirs = f"  {polygraphy.get(f, EMPTY)['passed']:>10}"
        print(f"{f:<{width}}  {row['passed']:>6}  {row['failed']:>6}  {row['errors']:>6}  {row['skipped']:>7}{theirs}")
    theirs = f"  {reference:>10}" if polygraphy is not None else ""
    print(f"{'total':<{width}}  {totals['passed']:>6}  {totals['failed']:>6}  {totals['errors']:>6}  {totals['skipped']:>7}{theirs}")
    return totals


if __name__ == "__main__":
    sys.exit(main())
