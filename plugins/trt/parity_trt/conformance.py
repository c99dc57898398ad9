"""Static TensorRT API conformance: is every TensorRT name this code uses defined in each supported release?

Algorithm: an AST walk collects *uses* (qualified names such as ``IBuilderConfig.set_memory_pool_limit``):

* attribute chains on the module: ``trt.BuilderFlag.TF32`` -> ``BuilderFlag.TF32``;
* attributes of variables whose role is fixed by naming convention (:data:`RECEIVERS`: a variable or
  ``self.`` attribute called ``config`` always holds an ``IBuilderConfig``, ``engine`` an ``ICudaEngine``...),
  with the keyword arguments of calls on them;
* methods defined in subclasses of TensorRT interfaces (``class X(trt.IOutputAllocator)``);
* string names given to ``versions.require/has/lookup`` or wrapped in ``trt_name("...")``.

Each use is then looked up in the per-release manifests (``tensorrt-api-matrix.tsv``: name -> present in
each version) and signatures. A name must exist in every release, or be declared in ``versions.GATES`` with
a range that matches exactly the releases that have it. Pure Python: runs where TensorRT cannot.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from parity_trt.versions import GATES, Gate

# variable name -> TensorRT class it always holds in this plugin (the convention the walk enforces)
RECEIVERS = {
    "builder": "Builder",
    "network": "INetworkDefinition",
    "config": "IBuilderConfig",
    "parser": "OnnxParser",
    "error": "ParserError",
    "engine": "ICudaEngine",
    "context": "IExecutionContext",
    "inspector": "EngineInspector",
    "profile": "IOptimizationProfile",
    "layer": "ILayer",
    "tensor": "ITensor",
    "cache": "ITimingCache",
    "timing_cache": "ITimingCache",
    "registry": "IPluginRegistry",
    "serialized": "IHostMemory",
    "runtime": "Runtime",
    "attention_input": "IAttentionInputLayer",
}
NAME_FUNCTIONS = {"require", "has", "lookup", "trt_name", "unavailable"}
MODULE_ALIASES = {"trt", "tensorrt"}


@dataclass(frozen=True)
class Use:
    name: str
    file: str
    line: int
    keywords: tuple[str, ...] = ()

    def where(self) -> str:
        return f"{self.file}:{self.line}"


def attribute_chain(node: ast.AST) -> list[str] | None:
    """``trt.A.B`` -> ``['trt', 'A', 'B']``; ``self.x.y`` -> ``['self', 'x', 'y']``; else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


class _Collector(ast.NodeVisitor):
    def __init__(self, file: str) -> None:
        self.file = file
        self.uses: list[Use] = []
        self._calls: dict[int, tuple[str, ...]] = {}  # id(func node) -> keyword names

    def _add(self, name: str, node: ast.AST, keywords: tuple[str, ...] = ()) -> None:
        leaf = name.rsplit(".", 1)[-1]
        if leaf.startswith("__") and leaf.endswith("__"):
            return  # dunders (__init__) are Python's, not the API's
        self.uses.append(Use(name, self.file, getattr(node, "lineno", 0), keywords))

    def visit_Call(self, node: ast.Call) -> None:
        self._calls[id(node.func)] = tuple(k.arg for k in node.keywords if k.arg)
        func = node.func
        fname = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if fname in NAME_FUNCTIONS:
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and re.fullmatch(r"[A-Z][\w.]*", arg.value):
                    self._add(arg.value, node)
        if fname == "enum_member" and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
            self._add(str(node.args[1].value), node)
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        chain = attribute_chain(node)
        if chain and not isinstance(getattr(node, "_parent", None), ast.Attribute):
            keywords = self._calls.get(id(node), ())
            if chain[0] in MODULE_ALIASES and len(chain) > 1:
                self._add(".".join(chain[1:]), node, keywords)
            else:
                rest = chain[1:] if chain[0] != "self" else chain[2:]
                role = chain[0] if chain[0] != "self" else (chain[1] if len(chain) > 1 else "")
                if role in RECEIVERS and rest:
                    self._add(f"{RECEIVERS[role]}.{rest[0]}", node, keywords if len(rest) == 1 else ())
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            chain = attribute_chain(base)
            if chain and chain[0] in MODULE_ALIASES and len(chain) == 2:
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and not item.name.startswith("_"):
                        self._add(f"{chain[1]}.{item.name}", item)
        self.generic_visit(node)


