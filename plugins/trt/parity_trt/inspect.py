"""Describing engines: I/O tensors, memory, profiles, and layers through the engine inspector."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from parity.api import TensorMeta
from parity_trt import versions
from parity_trt._trt import import_trt


def engine_io(engine: Any) -> list[tuple[str, str, str, tuple[int, ...]]]:
    """``[(name, 'input'|'output', dtype name, shape)]`` in binding order."""
    trt = import_trt()
    rows = []
    for index in range(engine.num_io_tensors):
        name = engine.get_tensor_name(index)
        mode = "input" if engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT else "output"
        rows.append((name, mode, str(engine.get_tensor_dtype(name).name), tuple(engine.get_tensor_shape(name))))
    return rows


def engine_inputs(engine: Any) -> dict[str, TensorMeta]:
    from parity_trt.runner import DTYPES

    meta = {}
    for name, mode, dtype, shape in engine_io(engine):
        if mode == "input":
            np_dtype = DTYPES.get(dtype)
            meta[name] = TensorMeta(None if np_dtype is None else np.dtype(np_dtype), tuple(None if d < 0 else d for d in shape))
    return meta


def device_memory(engine: Any) -> int:
    trt = import_trt()
    if versions.has(trt, "ICudaEngine.device_memory_size_v2"):
        return int(engine.device_memory_size_v2)
    return int(engine.device_memory_size)


def layer_information(engine: Any) -> list[dict[str, Any]]:
    """Per-layer records from ``EngineInspector`` (JSON format; names only unless built with detailed verbosity)."""
    trt = import_trt()
    inspector = engine.create_engine_inspector()
    info = json.loads(inspector.get_engine_information(trt.LayerInformationFormat.JSON))
    layers = info.get("Layers", []) if isinstance(info, dict) else []
    return [item if isinstance(item, dict) else {"Name": str(item)} for item in layers]


def describe_engine(engine: Any, show: Iterable[str] = (), stats: Mapping[str, str] | None = None) -> str:
    """``stats``: text per tensor name (``--combine-tensor-info``), shown beside the layers' inputs and outputs."""
    show = set(show)
    lines = [f"TensorRT engine {engine.name or '(unnamed)'}"]
    io = engine_io(engine)
    for mode in ("input", "output"):
        rows = [r for r in io if r[1] == mode]
        lines.append(f"  {len(rows)} {mode}(s)")
        for name, _, dtype, shape in rows:
            lines.append(f"    {name}: {dtype.lower()}[{','.join('?' if d < 0 else str(d) for d in shape)}]")
    lines.append(f"  device memory: {device_memory(engine)} bytes")
    lines.append(f"  {engine.num_optimization_profiles} optimization profile(s)")
    for index in range(engine.num_optimization_profiles):
        for name, mode, _, shape in io:
            if mode == "input" and -1 in shape:
                lo, mid, hi = (list(s) for s in engine.get_tensor_profile_shape(name, index))
                lines.append(f"    profile {index}: {name} min={lo} opt={mid} max={hi}")
    layers = layer_information(engine)
    lines.append(f"  {len(layers)} layer(s)")
    if "layers" in show:
        for record in layers:
            kind = record.get("LayerType", "")
            tactic = record.get("TacticName", "")
            ins = ", ".join(_tensor(t, stats or {}) for t in record.get("Inputs", []))
            outs = ", ".join(_tensor(t, stats or {}) for t in record.get("Outputs", []))
            extra = f" [{kind}]" if kind else ""
            extra += f" tactic={tactic}" if tactic and "attrs" in show else ""
            lines.append(f"    {record.get('Name', '?')}{extra}: ({ins}) -> ({outs})")
    return "\n".join(lines)


def _tensor(record: Any, stats: Mapping[str, str]) -> str:
    name = str(record.get("Name", record)) if isinstance(record, dict) else str(record)
    return f"{name} [{stats[name]}]" if name in stats else name


def tensor_statistics(path: str) -> dict[str, str]:
    """``--combine-tensor-info FILE``: ``min=.., max=.., avg=..`` per tensor of saved outputs (``parity run --trt
    --mark-unfused-tensors-as-debug-tensors --save-outputs FILE``), as Polygraphy reads them: the first runner's
    first iteration."""
    from parity.api import load_results  # here, not at the top: only --combine-tensor-info reads saved outputs

    results = load_results(path)
    for _runner, iterations in results:
        if not iterations:
            continue
        stats = {}
        for name, array in iterations[0].items():
            values = np.asarray(array, dtype=np.float64)
            if values.size:
                stats[name] = f"min={values.min():.2f}, max={values.max():.2f}, avg={values.mean():.2f}"
        return stats
    return {}


