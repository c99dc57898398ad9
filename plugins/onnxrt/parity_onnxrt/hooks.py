"""Registers the ``--onnxrt`` backend. Imports nothing heavy: onnxruntime loads when a runner is built."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from parity import hookimpl

if TYPE_CHECKING:
    from parity.api import RunnerRequest

LEVELS = ("disable", "basic", "extended", "layout", "all")


def make_runner(request: RunnerRequest):
    from parity_onnxrt.loaders import ModifyOnnxOutputs, OnnxFromPath, SessionFromOnnx
    from parity_onnxrt.runner import OnnxrtRunner

    # Unmodified models go to onnxruntime as a path: parsing with onnx and re-serialising would hold the
    # model in memory twice (three times counting onnxruntime's copy) for nothing. Marked outputs are an edit
    # of the graph only: the model is parsed with its weights left in their files, and onnxruntime gets the
    # graph-only message plus the data folder (never a message holding the weights: fine past 2 GiB).
    model = request.model
    data_dir = request.get("external_data_dir")
    outputs = list(request.get("onnx_outputs", ()))
    if outputs:
        model = ModifyOnnxOutputs(OnnxFromPath(request.model, external_data_dir=data_dir), outputs=outputs, exclude=list(request.get("onnx_exclude_outputs", ())))
    session = SessionFromOnnx(
        model,
        providers=list(request.get("providers", ())) or None,
        graph_optimization_level=request.get("graph_optimization_level"),
        intra_op_num_threads=request.get("ort_threads"),
        custom_ops=list(request.get("onnxrt_custom_ops", ())),
        session_options=request.get("onnxrt_session_options"),
        base_dir=data_dir,
        prepack=request.get("onnxrt_prepack"),
    )
    if outputs:  # mark all on big external weights: a chain of sessions, one at a time (parity_onnxrt.segments)
        from parity_onnxrt.segments import SegmentedSessionFromOnnx

        session = SegmentedSessionFromOnnx(session, outputs)
    return OnnxrtRunner(session)


@hookimpl
def parity_register_backends(register):
    from parity.api import Backend, GreedyOption  # here, not at the top: `parity --help` imports this module and never needs the registry

    register(
        Backend(
            name="onnxrt",
            make_runner=make_runner,
            help="Run with ONNX Runtime (repeatable).",
            options=(
                GreedyOption(
                    ["--providers", "--execution-providers", "providers"],
                    metavar="NAME",
                    help="onnxrt: execution providers in priority order, e.g. cpu cuda (partial names match).",
                ),
                click.Option(["--graph-optimization-level"], type=click.Choice(LEVELS), default=None, help="onnxrt: graph optimisation level [all]."),
                click.Option(["--ort-threads"], type=click.IntRange(min=0), default=None, help="onnxrt: intra-op threads, 0: onnxruntime's default [0]."),
                GreedyOption(
                    ["--onnxrt-custom-ops", "onnxrt_custom_ops"],
                    metavar="LIB.so",
                    help="onnxrt: custom-op libraries to register (SessionOptions.register_custom_ops_library), in order.",
                ),
                click.Option(
                    ["--onnxrt-prepack/--no-onnxrt-prepack"],
                    default=None,
                    help="onnxrt: pack weights when the session is created, onnxruntime's default (about 1 s per GiB; pays off after tens of inferences) [off].",
                ),
                click.Option(
                    ["--onnxrt-session-options"],
                    metavar="FILE.json",
                    default=None,
                    help="onnxrt: a JSON object of SessionOptions attributes and config_entries (the options above win).",
                ),
            ),
            model_kinds=("onnx",),
            requires=("onnxruntime",),
            install_hint="pip install onnxruntime",
            title="ONNX Runtime",
            mark_options=("onnx_outputs",),  # the core's --onnx-outputs, which this backend honours
            reads=("onnxrt_custom_ops", "onnxrt_session_options"),  # `run` never writes over them
        )
    )
