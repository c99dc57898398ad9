"""The surgeon plugin's public module for other plugins (parity-reduce builds on it).

A plugin that uses the surgeon plugin imports from here, never from its other modules, and declares
``parity-surgeon`` as a dependency. Each name:

- ``Fp16Converter(model, keep_io_types=True, ..., low="float16", base_dir=None)``: the fp16
  converter of ``parity convert --fp-to-fp16``; it analyses a model once and builds converted copies with any
  extra set of nodes kept float32 (``debug precision`` builds one per check).
- ``sparsity``: 2:4 structured sparsity of weights (``parity surgeon prune``): ``candidates(model)``,
  ``eligible(model, skip)``, ``values(tensor, base_dir)``, ``is_sparse(flat, dims, axis, data_type)``,
  ``pruned(flat, dims, axis, data_type)``, ``pruned_tensor(tensor, axis)``, ``sparse_weights(model)``,
  ``prune_model(model, skip, base_dir)`` (a pruned copy and a ``SparsityReport``).
- ``strip_weights(model, exclude, base_dir)`` / ``reconstruct_weights(model, seed)``: ``parity surgeon
  weight-strip`` / ``weight-reconstruct`` on a ModelProto (each returns a new model and a report).

Importing this module does not import onnx or the converter: the name is resolved on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from parity.api import lazy_attributes

if TYPE_CHECKING:  # what the lazy name below resolves to, for readers and type checkers
    from parity_surgeon import sparsity
    from parity_surgeon.fp16 import Fp16Converter
    from parity_surgeon.weights import reconstruct_weights, strip_weights

__all__ = ["Fp16Converter", "reconstruct_weights", "sparsity", "strip_weights"]

# Resolved on first use: the converter's module loads Parity's ONNX helpers (tens of milliseconds), which a plugin's
# command line never needs.
_LAZY = {
    "Fp16Converter": "parity_surgeon.fp16",
    "sparsity": "parity_surgeon.sparsity",
    "reconstruct_weights": "parity_surgeon.weights",
    "strip_weights": "parity_surgeon.weights",
}


# looked up on each use, not kept here: a test that patches the defining module still takes effect
__getattr__ = lazy_attributes(__name__, _LAZY)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
