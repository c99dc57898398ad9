"""What torch.onnx's exporter records about each ONNX node, read without torch: which fx node of the decomposed
program the node computes and which PyTorch module that node ran in.

torch.onnx.export(..., dynamo=True) names each value after the fx node whose translation computes it (values
inside a translation are ``val_N``) and keeps, in every node's ``metadata_props``:

* ``pkg.torch.onnx.fx_node``: the fx node as ``torch.fx.Node.format_node`` prints it
  (``%conv2d_2 : [num_users=1] = call_function[target=torch.ops.aten.conv2d.default](args = ...)``);
* ``pkg.torch.onnx.name_scopes``: the module path as a list, ``['', 'layer1', 'layer1.0', 'layer1.0.conv2', 'conv2d_2']``
  (the root's empty name first, the fx node's name last);
* ``pkg.torch.onnx.class_hierarchy``: the classes along that path, the op last.

Matching (:func:`match_values`) trusts names only where the metadata vouches for them: an ONNX value ``v`` is the
fx node ``v``'s value when the node producing ``v`` records fx node ``v`` with the same target, or records the
node that ``v`` reads an item of (``getitem``: a fused BatchNormalization's output, a ``torch.cond``'s). Anything
else has no counterpart; nothing is matched by position or by shape.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

FX_NODE = "pkg.torch.onnx.fx_node"
NAME_SCOPES = "pkg.torch.onnx.name_scopes"
CLASS_HIERARCHY = "pkg.torch.onnx.class_hierarchy"


class FxNode(NamedTuple):
    """What matching needs of one fx node: its target as ``format_node`` prints it, and for a ``getitem`` the
    node it reads from."""

    target: str
    item_of: str | None = None


def recorded_node(text: str) -> tuple[str, str] | None:
    """``(fx node name, target)`` from a ``pkg.torch.onnx.fx_node`` text, or None when it is not one."""
    if not text.startswith("%") or " : " not in text:
        return None
    name = text[1 : text.index(" : ")]
    start = text.find("[target=")
    end = text.find("](", start)
    if start < 0 or end < 0:
        return None
    return name, text[start + len("[target=") : end]


def target_of(formatted: str) -> str | None:
    """The target of an fx node from its ``format_node()`` text (the same printer the exporter used)."""
    found = recorded_node(formatted)
    return found[1] if found else None


def match_values(nodes: Iterable[tuple[Sequence[str], Mapping[str, str]]], program: Mapping[str, FxNode]) -> dict[str, str]:
    """``{ONNX value: fx node name}`` for the values of ``nodes`` (each ``(outputs, metadata_props)``) that are the
    value of a node of ``program`` (``{fx node name: FxNode}``), by the rule in the module's docstring."""
    matched: dict[str, str] = {}
    for outputs, metadata in nodes:
        recorded = recorded_node(metadata.get(FX_NODE, ""))
        if recorded is None:
            continue
        source, target = recorded
        for value in outputs:
            node = program.get(value)
            if node is None:
                continue
            if (value == source and node.target == target) or (node.item_of == source and source in program and program[source].target == target):
                matched[value] = value
    return matched


def has_torch_metadata(nodes: Iterable[tuple[Sequence[str], Mapping[str, str]]]) -> bool:
    return any(FX_NODE in metadata for _, metadata in nodes)


def _listed(text: str | None) -> list[str]:
    try:
        value = ast.literal_eval(text) if text else []
    except (ValueError, SyntaxError):
        return []
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else []


def module_of(metadata: Mapping[str, str]) -> tuple[str, str] | None:
    """``(module path, class name)`` of the PyTorch module a node's fx node ran in (``("layer1.0.conv2",
    "Conv2d")``; the root module's path is ``""``), or None without the exporter's metadata."""
    scopes = _listed(metadata.get(NAME_SCOPES))
    if not scopes:
        return None
    classes = _listed(metadata.get(CLASS_HIERARCHY))
    modules = scopes[:-1]  # the last scope is the fx node itself
    path = modules[-1] if modules else ""
    cls = classes[len(modules) - 1] if 0 < len(modules) <= len(classes) else ""
    return path, cls.rpartition(".")[2]


def describe(metadata: Mapping[str, str]) -> str | None:
    """The origin line of a node: ``PyTorch module 'layer1.0.conv2' (Conv2d)``, ``PyTorch root module (Net)``."""
    found = module_of(metadata)
    if found is None:
        return None
    path, cls = found
    kind = f" ({cls})" if cls else ""
    return f"PyTorch module '{path}'{kind}" if path else f"PyTorch root module{kind}"


def node_origins(nodes: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """The hook ``parity_node_origins``: ``{node name: origin}`` of the nodes torch.onnx's exporter described."""
    found = {}
    for name, metadata in nodes.items():
        text = describe(metadata)
        if text:
            found[name] = text
    return found
