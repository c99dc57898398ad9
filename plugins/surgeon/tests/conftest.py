"""``planted``: parity.testing's MLP with a divergence planted in node fc2. ``mlp_model``, ``parity_invoke`` and the
model builders come from parity.testing, as for any plugin; models.py holds the surgeon tests' own models."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from parity.testing import mlp

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture()
def planted(tmp_path: Path) -> Path:
    """The MLP with fc2's weight shifted by 0.05: it differs from ``mlp_model`` in node fc2 only."""
    return mlp(tmp_path / "mlp_planted.onnx", planted=0.05)