def describe_network(network: Any, show: Iterable[str] = ()) -> str:
    """Text for a TensorRT network (``--trt-network-func`` scripts)."""
    show = set(show)
    lines = [f"TensorRT network {network.name or '(unnamed)'}"]
    for label, count, get in (("input", network.num_inputs, network.get_input), ("output", network.num_outputs, network.get_output)):
        lines.append(f"  {count} {label}(s)")
        for index in range(count):
            tensor = get(index)
            lines.append(f"    {tensor.name}: {str(tensor.dtype.name).lower()}{list(tuple(tensor.shape))}")
    lines.append(f"  {network.num_layers} layer(s)")
    if "layers" in show:
        for index in range(network.num_layers):
            layer = network.get_layer(index)
            outs = ", ".join(layer.get_output(i).name for i in range(layer.num_outputs))
            lines.append(f"    {layer.name} [{str(layer.type.name)}] -> ({outs})")
    return "\n".join(lines)


# ---- model-kind callbacks (paths) --------------------------------------------------------------------------
def read_engine_inputs(path: str) -> dict[str, TensorMeta]:
    from parity_trt.engine import EngineFromPath

    return engine_inputs(EngineFromPath(path)())


def describe_engine_file(path: str, show: Iterable[str] = (), options: Mapping[str, Any] | None = None, layout: str = "parity") -> str:
    """``options``: ``inspect model``'s (``--load-runtime``, ``--dla-workspace-allocation-strategy``,
    ``--combine-tensor-info``); ``layout``: ``parity`` or ``polygraphy`` (``--format``)."""
    from parity.api import UsageError  # here, not at the top: as the imports below, only an engine's description needs it
    from parity_trt.engine import EngineFromPath
    from parity_trt.factory import runtime_kwargs

    options = options or {}
    combine = options.get("combine_tensor_info")
    if combine and "layers" not in set(show):
        raise UsageError("--combine-tensor-info adds tensor statistics to the layers: give --show layers too")
    stats = tensor_statistics(combine) if combine else None
    engine = EngineFromPath(path, **runtime_kwargs(options))()
    return engine_polygraphy_text(engine, show, path, stats) if layout == "polygraphy" else describe_engine(engine, show, stats)


def _script_network(path: str) -> Any:
    from parity_trt.network import NetworkFromScript, unpack

    return unpack(NetworkFromScript(path)())[1]


def read_script_inputs(path: str) -> dict[str, TensorMeta]:
    """Inputs of the network a script's ``load_network`` builds (``file.py:func`` picks another function)."""
    from parity_trt.runner import DTYPES

    meta = {}
    network = _script_network(path)
    for index in range(network.num_inputs):
        tensor = network.get_input(index)
        np_dtype = DTYPES.get(str(tensor.dtype.name))
        meta[tensor.name] = TensorMeta(None if np_dtype is None else np.dtype(np_dtype), tuple(None if d < 0 else d for d in tensor.shape))
    return meta


def describe_script(path: str, show: Iterable[str] = (), options: Mapping[str, Any] | None = None) -> str:
    """The network a script builds, with ``inspect model``'s network ``options`` applied (``--layer-precisions``...)."""
    if not options:
        return describe_network(_script_network(path), show)
    from parity_trt.factory import network_loader
    from parity_trt.network import unpack

    return describe_network(unpack(network_loader(path, options)())[1], show)


def describe_onnx_as_network(path: str, show: Iterable[str] = (), options: Mapping[str, Any] | None = None) -> str:
    """An ONNX model as TensorRT's ONNX parser reads it (``inspect model --display-as trt``), with ``inspect model``'s
    network ``options`` applied (parser flags, plugins, layer precisions, I/O types and formats, ...)."""
    from parity_trt.factory import network_loader
    from parity_trt.network import unpack

    return describe_network(unpack(network_loader(path, dict(options or {}))())[1], show)


# ---- Polygraphy 0.53.6's layout (inspect model ENGINE --format polygraphy) --------------------------------------------
# TensorRT data types by Polygraphy's names; the inspector's format strings are matched by substring, most specific first
_TRT_DTYPES = {"FLOAT": "float32", "HALF": "float16", "BF16": "bfloat16", "FP8": "float8e4m3fn", "INT8": "int8", "INT32": "int32",
               "INT64": "int64", "BOOL": "bool", "UINT8": "uint8", "INT4": "int4", "FP4": "float4"}
_FORMAT_DTYPES = {"BFLOAT16": "bfloat16", "FLOAT8E4M3": "float8e4m3fn", "FLOAT8E5M2": "float8e5m2", "FLOAT4": "float4", "FLOAT": "float32",
                  "HALF": "float16", "FP32": "float32", "FP16": "float16", "INT64": "int64", "INT32": "int32", "INT16": "int16",
                  "INT8": "int8", "INT4": "int4", "UINT8": "uint8", "BOOL": "bool"}
_TAB = "    "


def _message(severity: str, text: str) -> str:
    return f"[{severity}] " + "\n    ".join(str(text).splitlines() or [""])


def _entry(name: str, dtype: str | None, shape: Any, doc: str = "") -> str:
    items = [f"dtype={dtype}"] if dtype else []
    items += [f"shape={tuple(shape)}"] if shape is not None else []
    items += [doc] if doc else []
    return f"{name} [{', '.join(items)}]" if items else name


