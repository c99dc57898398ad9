"""The core names no plugin: no string in its code (docstrings and comments aside) names a first-party plugin, its
package or distribution, or one of its options. What a plugin adds (command groups and their help, marking
options, strategies' searches, the divergence hint) comes from the plugin through the registry and hooks."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "core" / "parity"


def plugin_words() -> set[str]:
    words = {"tensorrt", "onnx_outputs", "trt_outputs", "mark_debug"}  # the TensorRT library, plugins' marking options
    for plugin in (ROOT / "plugins").iterdir():
        if (plugin / "pyproject.toml").is_file():
            words |= {f"parity-{plugin.name}", f"parity_{plugin.name}"}
            if plugin.name not in TOOLS:
                words.add(plugin.name)
    return words


# plugins named after a tool the core itself speaks of: parity-polygraphy (Polygraphy's Python API) is named by its
# package and distribution; the word alone is Polygraphy, whose files the core reads and writes (parity.results.polygraphy).
# parity-torch likewise: the word alone is PyTorch, the library the core's data loader may draw with
# (--data-loader-backend-module torch) and whose tensors it recognises in Polygraphy's files
TOOLS = {"polygraphy", "torch"}


def offenders(path: Path, words: set[str]) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            named = set(re.findall(r"[\w-]+", node.value)) & words
            if named:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {sorted(named)} in {node.value[:80]!r}")
    return found


def test_the_words_cover_every_first_party_plugin():
    words = plugin_words()
    assert {"onnxrt", "trt", "surgeon", "reduce", "tactics", "parity_trt"} <= words


def test_no_core_string_names_a_plugin():
    words = plugin_words()
    found = [hit for path in sorted(CORE.rglob("*.py")) for hit in offenders(path, words)]
    assert not found, "the core names a plugin:\n" + "\n".join(found)


def test_the_check_sees_a_named_plugin(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text('"""Docstrings may say surgeon."""\nKINDS = ("reduce", "precision")\nLINE = ["parity", "surgeon", "extract"]\n')
    original = ROOT
    try:
        globals()["ROOT"] = tmp_path
        assert [hit.split(":")[1] for hit in offenders(probe, {"reduce", "surgeon"})] == ["2", "3"]
    finally:
        globals()["ROOT"] = original
