"""A model of TensorRT's documented Python API behaviour, for tests. This is NOT TensorRT.

``make(version)`` returns a module named ``tensorrt`` holding exactly the names of that version's manifests
(``shared/trt-api/tensorrt-<version>-{members,enums}.txt``: top-level names, classes with their bases and members,
enums and their members), so code that reaches for a name another version lacks fails here as it would there.

- Every method and constructor checks its call against ``tensorrt-<version>-signatures.txt`` as pybind11 does: a
  call no overload accepts (wrong number of arguments, an unknown keyword, a missing required one, or an argument
  pybind11's caster refuses: not ``str``/``bytes`` for a string, ``str``/``float`` for an ``int``, ``str`` for a
  ``float``, a non-sequence or non-int items for ``Dims``/``List[int]``, an ``int`` for an enum, another class for
  a class parameter) raises ``TypeError``. A class with no
  constructor line raises ``TypeError`` when Python calls it (pybind11's "No constructor defined!").
- What TensorRT DOES is modelled only where a test needs it, in ``behaviour.py``, each behaviour with its citation
  (file, tag, line in NVIDIA/TensorRT). Every other method raises ``NotImplementedError("not modelled: ...")``;
  an unmodelled read-only property raises it when read, a read-write one when read before it was set. Dunder
  members the manifests list but no test models are left to Python's defaults.
- ``__enter__``/``__exit__`` the manifests mark python-level are tensorrt_bindings/__init__.py's ``common_enter`` (a
  DeprecationWarning, returns the object) and ``common_exit`` (does nothing), as in every modelled version.
- Enum members are instances of their enum (``name``, ``value``, ``int()``); values are the manifest's order
  except where ``behaviour.ENUM_VALUES`` gives TensorRT's.
- State the model keeps for tests to inspect is in attributes starting with ``_`` (never a TensorRT name).
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any

from trt_model import behaviour
from trt_model.manifest import MANIFESTS, Manifest, load, read_lines, signature_parameters, versions

__all__ = ["MANIFESTS", "make", "versions"]


class EnumMember:
    """A pybind11 enum value: an instance of its enum class (``isinstance(trt.DataType.FLOAT, trt.DataType)``)."""

    def __init__(self, name: str, value: int) -> None:
        self._name, self._value = name, value

    name = property(lambda self: self._name)
    value = property(lambda self: self._value)

    def __int__(self) -> int:
        return self._value

    __index__ = __int__

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._value == self._value  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__qualname__, self._value))

    def __repr__(self) -> str:
        return f"<{type(self).__qualname__}.{self._name}: {self._value}>"

    def __str__(self) -> str:  # pybind11 enums: str(trt.DataType.FLOAT) == "DataType.FLOAT"
        return f"{type(self).__qualname__}.{self._name}"


_INT = ("int", "typing.SupportsInt")
_FLOAT = ("float", "typing.SupportsFloat")
_INT_SEQUENCES = ("Dims", "List[int]", "collections.abc.Sequence[typing.SupportsInt]")


def _is_int(value: Any) -> bool:  # pybind11's int caster refuses float and str, takes objects with __index__
    return not isinstance(value, (float, str, bytes)) and hasattr(value, "__index__")


def _kind_ok(annotation: str, value: Any, resolve: Callable[[str], Any]) -> bool:
    """Whether pybind11's caster for ``annotation`` (a signature manifest's type text) would take ``value``."""
    if annotation == "str":  # std::string casts from str and bytes
        return isinstance(value, (str, bytes))
    if annotation in _INT:
        return _is_int(value)
    if annotation in _FLOAT:  # the float caster takes anything with __float__ or __index__, not str
        return not isinstance(value, (str, bytes)) and (hasattr(value, "__float__") or hasattr(value, "__index__"))
    if annotation in _INT_SEQUENCES:  # Dims and vectors of ints: a sequence of ints (or a Dims)
        if type(value).__name__ == "Dims":
            return True
        sequence = hasattr(value, "__len__") and hasattr(value, "__getitem__") and not isinstance(value, (str, bytes))
        return sequence and all(_is_int(v) for v in value)
    cls = resolve(annotation.rsplit("::", 1)[-1])  # nvinfer1::TensorFormat -> TensorFormat
    if isinstance(cls, type):
        if issubclass(cls, EnumMember):  # pybind11 enums do not convert from int
            return isinstance(value, cls)
        implicit = behaviour.IMPLICIT.get(cls.__qualname__)  # py::implicitly_convertible<From, cls>
        if implicit is not None and not isinstance(value, cls) and implicit(value):
            return True
        return value is None or isinstance(value, cls)  # pointers take None (references check it in the binding)
    return True


def _accepts(params: list[tuple[str, str, bool]], args: tuple, kwargs: dict, resolve: Callable[[str], Any]) -> bool:
    if any(name.startswith("*") for name, _, _ in params):
        return True
    if len(args) > len(params):
        return False
    bound = dict(zip((p[0] for p in params), args))
    for key, value in kwargs.items():
        names = [p[0] for p in params[len(args) :] if not p[0].startswith("arg")]  # argN: positional only
        if key not in names:
            return False
        bound[key] = value
    return all(name in bound or default for name, _, default in params) and all(
        _kind_ok(ann, bound[name], resolve) for name, ann, _ in params if name in bound
    )


def _checked(qual: str, sigs: list[str], impl: Callable, bound: bool = True,
             resolve: Callable[[str], Any] = lambda name: None) -> Callable:
    """``impl`` behind pybind11's overload resolution for ``qual`` (TypeError when no overload takes the call);
    ``resolve`` gives the model class a parameter's type names, for the argument checks."""
    overloads = [signature_parameters(s) for s in sigs if s.startswith("(")]

    def call(*args: Any, **kwargs: Any) -> Any:
        given = args[1:] if bound else args
        if overloads and not any(_accepts(o, given, kwargs, resolve) for o in overloads):
            supported = "\n".join(f"    {i + 1}. {qual.rsplit('.', 1)[-1]}{s}" for i, s in enumerate(sigs))
            raise TypeError(f"{qual}(): incompatible function arguments. The following argument types are supported:\n"
                            f"{supported}\n\nInvoked with: {', '.join(map(repr, given))}")
        return impl(*args, **kwargs)

    call.__name__ = qual.rsplit(".", 1)[-1]
    call.__qualname__ = qual
    return call