def _braces(entries: list[str]) -> str:
    return "{" + ",\n ".join(entries) + "}"


def _indent(block: str, level: int = 1) -> str:
    tab = _TAB * level
    return tab + f"\n{tab}".join(block.splitlines())


def _layer_tensors(record: dict[str, Any], key: str, stats: Mapping[str, str]) -> list[str]:
    entries = []
    for elem in record.get(key) or []:
        fmt = elem.get("Format/Datatype") or " ".join(elem[k] for k in ("Datatype", "Format") if elem.get(k))
        dtype = next((v for k, v in _FORMAT_DTYPES.items() if k in fmt.upper()), None)
        doc = (f"Format: {fmt}" if fmt and "N/A" not in fmt else "") + (f", {stats[elem['Name']]}" if elem.get("Name") in stats else "")
        entries.append(_entry(elem.get("Name", "?"), dtype, elem.get("Dimensions"), doc))
    return entries


def engine_polygraphy_text(engine: Any, show: Iterable[str], path: str, stats: Mapping[str, str] | None = None) -> str:
    """Polygraphy's ``inspect model ENGINE`` text: ``==== TensorRT Engine ====`` with the engine's I/O, memory,
    profiles and (``--show layers [attrs]``) the inspector's layers, for scripts that parse it."""
    trt = import_trt()
    show, stats = set(show), stats or {}
    context = engine.create_execution_context()
    messages = [_message("I", f"Loading bytes from {path}")]
    io = engine_io(engine)
    try:
        refit = "Refittable " if engine.refittable else ""
    except (AttributeError, NotImplementedError):  # a TensorRT (or model of it) without the property: not refittable
        refit = ""
    out = f"Name: {engine.name} | {refit}Explicit Batch Engine\n\n"
    for mode, label in (("input", "Input"), ("output", "Output")):
        rows = [_entry(name, _TRT_DTYPES.get(dtype, dtype.lower()), shape) for name, m, dtype, shape in io if m == mode]
        out += f"---- {len(rows)} Engine {label}(s) ----\n{_braces(rows)}\n\n"
    out += f"---- Memory ----\nDevice Memory: {device_memory(engine)} bytes\n\n"
    profiles = engine.num_optimization_profiles
    out += f"---- {profiles} Profile(s) ({len(io)} Tensor(s) Each) ----\n"
    width = max((len(name) for name, *_ in io), default=0) + 8
    for index in range(profiles):
        out += f"- Profile: {index}\n"
        for position, (name, mode, _, shape) in enumerate(io):
            line = f"Tensor: {name:<{width}} {' (Input)' if mode == 'input' else '(Output)'}, Index: {position}"
            if mode == "input":
                low, mid, high = (tuple(s) for s in engine.get_tensor_profile_shape(name, index))
                out += _indent(line) + f" | Shapes: min={low}, opt={mid}, max={high}\n"
            else:
                out += _indent(line) + f" | Shape: {tuple(shape)}\n"
        out += "\n"
    per_profile = engine.num_layers // max(profiles, 1)  # TensorRT 10+ lists a layer once, for every profile
    out += f"---- {per_profile} Layer(s) ----\n"
    if "layers" in show:
        inspector = engine.create_engine_inspector()
        inspector.execution_context = context
        try:
            verbosity = engine.profiling_verbosity
        except (AttributeError, NotImplementedError):  # not told: the records say whether they are detailed
            verbosity = None
        detailed = verbosity == trt.ProfilingVerbosity.DETAILED
        if verbosity is not None and not detailed:
            messages.append(_message("W", f"Engine profiling verbosity: {engine.profiling_verbosity}. Some layer info may be missing. "
                                          "Set higher verbosity for more detail."))
        for index in range(per_profile):
            record = json.loads(inspector.get_layer_information(index, trt.LayerInformationFormat.JSON))
            record = record if isinstance(record, dict) else {"Name": record}
            if detailed or (verbosity is None and "LayerType" in record):
                name, op = record.get("Name", "Unknown"), record.get("LayerType", "Unknown")
                origin, tactic = record.get("Origin", "Unknown"), record.get("TacticValue", record.get("TacticName", "Unknown"))
                ins, outs = _layer_tensors(record, "Inputs", stats), _layer_tensors(record, "Outputs", stats)
            else:
                name, op, origin, tactic, ins, outs = str(record), "Unknown", "Unknown", "Unknown", [], []
            both = bool(ins and outs)
            text = f"Layer {index:<4} | {name} [Op: {op}]\n{_indent(_braces(ins))}" + ("\n" if both else "")
            arrow = f" -> {_indent(_braces(outs), int(both)).strip()}"
            text += (_indent(arrow) if both else arrow) + "\n"
            if "attrs" in show:
                text += "\n".join(_indent(line) for line in ("---- Attributes ----", f"Origin = {origin}", f"Tactic = {tactic}")) + "\n"
            out += text + "\n"
    messages.append(_message("I", f"==== TensorRT Engine ====\n{out.strip()}"))
    return "\n".join(messages)
