"""PyTorch backend for Parity (``--torch``): torch.export programs (``.pt2``) and TorchScript files.

``TorchRunner`` runs one behind Parity's runner interface; ``ProgramFromPath`` loads it lazily and ``load_program``
at once::

    from parity_torch import ProgramFromPath, TorchRunner
    with TorchRunner(ProgramFromPath("model.pt2"), device="cuda", dtype="fp16") as runner:
        outputs = runner.infer({"x": x})

Names resolve on first use, so Parity's plugin discovery (which imports ``parity_torch.hooks``) never imports
torch or numpy. Another plugin that builds on this one imports :mod:`parity_torch.api`.
"""

from __future__ import annotations

from parity.api import lazy_attributes

_LAZY = {
    "ProgramFromPath": "parity_torch.runner",
    "TorchRunner": "parity_torch.runner",
    "exporter_decomposition": "parity_torch.runner",
    "Program": "parity_torch.programs",
    "load_program": "parity_torch.programs",
    "match_values": "parity_torch.origins",
    "module_of": "parity_torch.origins",
}
__all__ = sorted(_LAZY)
__getattr__ = lazy_attributes(__name__, _LAZY)