def _not_modelled(qual: str) -> Callable:
    def call(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"not modelled: {qual}")

    return call


def _property(qual: str, kind: str, impl: Any) -> property:
    short = qual.rsplit(".", 1)[-1]
    if isinstance(impl, property):
        return property(impl.fget, impl.fset if kind == "property_rw" else None)
    slot = f"_set_{short}"

    def get(self: Any) -> Any:
        if slot in self.__dict__:
            return self.__dict__[slot]
        raise NotImplementedError(f"not modelled: {qual}")

    def put(self: Any, value: Any) -> None:  # stores what was set, read back unchanged
        self.__dict__[slot] = value

    return property(get, put if kind == "property_rw" else None)


def _no_constructor(qual: str) -> Callable:
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        raise TypeError(f"tensorrt.{qual}: No constructor defined!")

    return init


class _Builder:
    def __init__(self, manifest: Manifest, module: types.ModuleType) -> None:
        self.m, self.module = manifest, module
        self.enum_members = {}
        for line in read_lines(MANIFESTS / f"tensorrt-{manifest.version}-enums.txt"):
            enum, _, member = line.rpartition(".")
            self.enum_members.setdefault(enum, []).append(member)
        self.built: dict[str, Any] = {}
        self.classes = behaviour._registry()

    def enum(self, qual: str) -> type:
        values = behaviour.ENUM_VALUES.get(qual, {})
        ns: dict[str, Any] = {"__qualname__": qual, "__module__": "tensorrt", "_trt": self.module}
        self.members(qual, self.classes.get(qual, object), ns)
        for builtin in ("name", "value"):  # pybind11 enum builtins: EnumMember has them
            ns.pop(builtin, None)
        cls = type(qual.rsplit(".", 1)[-1], (EnumMember,), ns)
        members = {}
        for index, member in enumerate(self.enum_members.get(qual, [])):
            members[member] = cls(member, values.get(member, index))
            setattr(cls, member, members[member])
        cls.__members__ = members  # pybind11 enums: name -> member, in declaration order
        return cls

    def resolve(self, name: str) -> Any:
        """The model class or enum a signature's type text names, or None (builtins, typing constructs)."""
        return self.get(name) if name in self.m.types else None

    def get(self, qual: str) -> Any:
        if qual not in self.built:
            kind, _ = self.m.kinds[qual]
            self.built[qual] = self.enum(qual) if kind == "enum" else self.cls(qual)
        return self.built[qual]

    def cls(self, qual: str) -> type:
        _, note = self.m.kinds[qual]
        names = [b.strip() for b in note.removeprefix("bases:").split(",")] if note.startswith("bases:") else []
        bases = tuple(self.get(b) for b in names if b in self.m.types)
        impl = self.classes.get(qual, object)
        ns: dict[str, Any] = {"__module__": "tensorrt", "__qualname__": qual, "_trt": self.module}
        ns.update({k: v for k, v in vars(impl).items() if k.startswith("_") and not k.startswith("__")})  # model helpers
        ctor = getattr(impl, "__init__", None) if "__init__" in vars(impl) else None
        if self.m.sigs.get(qual):
            ns["__init__"] = _checked(qual, self.m.sigs[qual], ctor or (lambda self, *a, **k: None), resolve=self.resolve)
        else:
            ns["__init__"] = _no_constructor(qual)
        self.members(qual, impl, ns)
        cls = type(qual.rsplit(".", 1)[-1], bases, ns)
        cls._new = classmethod(_internal_new)  # how the model creates objects Python cannot construct
        return cls

    def members(self, qual: str, impl: type, ns: dict[str, Any]) -> None:
        """``qual``'s own members into ``ns``: modelled from ``impl`` where it has them, placeholders otherwise."""
        for member in self.m.children(qual):
            kind, mnote = self.m.kinds[member]
            short = member.rsplit(".", 1)[-1]
            if "inherited from" in mnote or kind in ("callback_doc", "enum_member"):
                continue  # the base class has it; callback_doc names are not attributes
            found = vars(impl).get(short)
            if kind in ("class", "enum"):
                ns[short] = self.get(member)
            elif kind == "alias":
                ns[short] = self.get(mnote.removeprefix("same object as ").strip())
            elif kind.startswith("enum_value:"):
                ns[short] = self.enum_value(kind.split(":", 1)[1], short)
            elif kind.startswith("property"):
                ns[short] = _property(member, kind, found)
            elif short in ("__enter__", "__exit__") and found is None and "python-level" in mnote:
                # added by tensorrt_bindings/__init__.py to the classes the manifest marks python-level
                ns[short] = behaviour.common_enter if short == "__enter__" else behaviour.common_exit
            elif short.startswith("__") and found is None:
                continue
            elif kind == "staticmethod":
                impl_fn = functools.partial(found.__func__, self.module) if found else _not_modelled(member)
                ns[short] = staticmethod(_checked(member, self.m.sigs.get(member, []), impl_fn, bound=False, resolve=self.resolve))
            elif kind in ("method", "classmethod"):
                ns[short] = _checked(member, self.m.sigs.get(member, []), found or _not_modelled(member), resolve=self.resolve)

    def enum_value(self, enum: str, short: str) -> Any:
        member = behaviour.ENUM_ALIASES.get(short, short)
        return getattr(self.get(enum), member, None) or _not_modelled(f"{enum}.{short}")


