"""The ONNX Runtime plugin's public module for other plugins (parity-surgeon builds on it).

A plugin that uses the ONNX Runtime plugin imports from here, never from its other modules, and declares
``parity-onnxrt`` as a dependency. Each name:

- ``OnnxFromPath(path)``: lazy loader of an ONNX model (external data read from the model's folder or a given one);
  ``onnx_from_path`` is its immediately evaluated twin.
- ``ModifyOnnxOutputs(model, outputs, exclude=())``: lazy loader of a copy of the model whose graph outputs are the
  given tensors (``mark all`` marks every tensor); ``modify_onnx_outputs`` is its twin.
- ``SessionFromOnnx(model, providers=None, ...)``: lazy loader of an ``onnxruntime.InferenceSession``
  (one-line errors for models onnxruntime refuses); ``session_from_onnx`` is its twin.
- ``OnnxrtRunner(session)``: the runner of ``--onnxrt``: ``with OnnxrtRunner(SessionFromOnnx(path)) as r:
  r.infer(feed)``.
- ``SegmentedSession(model, make_session)``: a marked model with external weights run as a chain of segments, one
  session at a time (what ``--onnx-outputs mark all`` runs on a model whose weights pass 1 GiB).
- ``release_freed_memory()``: after releasing a session, give its memory back to the system before the next loads.

Importing this module imports neither numpy nor onnx nor onnxruntime: every name is resolved on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from parity.api import lazy_attributes
from parity_onnxrt import _LAZY  # one table: the package's own names, resolved on first use there too

if TYPE_CHECKING:  # what the lazy names below resolve to, for readers and type checkers
    from parity_onnxrt.loaders import (
        ModifyOnnxOutputs,
        OnnxFromPath,
        SessionFromOnnx,
        modify_onnx_outputs,
        onnx_from_path,
        release_freed_memory,
        session_from_onnx,
    )
    from parity_onnxrt.runner import OnnxrtRunner
    from parity_onnxrt.segments import SegmentedSession

__all__ = [
    "ModifyOnnxOutputs",
    "OnnxFromPath",
    "OnnxrtRunner",
    "SegmentedSession",
    "SessionFromOnnx",
    "modify_onnx_outputs",
    "onnx_from_path",
    "release_freed_memory",
    "session_from_onnx",
]

# looked up on each use, not kept here: a test that patches the defining module still takes effect
__getattr__ = lazy_attributes(__name__, _LAZY)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
