"""Generate a fresh plugin from contrib/parity-plugin-template, pip-install it into a new virtual environment
next to Parity, and use it the way its author would: `parity plugins --json`, `parity run`, its own tests.

The venv sees the Parity that runs these tests through a .pth file naming this interpreter's sys.path (so it works
whether the tests run in a virtual environment, a system install or a user install; --system-site-packages would
see only the base interpreter's packages), and the plugin is installed with --no-deps --no-build-isolation so
nothing is downloaded. The template's build requirement (setuptools>=77, for its PEP 639 `license = "Apache-2.0"`)
is met by the running environment's setuptools (the lock's): the venv is made without pip (so without the older
setuptools Python 3.11's ensurepip would add), and the running pip installs into it with ``--python``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from packaging.requirements import Requirement

TEMPLATE = Path(__file__).resolve().parents[1] / "contrib" / "parity-plugin-template"
NAME = "widgetdiff"

pytestmark = pytest.mark.slow


def generate(dest: Path, name: str) -> Path:
    """What the template's README tells a plugin author to do: copy, then rename 'mymetric' everywhere."""
    shutil.copytree(TEMPLATE, dest, ignore=shutil.ignore_patterns("*.egg-info", "__pycache__", "build"))
    for path in sorted(dest.rglob("*"), reverse=True):  # children before their folders
        if path.is_file():
            path.write_text(path.read_text().replace("mymetric", name))
        if "mymetric" in path.name:
            path.rename(path.with_name(path.name.replace("mymetric", name)))
    return dest


def run(*cmd: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=cwd, timeout=300)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))}\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    root = tmp_path_factory.mktemp("template")
    plugin = generate(root / f"parity-{NAME}", NAME)
    # no pip or setuptools of the venv's own (ensurepip took most of this fixture's ~50 s): the running pip installs
    # into it with --python, and the build finds the running environment's setuptools through the .pth below
    base = getattr(sys, "_base_executable", sys.executable)
    run(base, "-m", "venv", "--without-pip", root / "venv")
    python = root / "venv" / "bin" / "python"
    site_packages = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").stdout.strip())
    outer = [p for p in sys.path if p and Path(p).is_dir()]
    # addsitedir also runs the .pth files there (editable installs of Parity and its plugins live in them)
    (site_packages / "zz_outer_environment.pth").write_text(f"import site; list(map(site.addsitedir, {outer!r}))\n")
    needed = Requirement(re.search(r'^requires = \["(setuptools[^"]*)"', (TEMPLATE / "pyproject.toml").read_text(), re.M).group(1))
    version = run(python, "-c", "import setuptools; print(setuptools.__version__)").stdout.strip()
    assert version in needed.specifier, f"the template builds with {needed}; this environment has setuptools {version} (see constraints.txt)"
    run(sys.executable, "-m", "pip", "--isolated", "--python", python, "install", "-q", "--no-deps", "--no-build-isolation", "-e", plugin)
    return python, plugin


def test_generated_plugin_is_listed(venv):
    python, _ = venv
    rows = json.loads(run(python, "-m", "parity", "plugins", "--json").stdout)
    row = next(r for r in rows if r["distribution"] == f"parity-{NAME}")
    assert row == {
        "name": NAME, "distribution": f"parity-{NAME}", "version": "0.1.0", "source": "entry-point", "status": "loaded",
        "hooks": ["parity_register_comparators"], "registered": {"comparators": [NAME]}, "error": None,
    }  # fmt: skip
    # and it is not visible outside the venv
    outside = json.loads(run(sys.executable, "-m", "parity", "plugins", "--json").stdout)
    assert all(r["distribution"] != f"parity-{NAME}" for r in outside)


def test_generated_plugin_works_from_the_cli(venv, tmp_path):
    from parity import IterationResult, RunResults, save_results

    python, _ = venv
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    save_results(RunResults([("a", [IterationResult({"y": x})])]), tmp_path / "a.npz")
    save_results(RunResults([("b", [IterationResult({"y": x + 0.5})])]), tmp_path / "b.npz")
    base = [python, "-m", "parity", "run", "--load-outputs", tmp_path / "a.npz", tmp_path / "b.npz", "--compare-func", NAME]
    assert f"{NAME} max_abs=0.5" in run(*base, f"--{NAME}-max", "0.6").stdout
    failed = subprocess.run([str(c) for c in [*base, f"--{NAME}-max", "0.4"]], capture_output=True, text=True, timeout=120)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert any(line.startswith("FAILED | mismatched outputs: y") for line in failed.stdout.splitlines()) and "0.5 > 0.4" in failed.stdout


def test_generated_plugin_passes_its_own_tests(venv):
    python, plugin = venv
    proc = run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", plugin, plugin / "tests")
    assert "4 passed" in proc.stdout, proc.stdout  # listed (as an entry point: it is installed) + three verdicts
