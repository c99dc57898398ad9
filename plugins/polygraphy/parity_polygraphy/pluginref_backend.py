"""``parity run --pluginref``: Polygraphy's plugin reference runner as a Parity backend. The model is imported
with onnx-graphsurgeon and evaluated node by node on the CPU with the NumPy references of
:mod:`parity_polygraphy.backend.pluginref.references` (Identity, InstanceNormalization, MeanVarianceNormalization):
the expected outputs of a model whose plugin ops a TensorRT engine runs. A node without a reference fails
naming its op, exit 3. This module only registers (``parity run --help`` loads it); the runner is
:mod:`parity_polygraphy.pluginref_runner`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from parity.api import RunnerRequest
    from parity_polygraphy.pluginref_runner import PluginRefBackendRunner


def make_runner(request: RunnerRequest) -> PluginRefBackendRunner:
    from parity_polygraphy.pluginref_runner import PluginRefBackendRunner  # here: numpy loads when a run builds it

    return PluginRefBackendRunner(
        request.model,
        outputs=list(request.get("onnx_outputs", ())) or None,
        exclude=list(request.get("onnx_exclude_outputs", ())) or None,
        external_data_dir=request.get("external_data_dir"),
    )


def register_backend(register: Any) -> None:
    """What ``parity_polygraphy.hooks.parity_register_backends`` registers."""
    from parity.api import Backend  # here: `parity --help` imports the hooks, never the registry

    register(
        Backend(
            name="pluginref",
            make_runner=make_runner,
            help="Run with Polygraphy's plugin reference implementations (CPU, NumPy; repeatable).",
            model_kinds=("onnx",),
            requires=("onnx_graphsurgeon",),
            install_hint="pip install onnx-graphsurgeon",
            title="Polygraphy plugin references",
            mark_options=("onnx_outputs",),
        )
    )
