"""The torch tests' own programs, built and exported here: a small CNN (BatchNorm, residual adds, a Linear head,
two outputs), a transformer encoder block and a model whose forward branches through torch.cond. Each is saved as
NAME.pt2 (torch.export.save) and NAME.onnx (torch.onnx.export(..., dynamo=True)); the CNN also as TorchScript."""

from __future__ import annotations

import contextlib
import io
import warnings
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import numpy_helper
from torch import nn


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.bn, self.conv2 = nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4), nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv2(torch.relu(self.bn(self.conv1(x)))) + x)


class Cnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem, self.layer1, self.head = nn.Conv2d(3, 4, 3, padding=1), nn.Sequential(Block(), Block()), nn.Linear(4, 5)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        pooled = self.layer1(torch.relu(self.stem(x))).mean((2, 3))
        return self.head(pooled), pooled


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.enc(x)


class Branchy(nn.Module):
    """y = relu(a(x)) when x sums above 0, else 2 * b(x): data-dependent control flow through torch.cond."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda t: self.a(t).relu(), lambda t: self.b(t) * 2, (x,))


def _with_statistics(model: nn.Module) -> nn.Module:
    """BatchNorm with running statistics that are not the identity, so a BN error shows."""
    gen = torch.Generator().manual_seed(0)
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            module.running_mean.copy_(torch.randn(module.num_features, generator=gen) * 0.1)
            module.running_var.copy_(torch.rand(module.num_features, generator=gen) + 0.5)
    return model.eval()


MODELS = {
    "cnn": (Cnn, (1, 3, 8, 8)),
    "encoder": (Encoder, (1, 5, 16)),
    "branchy": (Branchy, (2, 4)),
}


def export(name: str, folder: Path) -> tuple[Path, Path]:
    """NAME.pt2 and NAME.onnx in ``folder`` (torch's own chatter silenced)."""
    torch.manual_seed(0)
    cls, shape = MODELS[name]
    model = _with_statistics(cls())
    args = (torch.randn(*shape),)
    pt2, path = folder / f"{name}.pt2", folder / f"{name}.onnx"
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.export.save(torch.export.export(model, args), pt2)
        torch.onnx.export(model, args, path, dynamo=True, verbose=False)
        if name == "cnn":
            torch.jit.trace(model, args).save(folder / "cnn_script.pt")
    onnx.checker.check_model(onnx.load(path), full_check=True)
    return pt2, path


class Scale(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * 2).sum(1)


def dynamic(folder: Path) -> Path:
    """dynamic.pt2: a program whose batch dim is symbolic (torch.export's Dim)."""
    path = folder / "dynamic.pt2"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.export.save(torch.export.export(Scale(), (torch.randn(4, 3),), dynamic_shapes={"x": {0: torch.export.Dim("batch")}}), path)
    return path


def perturbed(model: Path, initializer: str, out: Path, delta: float = 0.5) -> Path:
    """A copy of ``model`` with the first row of ``initializer`` (a convolution's first output channel) moved by
    ``delta``: a planted export bug."""
    proto = onnx.load(model)
    for index, init in enumerate(proto.graph.initializer):
        if init.name == initializer:
            values = numpy_helper.to_array(init).copy()
            values.reshape(values.shape[0], -1)[0] += np.asarray(delta, dtype=values.dtype)
            proto.graph.initializer[index].CopyFrom(numpy_helper.from_array(values, init.name))
            break
    else:
        raise KeyError(initializer)
    onnx.save(proto, out)
    return out
