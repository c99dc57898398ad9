"""Check TensorRT names used by Python source against the per-release API manifests (no TensorRT needed).

An AST walk collects ``trt.A.B`` attribute chains (module-level names, enum members, static methods) and
``var.attr`` accesses on variables whose TensorRT class is known from a naming convention (``config`` is an
``IBuilderConfig``, ``cache`` an ``ITimingCache``, ...). Each use is tagged with the function it is in, so code
that runs on one TensorRT line only (guarded by a capability probe) is checked against that line's releases.
Manifests: ``tensorrt-<version>-members.txt`` from ``shared/trt-api`` (first column: qualified name).

It complements ``parity_trt.api.conformance``, the TensorRT plugin's checker (whose receivers are fixed plugin-wide,
e.g. ``context`` is an ``IExecutionContext`` there but an ``IAlgorithmContext`` here); the tests run both.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from parity_trt.api import conformance as trt_conformance  # the TensorRT plugin's checker; this one adds typed variables per function


@dataclass(frozen=True)
class Use:
    name: str  # qualified TensorRT name, e.g. "ITimingCache.queryKeys"
    function: str  # enclosing function's qualified name ("" at module level)
    line: int


class _Walker(ast.NodeVisitor):
    def __init__(self, module_alias: str, types: Mapping[str, str]) -> None:
        self.alias, self.types = module_alias, types
        self.stack: list[str] = []
        self.uses: list[Use] = []

    def _scoped(self, node: ast.AST, name: str) -> None:
        self.stack.append(name)
        self.generic_visit(node)
        self.stack.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._scoped(node, node.name)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._scoped(node, node.name)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        chain = trt_conformance.attribute_chain(node)
        if chain:
            head, rest = chain[0], [p for p in chain[1:] if not (p.startswith("__") and p != "__version__")]
            name = None
            if head == self.alias and rest:
                name = ".".join(rest)
            elif head in self.types and rest:
                name = f"{self.types[head]}.{rest[0]}"
            if name:
                self.uses.append(Use(name, ".".join(self.stack), node.lineno))
                return  # the whole chain is one use; do not revisit its prefixes
        self.generic_visit(node)


def trt_uses(source: str, types: Mapping[str, str], module_alias: str = "trt") -> list[Use]:
    walker = _Walker(module_alias, types)
    walker.visit(ast.parse(source))
    return walker.uses


def load_members(manifest_dir: str | Path, version: str) -> set[str]:
    path = Path(manifest_dir) / f"tensorrt-{version}-members.txt"
    return {line.split("\t", 1)[0] for line in path.read_text().splitlines() if line and not line.startswith("#")}


def check_uses(
    uses: Iterable[Use],
    members: Mapping[str, set[str]],
    lines: Mapping[str, Iterable[str]],
    default: Iterable[str],
) -> list[str]:
    """Problems: a use missing from a release its function must run on.

    ``lines`` maps a function name (or a prefix ``Class.``) to the releases it runs on; others use ``default``.
    """
    problems = []
    for use in uses:
        versions = next((v for prefix, v in lines.items() if use.function == prefix or use.function.startswith(prefix + ".")), default)
        for version in versions:
            if use.name not in members[version]:
                problems.append(f"line {use.line} ({use.function or 'module'}): {use.name} is not in TensorRT {version}")
    return problems
