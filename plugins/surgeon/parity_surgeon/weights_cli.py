"""``parity surgeon prune``, ``weight-strip`` and ``weight-reconstruct`` (Polygraphy 0.53.6's subtools of those
names, with its flags). Heavy imports happen inside the callbacks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from parity.api import SETTINGS, ModelError, UsageError, echo, onnx_external, onnx_models, refuse_overwrite, warn
from parity.commands import ParityCommand, external_data_options, onnx_load_options, verbosity_options, with_params


def _open(model: str, output: str, params: dict[str, Any]) -> tuple[Any, Any, Any, list[Path]]:
    """The surgeon commands' shared reading half (refusals, lazy load), then :func:`_complete_output_shapes`."""
    # here, not at the top: the commands' --help imports this module and never needs these
    from parity_surgeon.cli import _open_lazy

    proto, base, external, sources = _open_lazy(model, output, params)  # --fp-to-fp16 converted there, first
    _complete_output_shapes(proto)
    return proto, base, external, sources


def _fp16() -> Any:
    """Polygraphy's --fp-to-fp16 of its model loading (a fresh option for each command)."""
    return with_params(*onnx_load_options(shape_inference=False))


def _complete_output_shapes(proto: Any) -> None:
    """Give each graph output without a shape the one ONNX shape inference finds, in place (on the loaded
    copy): the full checker every written model passes refuses a tensor output with no shape at all. One note
    names what was added; an output inference cannot tell stays as it is (and the checker then says so)."""
    missing = [o for o in proto.graph.output if o.type.HasField("tensor_type") and not o.type.tensor_type.HasField("shape")]
    if not missing:
        return
    # here, not at the top: the commands' --help imports this module and never needs these
    from parity_surgeon import graph as g

    inferred, _ = g.infer_shapes(proto, data_prop=False)
    found = {o.name: o for o in inferred.graph.output if o.type.tensor_type.HasField("shape")}
    found.update({v.name: v for v in inferred.graph.value_info if v.type.HasField("tensor_type") and v.type.tensor_type.HasField("shape")})
    added = []
    for out in missing:
        if out.name in found:
            out.type.tensor_type.shape.CopyFrom(found[out.name].type.tensor_type.shape)
            added.append(out.name)
    if added:
        echo(f"parity: note: wrote the inferred shapes of outputs {', '.join(added)} (the ONNX checker needs them)", err=True)


def _wrote(saved: Any) -> str:
    # here, not at the top: the commands' --help imports this module and never needs these
    from parity_surgeon.cli import _wrote as wrote

    return wrote(saved)


def _done(report: Any, saved: Any) -> int:
    for line in report.warnings():
        warn(line)
    for line in report.lines():
        echo(line)
    echo(_wrote(saved))
    return 0


# --- surgeon prune ----------------------------------------------------------------------------------


@click.command("prune", cls=ParityCommand, short_help="Prune weights to 2:4 structured sparsity (for functional tests).")
@click.argument("model")
@click.option("-o", "--output", required=True, type=click.Path(), help="Where to write the pruned model.")
@_fp16()
@external_data_options(ignore=True)
@verbosity_options
def prune_cmd(model: str, output: str, **params: Any) -> int:
    """Prune the weights of MODEL to 2:4 structured sparsity and write the result to -o OUTPUT.

    \b
      parity surgeon prune model.onnx -o pruned.onnx
    In every group of 4 values along the reduction axis of each MatMul, Gemm and Conv weight (float32,
    float16 or bfloat16, that axis a multiple of 4), the 2 smallest magnitudes become zero: the pattern
    TensorRT's sparse kernels need. Accuracy is not preserved: use it to test sparsity, not to ship a model.
    """
    # here, not at the top: the commands' --help imports this module and never needs these
    from parity_surgeon import graph as g
    from parity_surgeon import sparsity

    proto, base, external, sources = _open(model, output, params)
    result, report = sparsity.prune_model(proto, base_dir=base)
    saved = g.save(result, output, model, "the pruned model", base_dir=base, external=external, source_data=sources)
    if SETTINGS.get("verbose"):
        for line in report.skipped:
            echo(f"parity: not pruned: {line}", err=True)
    echo(f"pruned {len(report.eligible)} weight(s) to 2:4 sparsity; {len(report.skipped)} candidate(s) left as they were (-v says why)")
    echo(_wrote(saved))
    return 0


# --- surgeon weight-strip ---------------------------------------------------------------------------


def _read_exclude_list(path: str | None) -> set[str]:
    if path is None:
        return set()
    try:
        with open(path, encoding="utf-8") as handle:
            return {line.rstrip("\r\n").rstrip() for line in handle} - {""}
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--exclude-list: cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None


def _check_refilled(model: Any, base_dir: Any, what: str) -> None:
    """A stripped model fails the ONNX checker by design (its weights hold no values); check instead that it is
    a valid model once its weights are back: a copy with zeros in them passes the full checker and loads in
    onnxruntime. Raises ModelError (exit 3) otherwise."""
    # here, not at the top: the commands' --help imports this module and never needs these
    import onnx

    from parity_surgeon import weights

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    external = []
    for tensor in copy.graph.initializer:
        if weights.is_stripped(tensor) and not onnx_external.is_external(tensor):
            try:
                tensor.raw_data = bytes(_raw_size(tensor))  # zeros
            except ValueError as exc:
                raise ModelError(f"{what}: weight '{tensor.name}': {exc}") from None
        elif onnx_external.is_external(tensor):
            external.append(tensor.name)
    onnx_external.load_values(copy, external, base_dir)
    if copy.ByteSize() > onnx_external.PROTOBUF_LIMIT - (64 << 20):
        raise ModelError(f"{what}: too big to check with its weights refilled in memory (over 2 GiB); not written")
    onnx_models.validate(copy, f"{what} (with its weights refilled)", missing_kernels_ok=True)


