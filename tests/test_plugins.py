"""Plugin discovery as a third party sees it: packages installed with pip, found through the entry point."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

GOOD = '''
import click
from parity import hookimpl
from parity.registry import ComparatorSpec


def _factory(options):
    from parity.compare.result import OutputCheck
    import numpy as np

    limit = options.get("max_abs_diff") or 0.0

    def compare(name, actual, reference):
        diff = float(np.max(np.abs(actual.astype(np.float64) - reference))) if actual.size else 0.0
        return OutputCheck(name, diff <= limit, "maxdiff", {"max_abs_diff": diff}, {"limit": limit})

    return compare


@hookimpl
def parity_register_comparators(register):
    register(ComparatorSpec("maxdiff", _factory, "max |a-b| <= --max-abs-diff",
                            options=(click.Option(["--max-abs-diff"], type=float, default=None),)))


@hookimpl
def parity_register_commands(cli):
    @cli.command("hello")
    def hello():
        click.echo("hello from a plugin")
'''

BROKEN = "raise RuntimeError('this plugin is broken on purpose')\n"


def make_package(root: Path, dist: str, module: str, source: str) -> Path:
    pkg = root / dist
    pkg.mkdir(parents=True)
    (pkg / f"{module}.py").write_text(textwrap.dedent(source))
    (pkg / "pyproject.toml").write_text(textwrap.dedent(f"""
        [build-system]
        requires = ["setuptools>=64"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "{dist}"
        version = "1.2.3"
        [project.entry-points.parity]
        {module} = "{module}"
        [tool.setuptools]
        py-modules = ["{module}"]
    """))
    return pkg


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """Installs a working and a broken plugin with pip into a private site directory."""
    root = tmp_path_factory.mktemp("plugins")
    target = root / "site"
    for dist, module, source in (("parity-testplugin", "parity_testplugin", GOOD), ("parity-broken", "parity_broken", BROKEN)):
        pkg = make_package(root / "src", dist, module, source)
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index", "--target", str(target), str(pkg)],
            check=True, capture_output=True, timeout=300,
        )  # fmt: skip
    return target


def parity_with(site: Path, *args, **env):
    import os

    full = {**os.environ, "PYTHONPATH": str(site), **env}
    return subprocess.run(["parity", *map(str, args)], capture_output=True, text=True, env=full, timeout=120)


def test_installed_plugin_is_listed_with_distribution_version_hooks(site):
    result = parity_with(site, "plugins", "--json")
    assert result.returncode == 0, result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    good = rows["parity_testplugin"]
    assert good["distribution"] == "parity-testplugin" and good["version"] == "1.2.3" and good["status"] == "loaded"
    assert good["hooks"] == ["parity_register_commands", "parity_register_comparators"]
    assert good["registered"] == {"comparators": ["maxdiff"]}
    assert rows["onnxrt"]["registered"] == {"backends": ["onnxrt"]}


def test_broken_plugin_warns_once_and_everything_else_works(site, affine_model):
    result = parity_with(site, "plugins", "--json")
    warnings = [line for line in result.stderr.splitlines() if "parity-broken" in line]
    assert len(warnings) == 1 and "failed to load" in warnings[0]
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert rows["parity_broken"]["status"] == "failed" and "broken on purpose" in rows["parity_broken"]["error"]
    run = parity_with(site, "run", affine_model, "--onnxrt", "--onnxrt")
    assert run.returncode == 0, run.stderr


def test_plugin_metric_and_command_work_from_the_cli(site, tmp_path):
    import core_models as models

    models.affine(tmp_path / "a.onnx", scale=2.0)
    models.affine(tmp_path / "b.onnx", scale=2.05)
    golden = tmp_path / "g.npz"
    assert parity_with(site, "run", tmp_path / "a.onnx", "--onnxrt", "--save-outputs", golden).returncode == 0
    ok = parity_with(site, "run", tmp_path / "b.onnx", "--onnxrt", "--load-outputs", golden, "--compare-func", "maxdiff", "--max-abs-diff", "0.1")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "maxdiff max_abs_diff=" in ok.stdout
    bad = parity_with(site, "run", tmp_path / "b.onnx", "--onnxrt", "--load-outputs", golden, "--compare-func", "maxdiff", "--max-abs-diff", "0.01")
    assert bad.returncode == 1
    assert parity_with(site, "hello").stdout.strip() == "hello from a plugin"


def test_block_list_allow_list_and_strict_mode(site):
    blocked = parity_with(site, "plugins", "--json", PARITY_DISABLE_PLUGINS="parity-broken")
    assert "failed to load" not in blocked.stderr
    assert {r["name"]: r["status"] for r in json.loads(blocked.stdout)}["parity_broken"] == "blocked"
    allowed = parity_with(site, "plugins", "--json", PARITY_LOAD_PLUGINS="parity-testplugin")
    loaded = {r["name"] for r in json.loads(allowed.stdout) if r["status"] == "loaded"}
    assert loaded == {"parity_testplugin"}
    strict = parity_with(site, "plugins", PARITY_STRICT_PLUGINS="1")
    assert strict.returncode == 2 and "parity-broken failed to load" in strict.stderr and "Traceback" not in strict.stderr


def test_requirements_listing(site):
    result = parity_with(site, "plugins", "--requirements", PARITY_DISABLE_PLUGINS="parity-broken")
    assert "parity-testplugin==1.2.3" in result.stdout.splitlines()
