"""Polygraphy's JSON: ``to_json`` / ``from_json`` / ``save_json`` / ``load_json`` with an :class:`Encoder` and a
:class:`Decoder` that types register with (``@Encoder.register(MyType)``), writing and reading Polygraphy's own
format (``{"...": ..., "polygraphy_class": "MyType"}``; arrays as base64 ``.npy`` bytes, never pickled).

Arrays from files are read by Parity's reader of Polygraphy's JSON (``parity.api.load_json``), which also reads the
formats of earlier Polygraphy versions (latin-1 text, NPZ archives) and refuses pickles.
"""

from __future__ import annotations

import base64
import functools
import importlib
import io
import json
import os
import sys
from collections import OrderedDict
from collections.abc import Callable
from typing import IO, Any

from parity.api import ParityError
from parity.api import load_json as _load_polygraphy_json
from parity_polygraphy.constants import LEGACY_TYPE_MARKER, TAB, TYPE_MARKER
from parity_polygraphy.logger import G_LOGGER
from parity_polygraphy.util import load_file, save_file

__all__ = ["Decoder", "Encoder", "add_json_methods", "from_json", "load_json", "save_json", "to_json"]


def _legacy_name(typ: type) -> str:
    return "__polygraphy_encoded_" + typ.__name__


class _Registry:
    """``register(typ, alias=None)``: the decorator types register their encode / decode functions with."""

    polygraphy_registered: dict[Any, Callable[..., Any]]

    @classmethod
    def _add(cls, key: Any, func: Callable[..., Any]) -> None:
        if key in cls.polygraphy_registered:
            G_LOGGER.critical(f"Duplicate serialization function for type: {key}.\nNote: Existing function: {cls.polygraphy_registered[key]}, New function: {func}")
        cls.polygraphy_registered[key] = func

    @classmethod
    def register(cls, typ: type, alias: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Encoders take an instance and return a dict (the type marker is added); decoders take that dict
        (marker removed) and return the instance. ``alias``: another name to decode, for a renamed class."""
        raise NotImplementedError


class Encoder(_Registry, json.JSONEncoder):
    """Polygraphy's JSON encoder: registered types become dicts marked with their class name."""

    polygraphy_registered: dict[Any, Callable[..., Any]] = {}

    @classmethod
    def register(cls, typ: type, alias: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def register_encoder(func: Callable[[Any], dict[str, Any]]) -> Callable[[Any], dict[str, Any]]:
            def encode(obj: Any) -> dict[str, Any]:
                dct = func(obj)
                dct[TYPE_MARKER] = typ.__name__
                return dct

            cls._add(typ, encode)
            return encode

        return register_encoder

    def default(self, o: Any) -> Any:
        encode = self.polygraphy_registered.get(type(o))
        if encode is not None:
            return encode(o)
        if type(o).__module__ == "numpy" and hasattr(o, "item"):  # a NumPy scalar: its Python value
            return o.item()
        return super().default(o)


class Decoder(_Registry):
    """Polygraphy's JSON decoder (an ``object_pairs_hook``): dicts marked with a registered class name become
    instances of it; other dicts stay dicts."""

    polygraphy_registered: dict[Any, Callable[..., Any]] = {}

    @classmethod
    def register(cls, typ: type, alias: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def register_decoder(func: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
            cls._register_name(typ.__name__, func, alias)
            return func

        return register_decoder

    @classmethod
    def _register_name(cls, name: str, func: Callable[[dict[str, Any]], Any], alias: str | None = None) -> None:
        legacy = "__polygraphy_encoded_" + name

        def decode(dct: dict[str, Any]) -> Any:
            dct.pop(TYPE_MARKER, None)
            dct.pop(LEGACY_TYPE_MARKER, None)
            dct.pop(legacy, None)
            return func(dct)

        for key in (legacy, name, *([alias] if alias else [])):
            cls._add(key, decode)

    def __call__(self, pairs: list[tuple[str, Any]]) -> Any:
        dct = OrderedDict(pairs)
        # files of older Polygraphy versions mark a type with {"__polygraphy_encoded_<name>": LEGACY_TYPE_MARKER}
        for key, decode in self.polygraphy_registered.items():
            value = dct.get(key)
            if isinstance(value, str) and value == LEGACY_TYPE_MARKER:
                return decode(dct)
        name = dct.get(TYPE_MARKER) or dct.get(LEGACY_TYPE_MARKER)
        if name is None:
            return dct
        if name not in self.polygraphy_registered:
            shown = {"Tensor": "torch.Tensor", "ndarray": "np.ndarray"}.get(name, name)
            G_LOGGER.critical(f"Could not decode serialized type: {shown}. This could be because a required module is missing. ")
        return self.polygraphy_registered[name](dct)


# --- arrays -------------------------------------------------------------------------------------------------
def _encode_ndarray(array: Any) -> dict[str, Any]:
    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return {"array": base64.b64encode(buffer.getvalue()).decode()}


def _decode_ndarray(dct: dict[str, Any]) -> Any:
    # Parity's reader of Polygraphy's arrays: base64 .npy, latin-1 text and NPZ archives of older versions; no pickles
    try:
        return _load_polygraphy_json(io.StringIO(json.dumps({**dct, TYPE_MARKER: "ndarray"})), description="a JSON array")
    except ParityError as exc:
        G_LOGGER.critical(str(exc))


def _encode_tensor(tensor: Any) -> dict[str, Any]:
    import torch

    buffer = io.BytesIO()
    torch.save(tensor, buffer)
    return {"tensor": base64.b64encode(buffer.getvalue()).decode()}


def _decode_tensor(dct: dict[str, Any]) -> Any:
    try:
        import torch
    except ImportError:
        G_LOGGER.critical("Could not decode serialized type: torch.Tensor. This could be because a required module is missing. ")
    return torch.load(io.BytesIO(base64.b64decode(dct["tensor"].encode(), validate=True)), weights_only=True)


_REGISTERED: set[str] = set()


def _register_common() -> None:
    """Register arrays, torch tensors (where torch is imported) and the package's own JSON types, once each: done
    at first use rather than import, so importing this module imports neither NumPy nor the comparator."""
    if "ndarray" not in _REGISTERED:
        import numpy as np

        Encoder.register(np.ndarray)(_encode_ndarray)
        Decoder.register(np.ndarray)(_decode_ndarray)
        Decoder._register_name("Tensor", _decode_tensor)  # decoding imports torch only when a file holds a tensor
        _REGISTERED.add("ndarray")
    if "torch" not in _REGISTERED and "torch" in sys.modules:  # a script with tensors has imported torch
        Encoder.register(sys.modules["torch"].Tensor)(_encode_tensor)
        _REGISTERED.add("torch")
    if "common" not in _REGISTERED:
        _REGISTERED.add("common")
        # their modules register FormattedArray, RunResults, IterationResult, LazyArray
        for module in ("parity_polygraphy.common", "parity_polygraphy.comparator"):
            importlib.import_module(module)


def _with_common(func: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(func)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        _register_common()
        return func(*args, **kwargs)

    return wrapped


@_with_common
def to_json(obj: Any) -> str:
    """``obj`` as JSON text (4-space indents, as Polygraphy writes). Polygraphy's objects also have ``to_json()``."""
    return json.dumps(obj, cls=Encoder, indent=len(TAB))


@_with_common
def from_json(src: str) -> Any:
    """The object a JSON text holds, registered types rebuilt."""
    return json.loads(src, object_pairs_hook=Decoder())


@_with_common
def save_json(obj: Any, dest: str | os.PathLike[str] | IO[str], description: str | None = None) -> None:
    """Write ``obj`` as JSON to a path (atomically) or an open text file."""
    save_file(to_json(obj), dest, mode="w", description=description)


@_with_common
def load_json(src: str | os.PathLike[str] | IO[str], description: str | None = None) -> Any:
    """Read the object a JSON file holds (a path or an open file; FileNotFoundError for a missing path)."""
    return from_json(load_file(src, mode="r", description=description))


def add_json_methods(description: str | None = None) -> Callable[[type], type]:
    """Class decorator: ``obj.to_json()``, ``Cls.from_json(text)``, ``obj.save(dest)``, ``Cls.load(src)``; the
    class methods refuse JSON holding another type (PolygraphyException: 'JSON cannot be decoded into ...')."""

    def add(cls: type) -> type:
        def checked(obj: Any) -> Any:
            if not isinstance(obj, cls):
                G_LOGGER.critical(f"Provided JSON cannot be decoded into a {cls.__name__}.\nNote: JSON was decoded into a {type(obj)}:\n{obj}")
            return obj

        cls.to_json = lambda self: to_json(self)  # type: ignore[attr-defined]
        cls.from_json = staticmethod(lambda src: checked(from_json(src)))  # type: ignore[attr-defined]
        cls.save = lambda self, dest: save_json(self, dest, description=description)  # type: ignore[attr-defined]
        cls.load = staticmethod(lambda src: checked(load_json(src, description=description)))  # type: ignore[attr-defined]
        return cls

    return add
