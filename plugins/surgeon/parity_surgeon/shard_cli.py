"""``parity template shard-hints`` and ``parity multi-device shard`` (see parity_surgeon.shard), with Polygraphy
0.53.6's flags. click only at import."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import click

from parity.api import GreedyOption, UsageError, echo, write_text_atomic
from parity.commands import ParityCommand, verbosity_options
from parity_surgeon import onnx_load, shard

HINT_FLAGS = {
    "parallelism": "--parallelism", "root": "--root", "gpus": "--gpus", "groups": "--groups", "cp_type": "--cp-type",
    "no_suggest_io": "--no-suggest-io", "i_idx": "--i-idx", "o_idx": "--o-idx", "k_idx": "--k-idx", "v_idx": "--v-idx",
    "i_rank": "--i-rank", "o_rank": "--o-rank", "kv_rank": "--kv-rank", "reduce_op": "--reduce-op", "q_shuffle": "--q-shuffle",
    "k_shuffle": "--k-shuffle", "v_shuffle": "--v-shuffle", "is_causal": "--is-causal", "nb_rank": "--nb-rank",
}  # fmt: skip


def _hint_options(func: Callable) -> Callable:
    params = [
        click.Option(["--parallelism"], type=click.Choice(["CP", "TP"]), default=None, help="CP (context parallel; the default). TP is refused."),
        click.Option(["--root"], type=int, default=None, help="Rank of the root process [-1]."),
        click.Option(["--gpus"], type=int, default=None, help="Participating GPUs, 0 for all [0] (the collectives' group_size)."),
        GreedyOption(["--groups"], type=int, metavar="N", help="NCCL group indices [all]."),
        click.Option(["--cp-type"], type=click.Choice(["native", "fused"]), default=None, help="native: gather K and V; fused: one Attention node [native]."),
        click.Option(["--no-suggest-io"], is_flag=True, help="Do not list the inputs and outputs the attention layers depend on."),
        click.Option(["--i-idx"], type=int, default=None, help="Sequence index of inputs without a sequence-named dim [0]."),
        click.Option(["--o-idx"], type=int, default=None, help="Sequence index of outputs [0]."),
        click.Option(["--k-idx"], type=int, default=None, help="Sequence index of K [0]."),
        click.Option(["--v-idx"], type=int, default=None, help="Sequence index of V [0]."),
        click.Option(["--i-rank"], type=int, default=None, help="Rank of inputs whose shape is unknown."),
        click.Option(["--o-rank"], type=int, default=None, help="Rank of outputs whose shape is unknown."),
        click.Option(["--kv-rank"], type=int, default=None, help="Rank of K and V when their shape is unknown."),
        click.Option(["--reduce-op"], type=click.Choice(["sum", "prod", "min", "max", "avg"]), default=None, help="reduce_op of the reduce_scatter collectives [max]."),
        click.Option(["--attention-pattern"], type=click.IntRange(0, 1), default=None, help="0: MatMul-Softmax-MatMul; 1: its scaled variant [0]."),
        GreedyOption(["--q-shuffle"], type=int, metavar="AXIS", help="Fused: transpose Q by this permutation first."),
        GreedyOption(["--k-shuffle"], type=int, metavar="AXIS", help="Fused: transpose K first."),
        GreedyOption(["--v-shuffle"], type=int, metavar="AXIS", help="Fused: transpose V first."),
        click.Option(["--is-causal"], is_flag=True, help="Fused: the attention is causal."),
        click.Option(["--nb-rank"], type=int, default=None, help="Number of ranks [1]."),
    ]  # fmt: skip
    func.__dict__.setdefault("__click_params__", []).extend(reversed(params))
    return func


def _check_shuffles(opts: dict[str, Any]) -> None:
    for key in ("q_shuffle", "k_shuffle", "v_shuffle"):
        if opts.get(key) and opts["cp_type"] != "fused":
            raise UsageError(f"{HINT_FLAGS[key]} applies with --cp-type fused")
    if opts.get("is_causal") and opts["cp_type"] != "fused":
        raise UsageError("--is-causal applies with --cp-type fused")


def _load_graph(model: str, params: dict[str, Any]) -> tuple[Any, Any, Any]:
    import onnx_graphsurgeon as gs  # here: the commands' --help never needs it

    proto, base = onnx_load.load_model(model, params)
    graph = gs.import_onnx(proto)
    for note in shard.unique_names(graph):
        echo(f"parity: note: {note}", err=True)
    return proto, base, graph


@click.command("shard-hints", cls=ParityCommand, short_help="Write the hints multi-device shard follows (attention layers, I/O).")
@click.argument("model")
@_hint_options
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None, help="Where to write the hints (JSON) [stdout].")
@verbosity_options
def shard_hints_cmd(model: str, output: str | None, attention_pattern: int | None, **params: Any) -> int:
    """Find the attention layers of MODEL and write the hints parity multi-device shard -s reads: each layer (its
    Q tensor), the graph inputs and outputs it depends on, with their sequence index and rank, and the settings
    of the collectives. Edit the file to shard fewer layers or change indices.

    \b
      parity template shard-hints model.onnx -o hints.json
      parity multi-device shard model.onnx -s hints.json -o sharded.onnx
    """
    opts = shard.settings({**params, "attention_pattern": attention_pattern})
    _check_shuffles(opts)
    _proto, _base, graph = _load_graph(model, params)
    hints = shard.build_hints(graph, opts)
    if not hints.attention_layers:
        echo(f"parity: warning: no attention layer of pattern {opts['attention_pattern']} in {model}", err=True)
    text = hints.to_json()
    if output is None:
        click.echo(text, nl=False)
    else:
        if os.path.exists(output) and os.path.samefile(model, output):
            raise UsageError(f"-o {output}: that is the input model")
        write_text_atomic(output, text)
        echo(f"{len(hints.attention_layers)} attention layer(s), {len(hints.inputs)} input(s), {len(hints.outputs)} output(s) to shard; wrote {output}", err=True)
    return 0


shard_hints_cmd.params[1:1] = onnx_load.read_options(input_shapes=False, shape_inference=False, outputs=False)


@click.command("shard", cls=ParityCommand, short_help="Shard an ONNX model's attention layers across devices (context parallel).")
@click.argument("model")
@click.option("-s", "--hint", type=click.Path(dir_okay=False), default=None, help="Hints file (parity template shard-hints).")
@click.option("--one-shot", is_flag=True, help="Make the hints from the model here (the hint flags), as shard-hints would.")
@_hint_options
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Where to write the sharded model.")
@onnx_load.write_options
@verbosity_options
def shard_cmd(model: str, hint: str | None, one_shot: bool, output: str, attention_pattern: int | None, **params: Any) -> int:
    """Shard MODEL context-parallel: split the sequence of the hinted inputs across ranks (reduce_scatter), gather
    each hinted attention layer's K and V (all_gather), or make it one fused Attention node, and gather the hinted
    outputs back. Collectives are DistCollective nodes for TensorRT (domain trt).

    \b
      parity multi-device shard model.onnx -s hints.json -o sharded.onnx
      parity multi-device shard model.onnx --one-shot -o sharded.onnx
    """
    from parity.commands import external_data_from_params  # here: --help never needs the writing layer
    from parity_surgeon import graph as g

    if bool(hint) == one_shot:
        raise UsageError("give the hints: -s/--hint FILE or --one-shot (one of them)")
    given = [flag for key, flag in HINT_FLAGS.items() if params.get(key) not in (None, False, ())]
    if hint and given:
        raise UsageError(f"{given[0]} applies with --one-shot: with -s the hints file decides")
    if params.get("no_save_all_tensors_to_one_file") and (params.get("parallelism") == "TP"):
        raise UsageError("--no-save-all-tensors-to-one-file cannot be used with --parallelism TP")
    opts = shard.settings({**params, "attention_pattern": attention_pattern})
    _check_shuffles(opts)
    external = external_data_from_params(params)
    proto, base, graph = _load_graph(model, params)
    hints = shard.Hints.load(hint) if hint else shard.build_hints(graph, opts)
    if hints.parallelism != "CP":
        raise UsageError(f"--hint: parallelism {hints.parallelism}: Parity shards context-parallel (CP) only")
    counts = shard.Sharder(graph, hints).shard(opts["attention_pattern"])
    result = shard.export(graph, hints.dist_collectives.get("groups") or [], proto)
    echo(f"{counts['reduce_scatter']} reduce_scatter, {counts['all_gather']} all_gather, {counts['fused']} fused attention node(s)")
    saved = g.save(result, output, model, "the sharded model", base_dir=base, external=external)
    echo(f"wrote {saved.path}")
    return 0


shard_cmd.params[1:1] = onnx_load.read_options(input_shapes=False, outputs=False)
