"""The core's import structure (issue 27): the layer contracts hold and no import cycle exists.

``importlinter/core.ini`` states the rules (the CLI above the engine above the kernel; the core imports no plugin
package) and import-linter checks them; the cycle check runs on the same import graph (grimp, which import-linter
builds on), imports inside functions and ``TYPE_CHECKING`` blocks included.
"""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "importlinter" / "core.ini"


def _lint_imports() -> str:
    here = Path(sys.executable).parent / "lint-imports"  # the one installed beside this interpreter, else PATH's
    found = str(here) if here.exists() else shutil.which("lint-imports")
    assert found, "lint-imports is not installed: pip install -r requirements-dev.txt"
    return found


def test_core_import_contracts_hold():
    # --no-cache: nothing written into the repository
    proc = subprocess.run([_lint_imports(), str(CONFIG.relative_to(ROOT)), "--no-cache", "--no-logo"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout, proc.stdout


def strongly_connected_components(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components algorithm, iterative (no recursion limit on deep import chains).
    Every import cycle lies inside one component of more than one module (or a module importing itself)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph.get(succ, ())))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(sorted(component))
    return components


def test_the_component_finder_sees_cycles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}, "f": {"d"}}
    assert sorted(c for c in strongly_connected_components(graph) if len(c) > 1) == [["a", "b", "c"]]
    assert sorted(map(tuple, strongly_connected_components(graph))) == [("a", "b", "c"), ("d",), ("e",), ("f",)]


def test_no_import_cycle_in_core():
    built = grimp.build_graph("parity", cache_dir=None, exclude_type_checking_imports=True)
    graph = {m: set(built.find_modules_directly_imported_by(m)) for m in built.modules}
    cycles = [c for c in strongly_connected_components(graph) if len(c) > 1 or c[0] in graph[c[0]]]
    described = []
    for component in cycles:
        edges = [f"{a} -> {b}" for a in component for b in sorted(graph[a]) if b in component]
        described.append("; ".join(edges))
    assert not cycles, "import cycles in the core (each line: the imports inside one cycle):\n" + "\n".join(described)


def test_the_no_plugin_contract_names_every_plugin_package():
    """import-linter has no ``parity_*`` wildcard: every first-party and contrib package must be listed."""
    config = configparser.ConfigParser()
    config.read(CONFIG)
    listed = set(config["importlinter:contract:no-plugins"]["forbidden_modules"].split())
    packages = {p.name for p in ROOT.glob("*/*/parity_*") if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.stem for p in ROOT.glob("*/*/parity_*.py")}
    assert packages and packages | modules <= listed, sorted((packages | modules) - listed)