def _raw_size(tensor: Any) -> int:
    # here, not at the top: the commands' --help imports this module and never needs these
    import numpy as np
    import onnx

    count = int(np.prod(tensor.dims, dtype=np.int64))
    if tensor.data_type == onnx.TensorProto.BFLOAT16:
        return 2 * count
    try:
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type))
    except Exception:
        raise ValueError(f"element type {tensor.data_type} has no fixed size") from None
    bits = {onnx.TensorProto.INT4: 4, onnx.TensorProto.UINT4: 4}.get(tensor.data_type, dtype.itemsize * 8)
    return (count * bits + 7) // 8


@click.command("weight-strip", cls=ParityCommand, short_help="Write the model with its weights stripped (TensorRT refit).")
@click.argument("model")
@click.option("-o", "--output", required=True, type=click.Path(), help="Where to write the weightless model.")
@click.option("--exclude-list", type=click.Path(), default=None, help="Text file naming initializers to keep, one a line.")
@_fp16()
@external_data_options(ignore=True)
@verbosity_options
def weight_strip_cmd(model: str, output: str, exclude_list: str | None, **params: Any) -> int:
    """Strip the weights of MODEL: write -o OUTPUT with the values of its weights removed and marked.

    \b
      parity surgeon weight-strip model.onnx -o weightless.onnx
      parity surgeon weight-strip model.onnx -o weightless.onnx --exclude-list keep.txt
    Each stripped weight keeps its name, type and shape, and its doc_string becomes TRT_WEIGHTLESS/
    (TRT_WEIGHTLESS/SPARSE_2_4 when it was 2:4 sparse); the model's doc_string gets TRT_WEIGHTLESS: the
    markers TensorRT reads to build a weightless engine to refit later (and that weight-reconstruct reads).
    Stripped: the weights of Conv, ConvTranspose, Gemm and MatMul, of Gather and Slice from 1024 elements,
    input 0 of a QuantizeLinear or Transpose that feeds those ops, and plugin inputs from 1024 elements;
    uint8 weights stay. Constant-fold the model first (sanitize --fold-constants) so every weight is found.
    The output fails the ONNX checker by design; it is written only once a copy with its weights refilled
    passes the full checker and loads in onnxruntime.
    """
    # here, not at the top: the commands' --help imports this module and never needs these
    from parity_surgeon import weights

    excluded = _read_exclude_list(exclude_list)
    proto, base, external, sources = _open(model, output, params)
    result, report = weights.strip_weights(proto, excluded, base_dir=base)
    what = "the weightless model"
    _check_refilled(result, base, what)
    # the same refusals as every surgeon writer (parity_surgeon.graph.save), without its validation: the model was
    # validated above with its weights refilled, and as written it fails the checker by design
    refuse_overwrite(
        {"the input model": model, "the input model's external data": sources},
        output,
        **{"the output's data file": onnx_external.planned_data_files(result, output, external)},
    )
    saved = onnx_external.save_model(result, output, base_dir=base, external=external, what=what, validate=False)
    return _done(report, saved)


# --- surgeon weight-reconstruct ---------------------------------------------------------------------


@click.command("weight-reconstruct", cls=ParityCommand, short_help="Fill stripped weights with random values.")
@click.argument("model")
@click.option("-o", "--output", required=True, type=click.Path(), help="Where to write the reconstructed model.")
@click.option("--seed", type=int, default=None, help="Seed of the random values (the same weights each run); default: fresh ones.")
@_fp16()
@external_data_options(ignore=True)
@verbosity_options
def weight_reconstruct_cmd(model: str, output: str, seed: int | None, **params: Any) -> int:
    """Fill the weights of a weight-stripped MODEL with random values and write -o OUTPUT.

    \b
      parity surgeon weight-reconstruct weightless.onnx -o proxy.onnx --seed 0
    Each weight marked TRT_WEIGHTLESS gets standard-normal values of its type and shape; those marked
    SPARSE_2_4 are then pruned to 2:4 sparsity, as the stripped weights were. The markers are removed.
    For functional and performance tests of a model whose real weights are elsewhere; not for accuracy.
    """
    # here, not at the top: the commands' --help imports this module and never needs these
    from parity_surgeon import graph as g
    from parity_surgeon import weights

    fp_to_fp16 = params.pop("fp_to_fp16", False)  # after the weights are back: a stripped weight has nothing to convert
    proto, base, external, sources = _open(model, output, params)
    if not any(weights.is_stripped(t) for t in proto.graph.initializer):
        raise UsageError(f"{model}: no weight is marked {weights.WEIGHTLESS}: not a weight-stripped model (make one with parity surgeon weight-strip)")
    try:
        result, report = weights.reconstruct_weights(proto, seed)
    except ValueError as exc:
        raise ModelError(f"{model}: {exc}") from None
    if fp_to_fp16:
        from parity_surgeon.cli import _as_read  # here, as above

        result = _as_read(result, base, {"fp_to_fp16": True})
    saved = g.save(result, output, model, "the reconstructed model", base_dir=base, external=external, source_data=sources)
    return _done(report, saved)
