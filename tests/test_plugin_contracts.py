"""Plugins import one another only through the other plugin's public ``api`` module, and only plugins they declare
as dependencies (issue 27). The contract is importlinter/plugins.ini, checked by import-linter (``lint-imports``);
these tests run it, show that it catches a private import, and tie each allowed edge to a declared dependency."""

from __future__ import annotations

import configparser
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "importlinter" / "plugins.ini"
CONTRACT = "importlinter:contract:plugins-through-api"
EDGE = re.compile(r"^(?P<user>\w+)\.\*\* -> (?P<used>\w+)\.api$")


def lint_imports(config: Path, extra_path: Path | None = None) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("lint-imports", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    if exe is None:
        pytest.skip("import-linter is not installed (pip install import-linter)")
    env = {**os.environ}
    if extra_path is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(extra_path), env.get("PYTHONPATH")]))
    # --no-cache: nothing written into the repository (import-linter caches in the working directory by default)
    return subprocess.run([exe, "--no-cache", "--no-logo", str(config)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def read_config(path: Path = CONFIG) -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    parser.read(path)
    return parser


def lines(value: str) -> list[str]:
    return [line.strip() for line in value.strip().splitlines() if line.strip()]


def plugin_folders() -> dict[str, Path]:
    """Every distribution under plugins/ and contrib/ with a package named parity_*: package name -> folder."""
    found = {}
    for folder in sorted([*ROOT.glob("plugins/*"), *ROOT.glob("contrib/*")]):
        if (folder / "pyproject.toml").is_file():
            for package in folder.glob("parity_*/__init__.py"):
                found[package.parent.name] = folder
    return found


def test_plugins_keep_the_contract():
    result = lint_imports(CONFIG)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 kept, 0 broken" in result.stdout, result.stdout


def test_every_plugin_is_under_the_contract():
    config = read_config()
    roots = set(lines(config["importlinter"]["root_packages"]))
    modules = set(lines(config[CONTRACT]["modules"]))
    packages = set(plugin_folders())
    assert packages <= modules, f"add {sorted(packages - modules)} to importlinter/plugins.ini"
    assert modules == roots


def test_each_allowed_edge_is_a_declared_dependency_to_an_api_module():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    folders = plugin_folders()
    edges = lines(read_config()[CONTRACT]["ignore_imports"])
    assert edges
    for edge in edges:
        match = EDGE.match(edge)
        assert match, f"{edge!r}: an allowed edge is '<user package>.** -> <used package>.api'"
        user, used = match["user"], match["used"]
        assert (folders[used] / used / "api.py").is_file(), f"{edge}: {used} has no api module"
        project = tomllib.loads((folders[user] / "pyproject.toml").read_text())["project"]
        declared = {canonicalize_name(Requirement(r).name) for r in project.get("dependencies", [])}
        used_distribution = canonicalize_name(tomllib.loads((folders[used] / "pyproject.toml").read_text())["project"]["name"])
        assert used_distribution in declared, f"{edge}: {folders[user].name}/pyproject.toml does not declare {used_distribution}"


def test_the_contract_catches_a_private_import_and_allows_the_api(tmp_path):
    """A plugin package (made here) importing a private module of parity_trt breaks the contract; the same
    package importing parity_trt.api keeps it once that edge is allowed."""
    package = tmp_path / "site" / "parity_fixture_plugin"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "good.py").write_text("from parity_trt.api import import_trt\n")
    (package / "bad.py").write_text("from parity_trt.factory import convert\n")
    config = read_config()
    for key in ("root_packages",):
        config["importlinter"][key] += "\nparity_fixture_plugin"
    config[CONTRACT]["modules"] += "\nparity_fixture_plugin"
    config[CONTRACT]["ignore_imports"] += "\nparity_fixture_plugin.** -> parity_trt.api"
    broken = tmp_path / "broken.ini"
    with broken.open("w") as f:
        config.write(f)
    result = lint_imports(broken, tmp_path / "site")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "parity_fixture_plugin.bad -> parity_trt.factory" in result.stdout, result.stdout
    assert "parity_fixture_plugin.good" not in result.stdout, result.stdout

    (package / "bad.py").unlink()
    kept = lint_imports(broken, tmp_path / "site")
    assert kept.returncode == 0, kept.stdout + kept.stderr


HEAVY = ("onnx", "onnxruntime", "tensorrt", "numpy", "click")


def test_api_modules_are_light_and_every_name_resolves():
    """Importing a plugin's api module loads none of the heavy packages (a command line built from it stays fast);
    each name it lists resolves, once asked for."""
    apis = sorted(f"{package}.api" for package, folder in plugin_folders().items() if (folder / package / "api.py").is_file())
    assert {"parity_trt.api", "parity_onnxrt.api", "parity_surgeon.api"} <= set(apis)
    probe = (
        "import importlib, json, sys\n"
        f"mods = [importlib.import_module(m) for m in {apis!r}]\n"
        "light = sorted({m.split('.')[0] for m in sys.modules} & set(" + repr(HEAVY) + "))\n"
        "missing = [f'{m.__name__}.{n}' for m in mods for n in m.__all__ if getattr(m, n, None) is None]\n"
        "print(json.dumps([light, missing]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    heavy, missing = json.loads(proc.stdout.splitlines()[-1])
    assert heavy == [], f"importing {apis} loads {heavy}"
    assert missing == [], missing
