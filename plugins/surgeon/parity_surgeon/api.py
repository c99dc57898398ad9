"""The surgeon plugin's public module for other plugins (parity-reduce builds on it).

A plugin that uses the surgeon plugin imports from here, never from its other modules, and declares
``parity-surgeon`` as a dependency. Each name:

- ``Fp16Converter(model, keep_io_types=True, ..., low="float16", base_dir=None)``: the fp16
  converter of ``parity convert --fp-to-fp16``; it analyses a model once and builds converted copies with any
  extra set of nodes kept float32 (``debug precision`` builds one per check).

Importing this module does not import onnx or the converter: the name is resolved on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from parity.api import lazy_attributes

if TYPE_CHECKING:  # what the lazy name below resolves to, for readers and type checkers
    from parity_surgeon.fp16 import Fp16Converter

__all__ = ["Fp16Converter"]

# Resolved on first use: the converter's module loads Parity's ONNX helpers (tens of milliseconds), which a plugin's
# command line never needs.
_LAZY = {"Fp16Converter": "parity_surgeon.fp16"}


# looked up on each use, not kept here: a test that patches the defining module still takes effect
__getattr__ = lazy_attributes(__name__, _LAZY)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
