"""The TensorRT plugin's public module for other plugins (parity-tactics builds on it).

A plugin that uses the TensorRT plugin imports from here, never from its other modules, and declares
``parity-trt`` as a dependency. Each name:

- ``import_trt()``: the ``tensorrt`` module, imported once per process (``functools.cache``: tests clear it with
  ``import_trt.cache_clear()``); a missing TensorRT is one ``parity: error:`` line with the install hint, the same
  for every plugin.
- ``has(trt, name)``: whether this TensorRT has a dotted name (``"IAlgorithmSelector"``,
  ``"BuilderFlag.EDITABLE_TIMING_CACHE"``): probe capabilities, not version numbers.
- ``unavailable(trt, name, feature)``: the one-line ``UsageError`` for a feature whose TensorRT name (``name``,
  dotted as for ``has``) this TensorRT lacks, saying which releases have it and what to do instead (TensorRT 11's
  strong typing for the precision flags), the same words as the CLI's.
- ``Gate``: the TensorRT releases a name exists in (``Gate(since="10.8")``, ``Gate(until="11.0")``).
- ``guard(what, default)``: decorator for a callback method TensorRT calls (algorithm selector, ...): keeps the
  exception TensorRT would swallow and re-raises it after the build as one line.
- ``build_options()``: the click options of a TensorRT build (``--trt-min-shapes``, ``--fp16``, ...), for a command
  that builds engines.
- ``check_options(options)``: refuses bad build options before any work (no TensorRT needed).
- ``convert(model, output, options)``: builds an engine from an ONNX model with those options and saves it.
- ``get_runtime()``: the process's one ``trt.Runtime`` (it must outlive the engines it deserialized).
- ``EngineBytesFromNetwork``, ``EngineFromNetwork``, ``EngineFromBytes``: loaders that build a (serialized) engine
  from a network loader or ``(builder, network[, parser])``, or deserialize one from bytes.
- ``TrtRunner``: runs an engine (or its bytes, an execution context, or a loader of one) as a ``parity.api``
  runner.
- ``cuda``: the CUDA layer on cuda-python the runner uses (``runtime()``, ``check(result, what)``, ``CudaError``,
  ``Stream``, ``DeviceArray``, ``device_count()``), for plugins that move tensors themselves.
- ``conformance``: the checker of TensorRT names in Python source against per-release API manifests
  (``Use``, ``collect_source``, ``attribute_chain``, ``Manifest``, ``check``), for tests and tools.

Importing this module imports neither TensorRT nor numpy nor click: the names that would are resolved on first
use (see ``_LAZY``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from parity.api import lazy_attributes
from parity_trt._trt import import_trt
from parity_trt.callbacks import guard
from parity_trt.versions import Gate, has, unavailable

if TYPE_CHECKING:  # what the lazy names below resolve to, for readers and type checkers
    from parity_trt import conformance, cuda
    from parity_trt.engine import EngineBytesFromNetwork, EngineFromBytes, EngineFromNetwork, get_runtime
    from parity_trt.factory import check_options, convert
    from parity_trt.options import build_options
    from parity_trt.runner import TrtRunner

__all__ = [
    "EngineBytesFromNetwork", "EngineFromBytes", "EngineFromNetwork", "Gate", "TrtRunner",
    "build_options", "check_options", "conformance", "convert", "cuda", "get_runtime", "guard", "has", "import_trt",
    "unavailable",
]  # fmt: skip

# Resolved on each use, not cached here: options and factory import click, engine imports numpy, conformance is
# tooling; a plugin that only probes TensorRT needs none of them. Not caching keeps a test's monkeypatch of the
# defining module (e.g. ``parity_trt.engine.get_runtime``) in effect for every user.
_LAZY = {
    "build_options": "parity_trt.options",
    "check_options": "parity_trt.factory",
    "convert": "parity_trt.factory",
    "get_runtime": "parity_trt.engine",
    "EngineBytesFromNetwork": "parity_trt.engine",
    "EngineFromBytes": "parity_trt.engine",
    "EngineFromNetwork": "parity_trt.engine",
    "TrtRunner": "parity_trt.runner",  # imports numpy
    "conformance": "parity_trt.conformance",  # the module itself
    "cuda": "parity_trt.cuda",  # the module itself; imports numpy, and cuda-python on first CUDA call
}

__getattr__ = lazy_attributes(__name__, _LAZY)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
