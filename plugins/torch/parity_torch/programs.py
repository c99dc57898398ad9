"""Reading PyTorch programs: ``torch.export`` archives (``.pt2`` from ``torch.export.save``) and TorchScript files
(``torch.jit.save``), with one-line errors for everything else, and what they say about their inputs and outputs.

Both are zip archives; their entries tell them apart without loading anything (``<name>/archive_format`` in a
torch.export archive, ``<name>/code/`` in TorchScript). A ``torch.save`` checkpoint (a state dict, a pickled
module) is neither: it holds weights or pickled code, not a program Parity can run, and is refused as such.
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from parity.api import SETTINGS, ModelError, TensorMeta, UsageError, check_model_path, counted, missing_dependency, one_line

EXPORT, TORCHSCRIPT = "torch.export", "TorchScript"
INSTALL = "pip install torch"


def import_torch() -> Any:
    """torch, or the one-line error naming the install command."""
    try:
        import torch
    except ImportError:
        raise missing_dependency("torch", INSTALL) from None
    return torch


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """torch's own chatter while loading and decomposing (deprecation warnings, torch.onnx's registry listing the
    torchvision ops it skips): Parity's lines are the user's, torch's logs return with -v."""
    if SETTINGS.get("verbose"):
        yield
        return
    loggers = [logging.getLogger(name) for name in ("torch", "torch.onnx", "torch.export", "torch._export")]
    levels = [lg.level for lg in loggers]
    try:
        for lg in loggers:
            lg.setLevel(logging.ERROR)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def program_kind(path: str | os.PathLike[str]) -> str:
    """:data:`EXPORT` or :data:`TORCHSCRIPT` from the archive's entries; a one-line error for anything else."""
    file = check_model_path(path)
    if file.stat().st_size == 0:
        raise ModelError(f"{file}: empty file, not a PyTorch program")
    try:
        with zipfile.ZipFile(file) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError) as exc:
        raise ModelError(f"{file}: not a PyTorch program (a .pt2 from torch.export.save or a TorchScript file): {one_line(str(exc), 120)}") from None
    entries = {name.split("/", 1)[1] if "/" in name else name for name in names}
    if any(e == "archive_format" or e.startswith("models/") for e in entries):
        return EXPORT
    if any(e.startswith("code/") for e in entries):
        return TORCHSCRIPT
    if any(e == "data.pkl" for e in entries):
        save = "torch.export.save(torch.export.export(model, args), 'model.pt2')"
        raise ModelError(f"{file}: a torch.save checkpoint (weights or a pickled module), not a program; save one with {save}")
    raise ModelError(f"{file}: a zip archive, but not a PyTorch program (a .pt2 from torch.export.save or a TorchScript file)")


_NUMPY = {
    "float32": "float32", "float16": "float16", "float64": "float64", "int64": "int64", "int32": "int32", "int16": "int16",
    "int8": "int8", "uint8": "uint8", "bool": "bool", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
}  # fmt: skip


def numpy_dtype(dtype: Any) -> Any:
    """The NumPy dtype of a torch dtype, None where NumPy has none (bfloat16, float8)."""
    import numpy as np

    name = str(dtype).removeprefix("torch.")
    return np.dtype(_NUMPY[name]) if name in _NUMPY else None


def _dim(size: Any) -> int | str:
    """A static dim as an int, a symbolic one (``s77``: a ``torch.SymInt``, whose int() is only the example's size)
    as its name: dynamic."""
    return size if isinstance(size, int) else str(size)


@dataclass
class Program:
    """A loaded program: what it is, its input and output names and metadata, and the object that runs it
    (an ``ExportedProgram`` or a ``torch.jit.ScriptModule``)."""

    path: str
    kind: str
    inputs: dict[str, TensorMeta]
    outputs: list[str]
    output_meta: dict[str, TensorMeta] = field(default_factory=dict)
    program: Any = None

    @property
    def exported(self) -> bool:
        return self.kind == EXPORT


