"""The PyTorch plugin's public module for other plugins.

A plugin that uses the PyTorch plugin imports from here, never from its other modules, and declares
``parity-torch`` as a dependency. Each name:

- ``ProgramFromPath(path)``: lazy loader of a ``Program`` (a ``.pt2`` from ``torch.export.save`` or a TorchScript
  file, on the CPU); ``load_program(path)`` is its immediately evaluated twin.
- ``Program``: what was loaded: ``kind`` ("torch.export" or "TorchScript"), ``inputs`` ({name: TensorMeta}),
  ``outputs`` (the graph signature's names), ``program`` (the ``ExportedProgram`` or ``ScriptModule``).
- ``TorchRunner(program, device="cpu", dtype="fp32", outputs=None, onnx_model=None)``: the runner of ``--torch``;
  ``outputs`` names intermediate tensors or is ``"mark all"``; with ``onnx_model`` (the program's torch.onnx export)
  they are matched with its tensors and named as there.
- ``exporter_decomposition(ep)``: ``ep`` decomposed as torch.onnx's dynamo exporter decomposes it (None where
  that step is unavailable).
- ``match_values(nodes, program)``: ``{ONNX value: fx node}`` through the exporter's node metadata.
- ``module_of(metadata)``: ``(module path, class name)`` a node's metadata records, or None.

Importing this module imports neither torch nor numpy: every name is resolved on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from parity.api import lazy_attributes
from parity_torch import _LAZY  # one table: the package's own names, resolved on first use there too

if TYPE_CHECKING:  # what the lazy names below resolve to, for readers and type checkers
    from parity_torch.origins import match_values, module_of
    from parity_torch.programs import Program, load_program
    from parity_torch.runner import ProgramFromPath, TorchRunner, exporter_decomposition

__all__ = ["Program", "ProgramFromPath", "TorchRunner", "exporter_decomposition", "load_program", "match_values", "module_of"]

# looked up on each use, not kept here: a test that patches the defining module still takes effect
__getattr__ = lazy_attributes(__name__, _LAZY)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