def _internal_new(cls: type, *args: Any, **kwargs: Any) -> Any:
    obj = object.__new__(cls)
    init = getattr(cls, "_init", None)
    if init is not None:
        init(obj, *args, **kwargs)
    return obj


def make(version: str = "10.7.0", memory: Any = None) -> types.ModuleType:
    """A fresh ``tensorrt`` module modelling ``version`` (one of ``versions()``). Its engines read and write
    ``memory`` (``module._memory``, the memory seam: a new ``host_cuda.HostCudart`` unless given)."""
    from trt_model.host_cuda import HostCudart

    manifest = load(version)
    module = types.ModuleType("tensorrt", f"A model of TensorRT {version}'s documented Python API, for tests; not TensorRT.")
    module.__version__ = version
    module._memory = memory if memory is not None else HostCudart()
    builder = _Builder(manifest, module)
    for qual in manifest.children(""):
        kind, note = manifest.kinds[qual]
        if kind in ("class", "enum"):
            setattr(module, qual, builder.get(qual))
        elif kind.startswith("enum_value:"):
            setattr(module, qual, builder.enum_value(kind.split(":", 1)[1], qual))
        elif kind == "function":
            fn = functools.partial(behaviour.FUNCTIONS[qual], module) if qual in behaviour.FUNCTIONS else _not_modelled(qual)
            setattr(module, qual, _checked(qual, manifest.sigs.get(qual, []), fn, bound=False, resolve=builder.resolve))
        elif kind.startswith("attribute:") and qual == "__version__":
            continue
        elif kind == "module":
            setattr(module, qual, types.ModuleType(f"tensorrt.{qual}", "not modelled"))
    return module
