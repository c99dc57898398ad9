"""Registers the ``--torch`` backend, the ``torch`` model kind and the origin of nodes torch.onnx exported. Imports
nothing heavy: torch loads when a runner activates or a program is read, never for ``parity --help``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from parity import hookimpl

if TYPE_CHECKING:
    from parity.api import RunnerRequest

SUFFIXES = (".pt2", ".pt", ".ts")


def make_runner(request: RunnerRequest) -> Any:
    """The runner's program is ``--torch-model`` when given (MODEL is then what the other runners run: its
    ONNX export, against which marked tensors are matched), else MODEL itself."""
    from parity.api import UsageError, check_model_path  # here: discovery imports this module and never builds a runner
    from parity_torch.options import settings
    from parity_torch.runner import ProgramFromPath, TorchRunner

    values = settings(request)  # usage errors first, before any file is read
    program = request.get("torch_model")
    if program:
        check_model_path(program, "--torch-model file")
        onnx_model = request.model if request.model_kind == "onnx" else None
    elif request.model_kind == "onnx":
        raise UsageError(
            f"--torch runs a PyTorch program and {request.model} is an ONNX model: give the program with --torch-model model.pt2 "
            "(torch.export.save) or a TorchScript file"
        )
    else:
        program, onnx_model = request.model, None
    return TorchRunner(ProgramFromPath(program), onnx_model=onnx_model, **values)


@hookimpl
def parity_register_backends(register):
    from parity.api import Backend  # here, not at the top: `parity --help` imports this module and never needs the registry
    from parity_torch.options import runner_options

    register(
        Backend(
            name="torch",
            make_runner=make_runner,
            help="Run a PyTorch program: torch.export (.pt2) or TorchScript, MODEL or --torch-model (repeatable).",
            options=runner_options(),
            model_kinds=("torch", "onnx"),  # an ONNX MODEL with --torch-model: the program's export, run by the others
            requires=("torch",),
            install_hint="pip install torch",
            title="PyTorch",
            mark_options=("torch_outputs",),
            reads=("torch_model",),
        )
    )


def _read_inputs(path: str) -> Any:
    from parity_torch.programs import read_inputs  # here: it imports torch's loaders on use, discovery never reads a program

    return read_inputs(path)


def _describe(path: str, show: Any = (), options: Any = None) -> str:
    from parity_torch.programs import describe  # here: likewise

    return describe(path, show, options)


@hookimpl
def parity_register_model_kinds(register):
    from parity.api import ModelKind  # here: discovery imports this module and never needs the registry

    register(ModelKind(name="torch", suffixes=SUFFIXES, read_inputs=_read_inputs, describe=_describe))


@hookimpl
def parity_node_origins(nodes):
    from parity_torch.origins import node_origins  # no torch: the exporter's metadata is text

    return node_origins(nodes)
