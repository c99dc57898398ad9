"""Polygraphy's utilities (``polygraphy.util``): internal to Polygraphy and not part of the import rule, mirrored
for the names scripts and tests reach for (temporary files, file helpers, shapes); ``util.array`` is
:mod:`parity_polygraphy.util.array`."""

import importlib

from parity_polygraphy.util.util import (
    NamedTemporaryFile,
    default,
    find_library,
    invert_dict,
    invoke_if_callable,
    is_empty_shape,
    is_file_like,
    is_sequence,
    load_file,
    save_file,
    unique_list,
    volume,
)

__all__ = [
    "NamedTemporaryFile",
    "array",
    "default",
    "find_library",
    "invert_dict",
    "invoke_if_callable",
    "is_empty_shape",
    "is_file_like",
    "is_sequence",
    "load_file",
    "save_file",
    "unique_list",
    "volume",
]


def __getattr__(name: str) -> object:
    if name == "array":  # numpy loads on first use
        return importlib.import_module("parity_polygraphy.util.array")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