def load_program(path: str | os.PathLike[str]) -> Program:
    """The program at ``path``, loaded on the CPU (the runner moves it), or a one-line error."""
    kind = program_kind(path)
    torch = import_torch()
    path = os.fspath(path)
    try:
        with quiet():
            if kind == EXPORT:
                return _exported(path, torch.export.load(path))
            return _scripted(path, torch.jit.load(path, map_location="cpu"))
    except (ModelError, UsageError):
        raise
    except Exception as exc:  # noqa: BLE001 - torch's loaders raise anything from a broken archive
        why = str(exc).replace("Please check the warnings above for possible errors.", "")  # those warnings are torch's, silenced
        raise ModelError(f"{path}: cannot load the {kind} program: {one_line(why, 200) or type(exc).__name__}") from None


def _meta(value: Any) -> TensorMeta | None:
    if value is None or not hasattr(value, "dtype") or not hasattr(value, "shape"):
        return None
    return TensorMeta(numpy_dtype(value.dtype), tuple(_dim(d) for d in value.shape))


def _exported(path: str, ep: Any) -> Program:
    signature = ep.graph_signature
    nodes = {node.name: node for node in ep.graph.nodes}
    inputs: dict[str, TensorMeta] = {}
    for name in signature.user_inputs:
        meta = _meta(nodes[name].meta.get("val")) if name in nodes else None
        if meta is None:
            raise ModelError(f"{path}: input '{name}' is not a tensor; the --torch runner feeds tensors only")
        inputs[name] = meta
    output_node = next(n for n in ep.graph.nodes if n.op == "output")
    values = [getattr(a, "meta", {}).get("val") for a in output_node.args[0]]
    specs = [s for s in signature.output_specs if str(s.kind).endswith("USER_OUTPUT")]
    outputs, output_meta = [], {}
    for spec, value in zip(specs, values[len(values) - len(specs) :]):
        name = getattr(spec.arg, "name", None)
        meta = _meta(value)
        if name and meta is not None:
            outputs.append(name)
            output_meta[name] = meta
    return Program(path, EXPORT, inputs, outputs, output_meta, ep)


def _scripted(path: str, module: Any) -> Program:
    try:
        arguments = list(module.forward.schema.arguments)[1:]  # self first
    except Exception as exc:  # noqa: BLE001 - a module without a scripted forward
        raise ModelError(f"{path}: the TorchScript module has no forward to run: {one_line(str(exc), 120)}") from None
    inputs = {arg.name: TensorMeta(None, None) for arg in arguments}  # TorchScript keeps no dtypes or shapes
    return Program(path, TORCHSCRIPT, inputs, [], {}, module)


def read_inputs(path: str) -> dict[str, TensorMeta]:
    """The model kind's ``read_inputs``: a program's inputs (torch.export: dtype and shape, symbolic dims named
    ``s0``...; TorchScript: names only)."""
    return load_program(path).inputs


def _tensors(meta: dict[str, TensorMeta]) -> list[str]:
    return [f"    {name} {m}" for name, m in meta.items()]


def describe(path: str, show: Any = (), options: Any = None) -> str:
    """``parity inspect model model.pt2``: the kind of program, its inputs and outputs, its size."""
    program = load_program(path)
    lines = [f"[I] {program.kind} program {path}"]
    lines += ["  inputs:", *(_tensors(program.inputs) or ["    (none)"])]
    if program.exported:
        ep = program.program
        lines += ["  outputs:", *(_tensors(program.output_meta) or ["    (none)"])]
        ops = sum(1 for n in ep.graph.nodes if n.op == "call_function")
        params = sum(int(t.numel()) for t in ep.state_dict.values())
        lines.append(f"  {counted(ops, 'fx node')}, {counted(len(ep.state_dict), 'parameter and buffer', 'parameters and buffers')} ({params:,} values)")
    else:
        lines.append("  outputs: named output_0, output_1, ... in the order forward returns them (dict outputs by their keys)")
    return "\n".join(lines)
