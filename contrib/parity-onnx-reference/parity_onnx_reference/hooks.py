"""Registers ``--onnx-ref``. Imports nothing heavy: onnx loads when the runner is activated."""

from __future__ import annotations

from typing import TYPE_CHECKING

from parity import hookimpl

if TYPE_CHECKING:
    from parity.api import RunnerRequest


def make_runner(request: RunnerRequest):
    from parity_onnx_reference.runner import EvaluatorFromOnnx, OnnxReferenceRunner

    # --onnx-outputs / --onnx-exclude-outputs are the core's ONNX options, honoured like onnxrt does
    outputs = list(request.get("onnx_outputs", ()))
    exclude = list(request.get("onnx_exclude_outputs", ()))
    # weights stay in their external data files (--external-data-dir), fed from memory maps
    return OnnxReferenceRunner(EvaluatorFromOnnx(request.model, outputs=outputs, exclude=exclude, external_data_dir=request.get("external_data_dir")))


@hookimpl
def parity_register_backends(register):
    from parity.api import Backend  # here, not at the top: `parity --help` imports this module and never needs the registry

    register(
        Backend(
            name="onnx-ref",
            make_runner=make_runner,
            help="Run with onnx.reference.ReferenceEvaluator: pure NumPy, slow, independent of onnxruntime (repeatable).",
            model_kinds=("onnx",),
            requires=("onnx",),
            install_hint="pip install onnx",
            mark_options=("onnx_outputs",),  # the core's --onnx-outputs, which this backend honours
        )
    )
