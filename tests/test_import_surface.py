"""The plugin contract is an import surface: shipped plugins and contrib packages use only ``parity``,
``parity.api`` and ``parity.hookspecs`` (docs/plugins/api.md); everything else in the core may change."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = {"parity", "parity.api", "parity.hookspecs"}
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
    assert not bad, "plugins may import only parity, parity.api and parity.hookspecs (docs/plugins/api.md):\n" + "\n".join(bad)


def test_the_checker_sees_every_form(tmp_path):
    sample = tmp_path / "probe.py"
    sample.write_text(
        "import importlib\nfrom parity.api import DataLoader\nfrom parity import hookimpl, onnx_models\nimport parity.registry\n"
        "def f():\n    from parity.util.fs import same_file\n    return importlib.import_module('parity.cli.run')\n"
    )
    assert sorted(forbidden_imports(sample, tmp_path)) == [
        "probe.py:3: parity.onnx_models", "probe.py:4: parity.registry", "probe.py:6: parity.util.fs", "probe.py:7: parity.cli.run",
    ]  # fmt: skip


def test_every_api_name_resolves_and_is_documented():
    import parity.api

    doc = (ROOT / "docs" / "plugins" / "api.md").read_text().split("## Testing plugins")[0]  # parity.testing is not parity.api
    documented = set(re.findall(r"^\| `([A-Za-z_][A-Za-z0-9_]*)", doc, re.M))
    assert len(parity.api.__all__) == len(set(parity.api.__all__))
    missing = [name for name in parity.api.__all__ if name not in documented]
    assert not missing, f"parity.api names without a row in docs/plugins/api.md: {missing}"
    unknown = sorted(documented - set(parity.api.__all__))
    assert not unknown, f"docs/plugins/api.md documents names parity.api does not export: {unknown}"
    for name in parity.api.__all__:
        assert getattr(parity.api, name) is not None, name
    with pytest.raises(AttributeError, match="parity.api.__all__"):
        parity.api.no_such_name  # noqa: B018


def test_api_module_table_points_at_defining_modules():
    """Each name comes from the module the table names (so moving a name is a one-line edit there)."""
    import importlib

    import parity.api

    for name, module in parity.api._EXPORTS.items():
        found = importlib.import_module(module)
        assert module.endswith(f".{name}") or hasattr(found, name), f"{name}: not in {module}"


HEAVY = ("onnx", "onnxruntime", "tensorrt", "numpy", "click")


def _loaded_after(code: str) -> list[str]:
    probe = f"import sys\n{code}\nprint(__import__('json').dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    return [m for m in json.loads(proc.stdout.splitlines()[-1]) if m in HEAVY]


def test_import_parity_api_is_light():
    assert _loaded_after("import parity.api") == []


def test_a_name_loads_only_its_module():
    assert _loaded_after("from parity.api import UsageError, hookimpl, Backend, write_bytes_atomic, did_you_mean") == []
    assert not {"onnx", "onnxruntime", "tensorrt"} & set(_loaded_after("from parity.api import onnx_models"))  # onnx loads when a helper runs
    assert "onnx" not in _loaded_after("from parity.api import DataLoader, TensorMeta, RunResults, save_results")
