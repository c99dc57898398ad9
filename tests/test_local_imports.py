"""No function-local imports of Parity's own light modules without a reason (issue 13).

A function-local ``import`` of a Parity module (the core's or a first-party plugin's, contrib's) is allowed when
importing that module at the top would cost start-up time, i.e. the module brings in a heavy library (numpy,
onnx, onnxruntime, tensorrt, click, rich, pluggy...); when a comment says why (a cycle, `parity --help` never
needing it), on the statement or on the comment line above it or above the run of imports it belongs to (a bare
``noqa`` or ``type: ignore`` says nothing); or when the import sits in a ``try`` whose ``except ImportError``
handles the module's absence (another distribution's, optional). Anything else belongs at the top of the
module, where a reader sees what the module depends on.

A function-local import of a standard-library module (issue 27: the standard library, imported at the top) needs
such a reason too, with the figure measured (``# 6 ms at start-up: parity --help never needs it``): only a module
that costs a command at least a millisecond of start-up it would not otherwise spend (``parity --help``,
``parity run --help`` or a tiny ``parity run``; ``python -X importtime`` after what that command imports) stays
in a function. Most cost nothing there (``os``, ``re``, ``inspect`` come with click and pluggy anyway).
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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [ROOT / "core" / "parity", *sorted((ROOT / "plugins").glob("*/parity_*")), *sorted((ROOT / "contrib").glob("*/parity_*"))]
PRAGMA = re.compile(r"(noqa|type:\s*ignore|pragma|fmt:|pyright:|mypy:)\b.*$", re.IGNORECASE)
FIGURE = re.compile(r"\d+(\.\d+)?\s*ms\b")  # a measured cost, as "1.7 ms" or "30 ms"
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


def is_parity(module: str) -> bool:
    return module.split(".")[0].startswith("parity")


def is_stdlib(module: str) -> bool:
    return module.split(".")[0] in sys.stdlib_module_names


def local_imports(path: Path, wanted: Callable[[str], bool] = is_parity, figure: bool = False) -> list[tuple[int, str, bool]]:
    """(line, module, has a reason) for each import of a ``wanted`` module (Parity's) inside a function of
    ``path``, once each; with ``figure``, a reason comment must also give the measured cost in ms."""
    source = path.read_text()
    lines = source.splitlines()
    notes = comments(source)
    tree = ast.parse(source, str(path))
    source = next((s for s in SOURCES if path.is_relative_to(s)), path.parent)  # (a test's own file: its folder)
    package = ".".join(path.relative_to(source.parent).with_suffix("").parts)
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
        own = [m for m in modules if wanted(m)]
        if not own or not in_function(node):
            continue
        above = node.lineno - 1  # a comment line right above the statement, or above the run of imports it is part of
        while above in import_lines:
            above -= 1
        def why(text: str | None) -> bool:
            return says_why(text) and (not figure or bool(FIGURE.search(text or "")))

        reason = (
            any(why(notes.get(n)) for n in range(node.lineno, (node.end_lineno or node.lineno) + 1))
            or (above >= 1 and lines[above - 1].strip().startswith("#") and why(notes.get(above)))
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


# Sites in files under other engineers' edits when this rule came (issue 27), with what measuring found: each
# is to move to the top or get its comment in that file's next change, and then leave this list.
PENDING: set[tuple[str, str]] = set()  # sites other engineers were editing when the rule came: none left


def test_function_local_standard_library_imports_say_why():
    found = {
        (str(path.relative_to(ROOT)), line, module)
        for src in SOURCES
        for path in sorted(src.rglob("*.py"))
        for line, module, reason in local_imports(path, is_stdlib, figure=True)
        if not reason
    }
    sites = sorted(f"{path}:{line}: {module}" for path, line, module in found if (path, module) not in PENDING)
    done = sorted(f"{path}: {module}" for path, module in PENDING - {(path, module) for path, _, module in found})
    assert not done, "fixed, so leave PENDING in tests/test_local_imports.py:\n" + "\n".join(done)
    assert not sites, (
        f"{len(sites)} function-local standard-library import(s) without a comment giving their start-up cost "
        "(move them to the top, or measure: `# 3 ms at start-up: parity run never needs it`):\n" + "\n".join(sites)
    )


def test_a_standard_library_import_needs_its_measured_cost(tmp_path):
    module = tmp_path / "mod.py"
    module.write_text(
        "import json\n"  # at the top: fine
        "def bare():\n    import tempfile\n"
        "def vague():\n    import shutil  # not needed at start-up\n"
        "def pragma():\n    import zipfile  # noqa: PLC0415\n"
        "def measured():\n    # 5 ms at start-up: parity run never needs it\n    import difflib\n    from dataclasses import asdict\n"
        "def on_the_line():\n    import heapq  # 0.6 ms at start-up\n"
        "def optional():\n    try:\n        import fcntl\n    except ImportError:\n        pass\n"
        "def own():\n    import parity.plugins\n"
    )
    found = {module: reason for _, module, reason in local_imports(module, is_stdlib, figure=True)}
    assert found == {
        "tempfile": False, "shutil": False, "zipfile": False,
        "difflib": True, "dataclasses.asdict": True, "heapq": True, "fcntl": True,
    }
