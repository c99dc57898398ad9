"""Typed stubs of one TensorRT version's Python API, generated from the name manifests in ``shared/trt-api/``.

``generate(version, manifests_dir, out_dir)`` writes ``out_dir/tensorrt/__init__.pyi`` (a stub-only package that a
type checker finds through ``MYPYPATH``). Run by hand: ``python plugins/trt/tests/stubs/generate.py 10.16.1.11 OUT``.
These stubs are a test artefact built from the manifests, not TensorRT and not NVIDIA's stubs.

What comes from where:

- ``tensorrt-V-members.txt``: every class (with ``bases:``), enum, enum member, module-level name, method,
  static/class method and property, and its kind: ``property_ro`` becomes a ``@property`` with no setter (so an
  assignment is a type error), ``property_rw`` a property with a setter, ``method`` a ``def`` (so reading a method
  as a value or calling a property are type errors). Enum values re-exported by pybind11 (``trt.float32``,
  ``trt.ILogger.WARNING``) are typed as their enum.
- ``tensorrt-V-signatures.txt``: parameters (names, annotations, defaults) and return types, one ``@overload`` per
  pybind11 overload, and property types. Arity follows the manifest exactly.
- Type annotations the manifest gives in C++ spelling (``nvinfer1::TensorLocation``) are mapped to the Python class
  of the same name when this version has one; anything else unresolvable (``detail::accessor<...>``, names that are
  not classes of this version) becomes ``Any``, as do members that have no signature line (Python-level additions
  such as ``__enter__``, write-only properties such as ``Builder.gpu_allocator``).

What the manifests do NOT say, and how it is handled:

- **Optional returns.** pybind11 reports ``-> ITimingCache`` for ``get_timing_cache`` although it returns ``None``
  when the C++ pointer is null. The manifests cannot tell which pointers can be null, so that is not inferred.
  ``OPTIONAL_RETURNS`` below lists the methods whose ``None`` return the binding sources (NVIDIA/TensorRT, tag
  v10.16) state, each with its citation; only those get ``X | None``. Every other pointer-returning method is typed
  as the manifest says, so a missing ``None`` check there is not caught.
- **Callback override signatures** (``IDebugListener.process_debug_tensor``, ``IOutputAllocator.reallocate_output``,
  ...): the manifest's argument types can come from documentation-only bindings (``addr: capsule`` where TensorRT
  passes an int; see the manifests' README). Overrides in Parity's subclasses are therefore not checked against
  them: the stubs type every method whose class is meant to be subclassed by Python (``OVERRIDABLE``) with
  ``*args: Any, **kwargs: Any``, so only calls on TensorRT's own objects are checked.
- **Conversions pybind11 performs that the manifests do not show**, each from the binding sources:
  a ``Dims`` (``Dims2/3/4``, ``DimsHW``) parameter also accepts a sequence of ints
  (``py::implicitly_convertible<std::vector<int64_t>, Dims>``, python/src/infer/pyFoundationalTypes.cpp@v10.16:255);
  a ``List[X]`` parameter (10.0-10.8 spelling) accepts any sequence, as pybind11's list caster does and as later
  manifests spell it (``collections.abc.Sequence``); ``IHostMemory`` has the buffer protocol
  (``py::buffer_protocol()``, python/src/infer/pyCore.cpp@v10.16:297), so ``bytes(mem)`` and ``np.frombuffer(mem)``
  type-check; a class with ``__getitem__(int)`` and ``__len__`` iterates (Python's sequence protocol), so ``Dims``
  gets an ``__iter__``.
- A required pybind11 parameter after defaulted ones (10.x ``add_scale_nd``'s ``channel_axis``) is written with a
  default; malformed manifest fragments (``bool]]`` in 10.0.1's ``SubGraphCollection``) are dropped.
- Exceptions, failure behaviour, and whether an int is a device pointer are not expressible here.
- ``tensorrt.plugin`` (10.7+) is typed ``Any``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # plugins/trt/tests: the shared manifest parser
from parity_trt.conformance import split_args  # noqa: E402
from trt_model.manifest import Manifest as _Model  # noqa: E402
from trt_model.manifest import parse_callable as _parse_callable  # noqa: E402

# (qualified method, citation). None is returned where the binding sources say so; applied in every version that has
# the method (the bindings of these methods are unchanged across the manifests' versions).
OPTIONAL_RETURNS: dict[str, str] = {
    "IBuilderConfig.get_timing_cache": "python/docstrings/infer/pyCoreDoc.h@v10.16:1832 'or None if no timing cache is set'",
    "IBuilderConfig.get_calibration_profile": "python/docstrings/infer/pyCoreDoc.h@v10.16:1741 'or None if calibrartion profile is unset'",
    "Builder.build_serialized_network": "python/src/infer/pyCore.cpp@v10.16:1923 binds IBuilder::buildSerializedNetwork (IHostMemory*, "
    "null when the build fails); pybind11 casts a null pointer to None",
    "Builder.build_engine_with_config": "python/src/infer/pyCore.cpp@v10.16:1945 binds IBuilder::buildEngineWithConfig (ICudaEngine*, null on failure)",
    "Runtime.deserialize_cuda_engine": "python/docstrings/infer/pyCoreDoc.h@v10.16:2014 'or None if it could not be deserialized'",
    "Runtime.load_runtime": "python/docstrings/infer/pyCoreDoc.h@v10.16:2051 'or None if it could not be loaded'",
    "IExecutionContext.get_output_allocator": "python/docstrings/infer/pyCoreDoc.h@v10.16:524 'or None if the provided name does not map to an output tensor'",
}

# Classes Python code subclasses to receive callbacks (their manifest signatures are not what TensorRT passes).
OVERRIDABLE = (
    "ILogger",
    "IDebugListener",
    "IOutputAllocator",
    "IProgressMonitor",
    "IAlgorithmSelector",
    "IInt8Calibrator",
    "IInt8EntropyCalibrator",
    "IInt8EntropyCalibrator2",
    "IInt8MinMaxCalibrator",
    "IInt8LegacyCalibrator",
    "IErrorRecorder",
    "IGpuAllocator",
    "IGpuAsyncAllocator",
    "IStreamReader",
    "IStreamReaderV2",
    "IStreamWriter",
    "IProfiler",
)

BUILTIN_TYPES = {"int", "str", "bool", "float", "bytes", "object", "list", "dict", "tuple", "set", "None", "slice", "type", "complex"}
TYPING_NAMES = ("List", "Tuple", "Dict", "Set", "Optional", "Union", "Callable", "Iterator", "Iterable", "Sequence", "Buffer")
KEYWORDS = {"in", "from", "lambda", "def", "class", "global", "is", "not", "and", "or", "import", "pass", "return", "None", "True", "False"}
QUALIFIED_OK = ("typing.", "collections.abc.", "typing_extensions.", "numpy.", "os.", "types.")


def _type(model: _Model, text: str, scope: str) -> str:
    """A manifest annotation as a stub annotation valid in ``scope`` (nested names are written fully qualified)."""
    text = text.strip()
    text = re.sub(r"\bnvinfer1::(?:v_\d+_\d+::)?(\w+)", r"\1", text)
    if "::" in text or "<" in text:
        return "Any"
    ok = True

    def fix(m: re.Match[str]) -> str:
        nonlocal ok
        word = m.group(0)
        if word == "None":
            return word
        if word in BUILTIN_TYPES:
            return f"builtins.{word}"  # trt.bool, trt.int32, ... (DataType values) shadow the builtins in the stub
        if word in TYPING_NAMES or word.startswith(QUALIFIED_OK) or word == "Any":
            return word
        if word in model.types:
            return word
        ok = False
        return word

    text = re.sub(r"[A-Za-z_][\w.]*", fix, text)
    return text if ok else "Any"


DIMS_TYPES = ("Dims", "Dims2", "Dims3", "Dims4", "DimsHW")
BUFFER_CLASSES = ("IHostMemory",)


def _param_type(model: _Model, text: str, scope: str) -> str:
    t = _type(model, text, scope)
    if t in DIMS_TYPES:
        return f"{t} | collections.abc.Sequence[typing.SupportsInt]"
    return re.sub(r"\bList\[", "collections.abc.Sequence[", t)


def _params(model: _Model, args: str, scope: str) -> str:
    out = []
    positional_only = 0
    seen_default = False
    for i, raw in enumerate(split_args(args)):
        if raw in ("*", "/") or raw.startswith("*"):
            out.append(raw if raw in ("*", "/") else f"{raw.split(':')[0]}: Any")
            continue
        name, _, rest = raw.partition(":")
        default = ""
        if "=" in (rest or name):
            if rest:
                rest, _, default = rest.partition("=")
            else:
                name, _, default = name.partition("=")
        name = name.strip()
        if not name.isidentifier():
            continue  # a fragment of a self annotation the manifest cut short (e.g. 'bool]]' in 10.0.1's SubGraphCollection)
        if name in KEYWORDS:
            name += "_"
        if re.fullmatch(r"arg\d+", name) and positional_only == i:
            positional_only = i + 1
        ann = f": {_param_type(model, rest, scope)}" if rest.strip() else ""
        # pybind11 allows a required parameter after defaulted ones (10.x add_scale_nd's channel_axis); Python does
        # not, so such a parameter is written with a default (its required-ness is not checked)
        seen_default = seen_default or bool(default)
        out.append(f"{name}{ann}{' = ...' if seen_default else ''}")
    if positional_only:
        out.insert(positional_only, "/")
    return ", ".join(out)


def _emit_scope(model: _Model, scope: str, indent: str, lines: list[str]) -> None:
    is_enum = model.kinds.get(scope, ("", ""))[0] == "enum"
    overridable = scope in OVERRIDABLE
    names = model.children(scope)
    body_start = len(lines)
    if scope and not is_enum:
        ctor = model.sigs.get(scope, [])
        if overridable:
            lines.append(f"{indent}def __init__(self, *args: Any, **kwargs: Any) -> None: ...")
        for sig in [] if overridable else ctor:
            params, _ = _parse_callable(sig)
            if len(ctor) > 1:
                lines.append(f"{indent}@overload")
            lines.append(f"{indent}def __init__(self{', ' if params else ''}{_params(model, params, scope)}) -> None: ...")
    if scope in BUFFER_CLASSES:
        lines.append(f"{indent}def __buffer__(self, flags: builtins.int, /) -> memoryview: ...")
    item = next((sig for sig in model.sigs.get(f"{scope}.__getitem__", []) if "SupportsInt" in sig or "int" in sig.split(")")[0]), None)
    if item and f"{scope}.__len__" in model.sigs:
        lines.append(f"{indent}def __iter__(self) -> Iterator[{_type(model, _parse_callable(item)[1] or 'Any', scope)}]: ...")
    if is_enum:
        lines.append(f"{indent}def __init__(self, value: SupportsInt) -> None: ...")
        lines.append(f"{indent}def __int__(self) -> builtins.int: ...")
        lines.append(f"{indent}def __index__(self) -> builtins.int: ...")
        lines.append(f"{indent}def __hash__(self) -> builtins.int: ...")
    for qual in names:
        kind, note = model.kinds[qual]
        short = qual.rsplit(".", 1)[-1]
        if "inherited from" in note:
            continue  # the base class declares it
        if kind in ("class", "enum"):
            bases = note.removeprefix("bases: ").split(", ") if note.startswith("bases:") else []
            bases = [b for b in bases if b in model.types]
            lines.append(f"{indent}class {short}{'(' + ', '.join(bases) + ')' if bases else ''}:")
            _emit_scope(model, qual, indent + "    ", lines)
        elif kind == "enum_member":
            lines.append(f"{indent}{short}: ClassVar[{scope.rsplit('.', 1)[-1] if '.' not in scope else scope}]")
        elif kind.startswith("enum_value:"):
            enum = kind.split(":", 1)[1]
            lines.append(f"{indent}{short}: {'ClassVar[' + enum + ']' if scope else enum}")
        elif kind == "alias":
            lines.append(f"{indent}{short} = {note.removeprefix('same object as ').strip()}")
        elif kind in ("property_ro", "property_rw"):
            sig = model.sigs.get(qual, [])
            ann = "Any"
            if sig:
                ann = _type(model, sig[0].lstrip(":").rsplit("[", 1)[0].strip(), scope) if sig[0].startswith(":") else "Any"
            if short in ("name", "value") and is_enum:
                ann = "builtins.str" if short == "name" else "builtins.int"
            lines.append(f"{indent}@property")
            lines.append(f"{indent}def {short}(self) -> {ann}: ...")
            if kind == "property_rw":
                lines.append(f"{indent}@{short}.setter")
                lines.append(f"{indent}def {short}(self, value: {ann}) -> None: ...")
        elif kind in ("method", "staticmethod", "classmethod", "function", "callback_doc"):
            sigs = [s for s in model.sigs.get(qual, []) if s.startswith("(")]
            decorator = {"staticmethod": "@staticmethod", "classmethod": "@classmethod"}.get(kind)
            self_arg = [] if (not scope or kind == "staticmethod") else (["cls"] if kind == "classmethod" else ["self"])
            if kind == "callback_doc" or overridable or not sigs:
                args = ", ".join([*self_arg, "*args: Any", "**kwargs: Any"])
                if decorator:
                    lines.append(f"{indent}{decorator}")
                lines.append(f"{indent}def {short}({args}) -> Any: ...")
                continue
            for sig in sigs:
                params, ret = _parse_callable(sig)
                ret_t = _type(model, ret, scope) if ret else "Any"
                if qual in OPTIONAL_RETURNS and ret_t not in ("Any", "None"):
                    ret_t = f"{ret_t} | None"
                if len(sigs) > 1:
                    lines.append(f"{indent}@overload")
                if decorator:
                    lines.append(f"{indent}{decorator}")
                args = ", ".join([*self_arg, *([_params(model, params, scope)] if params.strip() else [])])
                lines.append(f"{indent}def {short}({args}) -> {ret_t}: ...")
        elif kind == "module":
            lines.append(f"{indent}{short}: Any")
        elif kind.startswith(("attribute:", "value:")):
            lines.append(f"{indent}{short}: {kind.split(':', 1)[1] if kind.startswith('attribute:') else 'Any'}")
        else:
            lines.append(f"{indent}{short}: Any")
    if scope and len(lines) == body_start:
        lines.append(f"{indent}...")


def render(version: str, manifests: Path) -> str:
    model = _Model(version, manifests)
    lines = [
        f"# Generated by plugins/trt/tests/stubs/generate.py from shared/trt-api/tensorrt-{version}-*.txt. Do not edit.",
        "# A model of TensorRT's Python API names and signatures for type checking; not TensorRT.",
        "import builtins",
        "import collections.abc",
        "import os",
        "import types",
        "import typing",
        "import numpy",
        "import typing_extensions",
        "from typing import Any, Callable, ClassVar, Dict, Iterable, Iterator, List, Optional, Sequence, Set, SupportsInt, Tuple, Union, overload",
        "from typing_extensions import Buffer",
        "",
    ]
    _emit_scope(model, "", "", lines)
    return "\n".join(lines) + "\n"


def generate(version: str, manifests: Path, out_dir: Path) -> Path:
    """Writes ``out_dir/tensorrt/__init__.pyi`` for ``version``; returns ``out_dir``."""
    pkg = Path(out_dir) / "tensorrt"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.pyi").write_text(render(version, Path(manifests)))
    return Path(out_dir)


if __name__ == "__main__":
    root = Path(__file__).resolve().parents[4]
    generate(sys.argv[1], root.parent / "shared" / "trt-api", Path(sys.argv[2]))
