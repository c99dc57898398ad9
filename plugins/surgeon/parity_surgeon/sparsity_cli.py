"""``parity inspect sparsity`` (Polygraphy 0.53.6's ``inspect sparsity``): which MatMul, Gemm and Conv weights of an
ONNX model follow TensorRT's 2:4 structured sparsity pattern. Heavy imports happen inside the callback."""

from __future__ import annotations

from typing import Any

import click

from parity.api import UsageError, check_model_path, echo, onnx_external, onnx_models
from parity.commands import ParityCommand, external_data_read_options, onnx_load_options, verbosity_options


@click.command("sparsity", cls=ParityCommand, short_help="Which weights follow the 2:4 structured sparsity pattern.")
@click.argument("model")
@verbosity_options
def sparsity_cmd(model: str, **params: Any) -> int:
    """Show, for each MatMul, Gemm and Conv weight of the ONNX MODEL, whether it is 2:4 sparse.

    \b
      parity inspect sparsity model.onnx
    A weight is 2:4 sparse when every group of 4 values along its reduction axis holds at least 2 zeros (what
    TensorRT's sparse kernels need; `parity surgeon prune` makes it so). Weights that cannot be (not float32,
    float16 or bfloat16, stripped, that axis not a multiple of 4) are listed with the reason. Exit 0: this
    inspects, it does not judge.
    """
    # here, not at the top: the command's --help imports this module and never needs these
    from parity_surgeon import graph as g
    from parity_surgeon import sparsity
    from parity_surgeon.cli import _as_read

    check_model_path(model)
    ignore = params.get("ignore_external_data")
    if ignore and params.get("external_data_dir"):
        raise UsageError("--external-data-dir and --ignore-external-data: give one (the second skips the data the first locates)")
    base = onnx_models.data_dir(model, params.get("external_data_dir"))
    proto = g.load(model, lazy=True, external_data_dir=base, ignore_external_data=bool(ignore))
    if ignore and params.get("fp_to_fp16") and onnx_external.has_external(proto):
        raise UsageError("--fp-to-fp16 converts the weights, which --ignore-external-data leaves unread")
    proto = _as_read(proto, base, params)
    report = sparsity.eligible(proto)
    by_name = {t.name: t for t in proto.graph.initializer}
    unread = {n for n in report.eligible if ignore and onnx_external.is_external(by_name[n])}  # --ignore-external-data: not read
    sparse = sparsity.sparse_weights(proto, base, skip=unread)
    counted = f"{len(report.eligible) - len(unread)} of them checked, " if unread else ""
    echo(f"{model}: {len(report.eligible)} weight(s) eligible for 2:4 sparsity, {counted}{len(sparse)} of them 2:4 sparse")
    for name, axis in report.eligible.items():
        tensor = by_name[name]
        verdict = "not read (--ignore-external-data)" if name in unread else "2:4 sparse" if name in sparse else "not 2:4 sparse"
        echo(f"  {name}: {_dtype_name(tensor.data_type)}{list(tensor.dims)}, axis {axis}: {verdict}")
    for line in report.skipped:
        echo(f"  skipped {line}")
    return 0


def _dtype_name(data_type: int) -> str:
    import onnx  # here: only once a model is read

    return onnx.TensorProto.DataType.Name(data_type).lower().replace("float", "float32", data_type == onnx.TensorProto.FLOAT)


# Polygraphy's loading flags: where the weights are read (or not), and --fp-to-fp16
for _param in [*external_data_read_options(ignore=True), *onnx_load_options(shape_inference=False)][::-1]:
    sparsity_cmd.params.insert(1, _param)
