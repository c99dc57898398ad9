"""Reading the TensorRT API manifests in ``shared/trt-api/`` (one parser for the typed stubs and the behavioural model).

``Manifest(version, dir)`` has ``kinds`` (qualified name -> (kind, note), from ``tensorrt-V-members.txt``), ``sigs``
(qualified name -> the text after the name of each line of ``tensorrt-V-signatures.txt``, one per pybind11 overload),
``types`` (classes and enums) and ``children(scope)``. ``parse_callable`` splits a signature line (arguments: ``parity_trt.conformance.split_args``).
"""

from __future__ import annotations

import functools
import os
import re
from collections import defaultdict
from pathlib import Path

from parity_trt.conformance import split_args

# shared/trt-api beside the checkout (as CI has it); PARITY_TRT_API_DIR elsewhere (a GPU machine given a copy)
MANIFESTS = Path(os.environ.get("PARITY_TRT_API_DIR") or Path(__file__).resolve().parents[4].parent / "shared" / "trt-api")


def versions(manifests: Path = MANIFESTS) -> list[str]:
    return sorted(p.name[len("tensorrt-") : -len("-members.txt")] for p in manifests.glob("tensorrt-*-members.txt"))


def read_lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


class Manifest:
    def __init__(self, version: str, manifests: Path = MANIFESTS):
        self.version = version
        self.kinds: dict[str, tuple[str, str]] = {}
        for line in read_lines(manifests / f"tensorrt-{version}-members.txt"):
            name, kind, *note = line.split("\t")
            self.kinds[name] = (kind, note[0] if note else "")
        self.sigs: dict[str, list[str]] = defaultdict(list)
        for line in read_lines(manifests / f"tensorrt-{version}-signatures.txt"):
            m = re.match(r"([A-Za-z_][\w.]*)(?=[(:])", line)
            if m:
                self.sigs[m.group(1)].append(line[m.end() :])
        self.types = {n for n, (k, _) in self.kinds.items() if k in ("class", "enum") and not n.startswith("plugin.")}
        self._children: dict[str, list[str]] | None = None

    def children(self, scope: str) -> list[str]:
        """The names one level below ``scope`` (``""``: the module), sorted; ``plugin.*`` left out."""
        if self._children is None:  # indexed once: the behavioural model asks for thousands of scopes
            index: dict[str, list[str]] = defaultdict(list)
            for name in self.kinds:
                if not name.startswith("plugin."):
                    index[name.rpartition(".")[0]].append(name)
            self._children = {parent: sorted(names) for parent, names in index.items()}
        return list(self._children.get(scope, ()))


def parse_callable(sig: str) -> tuple[str, str | None]:
    """``'(a: int, b: X = 0) -> R'`` -> (``'a: int, b: X = 0'``, ``'R'`` or None)."""
    depth = 0
    for i, ch in enumerate(sig):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                rest = sig[i + 1 :].strip()
                return sig[1:i], (rest[2:].strip() if rest.startswith("->") else None)
    return "", None


def parameters(args: str) -> list[tuple[str, str, bool]]:
    """``'a: int, b: X = 0'`` -> ``[('a', 'int', False), ('b', 'X', True)]``; ``*args``/``**kwargs`` keep their stars."""
    out = []
    for raw in split_args(args):
        name, _, rest = raw.partition(":")
        default = "=" in raw
        out.append((name.split("=")[0].strip(), rest.split("=")[0].strip(), default))
    return out


@functools.cache
def load(version: str) -> Manifest:
    """The parsed manifest of ``version``, read once per process (treat it as read-only: every model shares it)."""
    return Manifest(version)


@functools.cache
def signature_parameters(sig: str) -> tuple[tuple[str, str, bool], ...]:
    """:func:`parameters` of a signature line's arguments (``'(a: int) -> R'``), parsed once per distinct line."""
    return tuple(parameters(parse_callable(sig)[0]))
