"""The plugin contract is an import surface: shipped plugins and contrib packages use only ``parity``,
``parity.api``, ``parity.commands`` and ``parity.hookspecs`` (docs/plugins/api.md); everything else in the core may
change."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = {"parity", "parity.api", "parity.commands", "parity.hookspecs"}
# `from parity import X` is allowed for the names parity/__init__ exports, not for its submodules.
SUBMODULES = {p.stem if p.is_file() else p.name for p in (ROOT / "core" / "parity").iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}


def source_files() -> list[Path]:
    """Every source module of the first-party plugins and the contrib packages (not their tests)."""
    roots = sorted((ROOT / "plugins").glob("*/parity_*")) + sorted(p for p in (ROOT / "contrib").iterdir() if p.is_dir())
    files = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root).parts
            if any(part in ("tests", "build") or part.endswith(".egg-info") for part in parts):
                continue
            if path.name == "conftest.py" or path.name.startswith("test_"):
                continue
            files.append(path)
    return files


def _import_module_arg(node: ast.Call) -> str | None:
    """The string of ``importlib.import_module("...")`` / ``import_module("...")`` / ``__import__("...")``."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name in ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
        return node.args[0].value
    return None


def forbidden_imports(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line: module`` for each import of a core module outside the contract (function-local ones included)."""
    tree = ast.parse(path.read_text(), str(path))
    where = path.relative_to(root)
    found = []

    def check(module: str, line: int) -> None:
        if (module == "parity" or module.startswith("parity.")) and module not in ALLOWED:
            found.append(f"{where}:{line}: {module}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                check(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            check(node.module, node.lineno)
            if node.module == "parity":
                for alias in node.names:
                    if alias.name in SUBMODULES:
                        check(f"parity.{alias.name}", node.lineno)
        elif isinstance(node, ast.Call) and (target := _import_module_arg(node)):
            check(target, node.lineno)
    return found


def test_sources_found():
    names = {p.parent.name for p in source_files()}
    assert {"parity_onnxrt", "parity_trt", "parity_surgeon", "parity_reduce", "parity_tactics", "parity_metrics", "parity_onnx_reference"} <= names
    assert any(p.name == "parity_mymetric.py" for p in source_files())  # the template's single module


def test_plugins_import_only_the_api():
    bad = [line for path in source_files() for line in forbidden_imports(path)]
    assert not bad, "plugins may import only parity, parity.api, parity.commands and parity.hookspecs (docs/plugins/api.md):\n" + "\n".join(bad)


def test_the_checker_sees_every_form(tmp_path):
    sample = tmp_path / "probe.py"
    sample.write_text(
        "import importlib\nfrom parity.api import DataLoader\nfrom parity import hookimpl, onnx_models\nimport parity.registry\n"
        "def f():\n    from parity.util.fs import same_file\n    return importlib.import_module('parity.cli.run')\n"
    )
    assert sorted(forbidden_imports(sample, tmp_path)) == [
        "probe.py:3: parity.onnx_models", "probe.py:4: parity.registry", "probe.py:6: parity.util.fs", "probe.py:7: parity.cli.run",
    ]  # fmt: skip


@pytest.mark.parametrize("module", ["parity.api", "parity.commands"])
def test_every_api_name_resolves_and_is_documented(module):
    import importlib

    contract = importlib.import_module(module)
    page = (ROOT / "docs" / "plugins" / "api.md").read_text().split("## Testing plugins")[0]  # parity.testing is in neither
    engine, commands = page.split("## Commands: `parity.commands`")
    doc = engine if module == "parity.api" else commands
    documented = set(re.findall(r"^\| `([A-Za-z_][A-Za-z0-9_]*)", doc, re.M))
    assert len(contract.__all__) == len(set(contract.__all__))
    missing = [name for name in contract.__all__ if name not in documented]
    assert not missing, f"{module} names without a row in its part of docs/plugins/api.md: {missing}"
    unknown = sorted(documented - set(contract.__all__))
    assert not unknown, f"docs/plugins/api.md documents under {module} names it does not export: {unknown}"
    for name in contract.__all__:
        assert getattr(contract, name) is not None, name
    with pytest.raises(AttributeError, match=f"{module}.__all__"):
        contract.no_such_name  # noqa: B018


def test_the_engine_contract_has_nothing_of_the_cli():
    """parity.api is the engine's contract: no name it exports is defined in parity.cli (those are parity.commands')."""
    import parity.api
    import parity.commands

    from_cli = sorted(name for name, module in parity.api._EXPORTS.items() if module.startswith("parity.cli") and name != "GreedyOption")
    assert not from_cli, f"parity.api exports the CLI's {from_cli}: move them to parity.commands"
    assert all(module.startswith("parity.cli") for module in parity.commands._EXPORTS.values())
    assert not set(parity.api.__all__) & set(parity.commands.__all__)


def test_contracts_are_visible_to_type_checkers():
    """Each lazily exported name is also imported under TYPE_CHECKING, so readers and type checkers see the contract."""
    import ast

    for module in ("api", "commands"):
        tree = ast.parse((ROOT / "core" / "parity" / f"{module}.py").read_text())
        guarded = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
        seen = {alias.asname or alias.name for node in ast.walk(guarded) if isinstance(node, ast.ImportFrom) for alias in node.names}
        contract = __import__(f"parity.{module}", fromlist=["_EXPORTS"])
        assert set(contract._EXPORTS) <= seen, f"parity.{module}: not under TYPE_CHECKING: {sorted(set(contract._EXPORTS) - seen)}"


def test_api_module_table_points_at_defining_modules():
    """Each name comes from the module the table names (so moving a name is a one-line edit there)."""
    import importlib

    import parity.api
    import parity.commands

    for name, module in {**parity.api._EXPORTS, **parity.commands._EXPORTS}.items():
        found = importlib.import_module(module)
        assert module.endswith(f".{name}") or hasattr(found, name), f"{name}: not in {module}"


HEAVY = ("onnx", "onnxruntime", "tensorrt", "numpy", "click")


def _loaded_after(code: str) -> list[str]:
    probe = f"import sys\n{code}\nprint(__import__('json').dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    return [m for m in json.loads(proc.stdout.splitlines()[-1]) if m in HEAVY]


def test_import_parity_api_is_light():
    assert _loaded_after("import parity.api") == []
    assert _loaded_after("import parity.commands") == []


def test_a_name_loads_only_its_module():
    assert _loaded_after("from parity.api import UsageError, hookimpl, Backend, write_bytes_atomic, did_you_mean") == []
    assert not {"onnx", "onnxruntime", "tensorrt"} & set(_loaded_after("from parity.api import onnx_models"))  # onnx loads when a helper runs
    assert "onnx" not in _loaded_after("from parity.api import DataLoader, TensorMeta, RunResults, save_results")
