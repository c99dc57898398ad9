"""No function-local imports of Parity's own light modules without a reason (issue 13).

A function-local ``import`` of a Parity module (the core's or a first-party plugin's, contrib's) is allowed when
importing that module at the top would cost start-up time, i.e. the module brings in a heavy library (numpy,
onnx, onnxruntime, tensorrt, click, rich, pluggy...); when a comment says why (a cycle, `parity --help` never
needing it), on the statement or on the comment line above it or above the run of imports it belongs to (a bare
``noqa`` or ``type: ignore`` says nothing); or when the import sits in a ``try`` whose ``except ImportError``
handles the module's absence (another distribution's, optional). Anything else belongs at the top of the
module, where a reader sees what the module depends on.
"""

from __future__ import annotations

import ast
import io
import json
import os
import re
import subprocess
import sys
import tokenize
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [ROOT / "core" / "parity", *sorted((ROOT / "plugins").glob("*/parity_*")), *sorted((ROOT / "contrib").glob("*/parity_*"))]
PRAGMA = re.compile(r"(noqa|type:\s*ignore|pragma|fmt:|pyright:|mypy:)\b.*$", re.IGNORECASE)
HEAVY = ("numpy", "onnx", "onnxruntime", "onnx_graphsurgeon", "tensorrt", "cuda", "click", "rich", "pluggy", "jsonschema", "google")


def _lazy_table(module: str) -> dict[str, str]:
    import importlib

    mod = importlib.import_module(module)
    table = getattr(mod, "_EXPORTS", None) or getattr(mod, "_LAZY", {})
    return dict(table)  # name -> the module that defines it (or is it)


LAZY = {"parity": _lazy_table("parity"), "parity.api": _lazy_table("parity.api")}

# One fresh interpreter per module: undoing an import in a shared one (deleting sys.modules entries) does not
# work for numpy and friends, which then fail to import again and made light modules look heavy.
_PROBE = """
import json, sys
import parity, parity.api  # every Parity process has these; what matters is what a module adds
before = set(sys.modules)
try:
    __import__(sys.argv[1])
except Exception:  # not importable here (tensorrt absent): count it as heavy
    print(json.dumps(True))
else:
    print(json.dumps(any(m.split(".")[0] in HEAVY for m in set(sys.modules) - before)))
"""


def comments(source: str) -> dict[int, str]:
    """line -> the text of the comment on it (tokens, so a ``#`` inside a string is no comment)."""
    found = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            found[tok.start[0]] = tok.string.lstrip("#").strip()
    return found


def says_why(text: str | None) -> bool:
    """A comment that gives a reason; a bare linter or coverage pragma (``noqa``, ``type: ignore``) gives none."""
    return bool(text) and not PRAGMA.match(text)


def guards_import_error(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Inside ``try: ... except ImportError``: the module may be absent (another distribution's), the handler says so."""
    child, parent = node, parents.get(node)
    while parent is not None and not isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
        if isinstance(parent, ast.Try) and child in parent.body:
            for handler in parent.handlers:
                names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
                if any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError") for n in names):
                    return True
        child, parent = parent, parents.get(parent)
    return False


def local_imports(path: Path) -> list[tuple[int, str, bool]]:
    """(line, module, has a reason) for each import of a Parity module inside a function of ``path``, once each."""
    source = path.read_text()
    lines = source.splitlines()
    notes = comments(source)
    tree = ast.parse(source, str(path))
    package = ".".join(path.relative_to(next(s for s in SOURCES if path.is_relative_to(s)).parent).with_suffix("").parts)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}

    def in_function(node: ast.AST) -> bool:
        while (node := parents.get(node)) is not None:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return True
        return False

    import_lines = {n for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom)) for n in range(node.lineno, (node.end_lineno or node.lineno) + 1)}
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package.split(".")[: -node.level], *([base] if base else [])])
            modules = [f"{base}.{a.name}" for a in node.names]  # a submodule, or a name: resolve() keeps the module part
            if base in ("parity", "parity.api") and not node.level:  # names resolve lazily: to their module
                modules = [LAZY[base].get(a.name, f"{base}.{a.name}") for a in node.names]
        else:
            continue
        own = [m for m in modules if m.split(".")[0].startswith("parity")]
        if not own or not in_function(node):
            continue
        above = node.lineno - 1  # a comment line right above the statement, or above the run of imports it is part of
        while above in import_lines:
            above -= 1
        reason = (
            any(says_why(notes.get(n)) for n in range(node.lineno, (node.end_lineno or node.lineno) + 1))
            or (above >= 1 and lines[above - 1].strip().startswith("#") and says_why(notes.get(above)))
            or guards_import_error(node, parents)
        )
        found.update((node.lineno, m, reason) for m in own)
    return sorted(found)


@cache
def heaviness(modules: tuple[str, ...]) -> dict[str, bool]:
    probe = f"HEAVY = {HEAVY!r}\n" + _PROBE

    def heavy(module: str) -> bool:
        out = subprocess.run([sys.executable, "-c", probe, module], capture_output=True, text=True, timeout=300, check=True).stdout
        return json.loads(out.strip().splitlines()[-1])

    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        return dict(zip(modules, pool.map(heavy, modules)))


def resolve(module: str) -> str:
    """``parity.plugins.get_registry`` -> ``parity.plugins`` (the importable prefix)."""
    import importlib.util

    parts = module.split(".")
    while parts:
        name = ".".join(parts)
        try:
            if importlib.util.find_spec(name) is not None:
                return name
        except (ImportError, ValueError):
            pass
        parts.pop()
    return module


def test_function_local_imports_of_light_modules_say_why():
    sites = [(path, line, resolve(module)) for src in SOURCES for path in sorted(src.rglob("*.py")) for line, module, reason in local_imports(path) if not reason]
    heavy = heaviness(tuple(sorted({m for _, _, m in sites})))
    light = sorted(
        {f"{path.relative_to(ROOT)}:{line}: {module}" for path, line, module in sites if not heavy.get(module, True)},
        key=lambda s: (s.split(":")[0], int(s.split(":")[1]), s),
    )
    assert not light, f"{len(light)} function-local import(s) of light Parity modules without a reason comment (move to the top, or say why):\n" + "\n".join(light)