def collect_source(source: str, file: str = "<string>") -> list[Use]:
    tree = ast.parse(source, file)
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            child._parent = parent  # type: ignore[attr-defined]
    collector = _Collector(file)
    collector.visit(tree)
    return collector.uses


def collect_paths(paths: Iterable[Path]) -> list[Use]:
    uses: list[Use] = []
    for path in paths:
        uses.extend(collect_source(path.read_text(), str(path)))
    return uses


@dataclass
class Manifest:
    versions: list[str]
    present: dict[str, tuple[bool, ...]]  # qualified name -> present per version
    keywords: dict[tuple[str, str], set[str]]  # (version, name) -> argument names over all overloads

    @classmethod
    def load(cls, directory: str | Path) -> Manifest:
        directory = Path(directory)
        lines = (directory / "tensorrt-api-matrix.tsv").read_text().splitlines()
        versions = lines[0].split("\t")[1:]
        present = {}
        for line in lines[1:]:
            name, *flags = line.split("\t")
            present[name] = tuple(f == "1" for f in flags)
        keywords: dict[tuple[str, str], set[str]] = {}
        for version in versions:
            for line in (directory / f"tensorrt-{version}-signatures.txt").read_text().splitlines():
                match = re.match(r"^([\w.]+)\((.*)\)( ->.*)?$", line)
                if match:
                    args = {a.split(":")[0].split("=")[0].strip() for a in split_args(match[2])}
                    keywords.setdefault((version, match[1]), set()).update(a for a in args if a)
        return cls(versions, present, keywords)

    def versions_with(self, name: str) -> list[str]:
        flags = self.present.get(name)
        return [v for v, f in zip(self.versions, flags or ()) if f]


def split_args(text: str, sep: str = ",") -> list[str]:
    """Split a signature's arguments on top-level ``sep`` (types may hold ``[a, b]``, ``(..)``, ``{..}``), stripped."""
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch in "[(<{":
            depth += 1
        elif ch in "])>}":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current)
    return [part.strip() for part in parts]


def check(uses: Iterable[Use], manifest: Manifest, gates: Mapping[str, Gate] = GATES) -> list[str]:
    """Problems, one line each; empty means every use is valid in every release (or correctly gated)."""
    problems: list[str] = []
    for name, gate in gates.items():
        have = manifest.versions_with(name)
        if not have:
            problems.append(f"gate {name}: not a TensorRT name in any manifest")
            continue
        expected = [v for v in manifest.versions if gate.contains(v)]
        if expected != have:
            problems.append(f"gate {name} ({gate.describe()}) claims {expected}, but the manifests have it in {have}")
    for use in uses:
        have = manifest.versions_with(use.name)
        if not have:
            problems.append(f"{use.where()}: {use.name} is not defined in any TensorRT release checked ({', '.join(manifest.versions)})")
            continue
        if len(have) != len(manifest.versions):
            gate = gates.get(use.name)
            if gate is None:
                missing = [v for v in manifest.versions if v not in have]
                problems.append(f"{use.where()}: {use.name} is missing in TensorRT {', '.join(missing)}; declare a version gate in versions.GATES")
        for keyword in use.keywords:
            for version in have:
                known = manifest.keywords.get((version, use.name))
                if known is not None and keyword not in known:
                    problems.append(f"{use.where()}: {use.name}() has no argument '{keyword}' in TensorRT {version} (has {sorted(known)})")
                    break
    return problems


def plugin_sources() -> list[Path]:
    return sorted(p for p in Path(__file__).parent.glob("*.py") if p.name != "conformance.py")
