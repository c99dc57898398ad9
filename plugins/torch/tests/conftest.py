"""``programs``: the torch tests' programs (torch_programs), exported once per session (an export takes seconds)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def programs(tmp_path_factory) -> Path:
    """A folder holding cnn/encoder/branchy .pt2 and .onnx, cnn_script.pt (TorchScript), and exports with one weight
    moved: cnn_bad.onnx (layer1.0.conv2), encoder_bad.onnx (enc.norm1); dynamic.pt2 (a symbolic batch dim)."""
    pytest.importorskip("torch")
    pytest.importorskip("onnxscript")  # torch.onnx.export(..., dynamo=True)
    import torch_programs  # here: it imports torch

    folder = tmp_path_factory.mktemp("torch-programs")
    for name in torch_programs.MODELS:
        torch_programs.export(name, folder)
    torch_programs.dynamic(folder)
    torch_programs.perturbed(folder / "cnn.onnx", "layer1.0.conv2.weight", folder / "cnn_bad.onnx")
    torch_programs.perturbed(folder / "encoder.onnx", "enc.norm1.weight", folder / "encoder_bad.onnx")
    return folder
