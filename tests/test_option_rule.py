"""The option rule (docs/cli.md): every option given takes effect or is refused, exit 2, in one line naming it.

``test_every_option_is_consumed_or_refused`` walks the whole command tree (first-party and contrib plugins
installed) and, for every option of every command, either gives it where its owner (a backend, metric,
executor, converter, generated inputs) is out of use and sees it refused, or finds it in :data:`ALWAYS`,
which says why the command always reads it. A new option that is neither fails the test.
"""

from __future__ import annotations

from pathlib import Path

import click
import numpy as np
import pytest

from parity.cli.owners import CONDITIONS, owners_of

TINY = Path(__file__).resolve().parents[1] / "examples" / "models" / "tiny_cnn.onnx"

# Options every command that has them reads, whatever else is given: flag -> why.
ALWAYS = {
    # everywhere
    "--help": "click's help", "--verbose": "output detail", "--quiet": "output detail", "--silent": "output detail",
    "--verbosity": "output detail", "--version": "the root's version", "--plugin": "loads a plugin before the tree is built",
    # runs
    "--model-type": "how the model is read (every runner and the data)", "--external-data-dir": "where the model's weights are read (checked against the model kind)",
    "--data-loader-script": "the feeds",
    "--load-inputs": "the feeds", "--save-inputs": "written from the feeds", "--compare-func": "the metrics", "--fail-fast": "the run loop",
    "--check-average": "the verdict (refused with a metric that cannot average)", "--validate": "NaN/Inf check of every runner's outputs",
    "--load-outputs": "golden outputs compared", "--save-outputs": "written from the outputs", "--report": "the JSON report",
    "--save-heatmaps": "pictures of every compared pair", "--show-heatmaps": "pictures of every compared pair",
    "--save-error-metrics-plot": "pictures of every compared pair", "--show-error-metrics-plot": "pictures of every compared pair",
    "--save-report-html": "the HTML report", "--save-model-explorer": "node data (refused for a model that is not ONNX)",
    # convert
    "--output": "where the result goes", "--convert-to": "picks the converter", "--save-external-data": "writing flag (refused for a non-ONNX output)",
    "--external-data-size-threshold": "writing flag (refused without --save-external-data)",
    "--no-save-all-tensors-to-one-file": "writing flag (refused without --save-external-data)",
    "--tactics-mechanism": "tactic option: owned by the TensorRT runner in run/convert (tagged); debug build's own",
    # debug engine (every debug command runs checks)
    "--fail-code": "the check's verdict", "--ignore-fail-code": "the check's verdict", "--fail-regex": "the check's verdict",
    "--check-timeout": "the check", "--show-output": "the check's output", "--hide-fail-output": "the check's output",
    "--artifacts": "sorted after each check", "--artifacts-dir": "where artifacts go", "--iter-artifact": "the file each check reads",
    "--no-remove-intermediate": "the iteration's files", "--iteration-info": "written for each check", "--state": "resuming",
    "--no-resume": "resuming", "--jobs": "checks in flight (every executor)", "--executor": "picks the executor", "--check": "the check command",
    "--until": "how many repeats",
    # debug reduce / precision / localize
    "--min-good": "reduce", "--mode": "the search", "--model-input-shapes": "the generated inputs' shapes (reduce/precision)",
    "--max-checks": "reduce", "--max-time": "reduce", "--no-reduce-inputs": "reduce", "--no-reduce-outputs": "reduce", "--cut-tensors": "reduce",
    "--iter-expected": "reduce with --reference-model (the command refuses it without one)",
    "--iter-inputs": "reduce", "--repro": "reduce", "--no-repro": "reduce", "--save-nodes": "precision", "--precision": "precision",
    "--direction": "precision's search (Polygraphy's prefix/suffix)", "--fp16": "precision: -p float16 (run/convert: TensorRT's, tagged)",
    "--int8": "precision refuses it in one line (run/convert: TensorRT's, tagged)", "--tf32": "precision refuses it in one line (run/convert: TensorRT's, tagged)",
    "--clamp-out-of-range": "precision (in convert: the onnx converter's, tagged)", "--reference-model": "localize", "--memory-budget": "localize",
    "--isolate": "localize", "--all-tensors": "localize", "--extract-to": "localize",
    "--onnx-outputs": "localize marks these tensors itself (run: tagged, read by the backends that declare it)",
    "--onnx-exclude-outputs": "localize marks these tensors itself (run: needs --onnx-outputs)",
    # inspect, data, surgeon, plugins
    "--show": "what inspect shows", "--json": "output format", "--trt-network-func": "inspect trt-network's script (run: TensorRT's, inspect model: the script kind's)",
    "--ignore-external-data": "inspect/lint read the structure only", "--show-values": "inspect data", "--all": "plugins/inspect",
    "--histogram": "inspect data", "--num-items": "inspect data (refused without --show-values)",
    "--line-width": "inspect data (refused without --show-values)", "--display-as": "inspect model (refused for a model that is not ONNX)",
    "--list-unbounded-dds": "inspect model (refused for a model that is not ONNX)", "--shape-inference": "inspect model (refused without --list-unbounded-dds)",
    "--hook": "plugins", "--requirements": "plugins", "--dir": "diff-tactics", "--good": "diff-tactics",
    "--bad": "diff-tactics", "--top": "diff-tactics", "--no-onnxruntime": "lint", "--inputs": "surgeon's tensors", "--outputs": "surgeon's tensors",
    "--op": "insert", "--name": "insert", "--attrs": "insert", "--domain": "insert", "--fold-constants": "sanitize", "--cleanup": "sanitize",
    "--toposort": "sanitize", "--override-input-shapes": "sanitize", "--fold-size-threshold": "sanitize", "--num-passes": "sanitize",
    "--no-fold-shapes": "sanitize", "--no-shape-inference": "sanitize", "--input-shapes": "debug build's default profile (run/convert: tagged)",
    "--partitioning": "sanitize (refused without --fold-constants)", "--no-per-pass-shape-inference": "sanitize (refused without --fold-constants)",
    "--no-onnxruntime-shape-inference": "sanitize's shape inference", "--force-fallback-shape-inference": "sanitize/extract's shapes",
    "--set-unbounded-dds-upper-bound": "sanitize",
    "--exclude-list": "weight-strip", "--seed": "weight-reconstruct's random weights (elsewhere --seed belongs to the generated inputs)",
    "--fp-to-fp16": "surgeon prune/weight-strip/weight-reconstruct convert the model (convert: the onnx converter's)",
    # Polygraphy's flags (issue 29)
    "--log-file": "every command's output is copied there", "--log-format": "every line written to --log-file",
    "--format": "inspect's layout (parity or polygraphy)", "--save-debug-replay": "the debug loop's verdicts",
    "--load-debug-replay": "the debug loop's verdicts (refused for another command's or model's replay)",
    "--visual": "inspect model serves the page (refused for a model that is not ONNX)",
    "--save-visual": "inspect model writes the page (refused for a model that is not ONNX)",
    "--visual-port": "inspect model --visual (refused without it)",
    "--exclude-outputs": "sanitize's outputs", "--outputs-by-type": "sanitize's outputs",
    "--warm-up": "run's loop, every runner", "--use-subprocess": "run's loop, every runner", "--sequential-runners": "run's loop (its only mode)",
    "--gen-script": "run writes the script instead of running", "--save-onnx": "run writes the model the runners load (refused without an ONNX model)",
    "--save-input-blob": "written from the feeds", "--onnx-outputs-by-type": "marking (run: refused without a runner that marks; convert: the marked model)",
    "--save-accuracy-results": "written from the metrics' values", "--no-shape-check": "every metric (refused when nothing is compared)",
    "--postprocess": "every compared output (refused when nothing is compared)",
    "--postprocess-func-script": "every compared output (refused when nothing is compared)",
    "--compare-func-script": "replaces the metrics (refused with --compare-func or a metric's option)",
    "--tf": "TensorFlow: refused in one line", "--tftrt": "TensorFlow: refused in one line", "--ckpt": "TensorFlow: refused in one line",
    "--freeze-graph": "TensorFlow: refused in one line", "--opset": "TensorFlow-to-ONNX: refused in one line",
    "--tf-outputs": "TensorFlow: refused in one line", "--save-pb": "TensorFlow: refused in one line",
    "--save-tensorboard": "TensorFlow: refused in one line", "--save-timeline": "TensorFlow: refused in one line",
    "--gpu-memory-fraction": "TensorFlow: refused in one line", "--allow-growth": "TensorFlow: refused in one line",
    "--xla": "TensorFlow: refused in one line", "--dynamic-op": "TensorFlow: refused in one line",
    "--minimum-segment-size": "TensorFlow: refused in one line",
    "--save-timing-cache": "inspect model refuses it in one line (it builds no engine; run/convert/debug: TensorRT's, tagged)",
}  # fmt: skip

# inspect model's TensorRT network options: read when the model is shown as a TensorRT network, refused otherwise.
INSPECT_NETWORK = {
    "--all-tensor-datatypes", "--all-tensor-formats", "--decomposable-attentions", "--enable-uint8-asymmetric-quantization-dla",
    "--layer-precisions", "--mark-debug", "--mark-unfused-tensors-as-debug-tensors", "--onnx-flags", "--plugin-instancenorm",
    "--plugins", "--strongly-typed", "--tensor-datatypes", "--tensor-formats", "--trt-network-postprocess-script",
    "--load-runtime", "--dla-workspace-allocation-strategy",
}  # fmt: skip
ALWAYS.update(dict.fromkeys(INSPECT_NETWORK - set(ALWAYS), "inspect model as a TensorRT network or engine (refused for other models)"))

# Commands whose backend-specific options are the command itself (no backend flag to choose): every option of
# the TensorRT builder is read by `debug build`.
COMMAND_OWNS = {
    "debug build": "rebuilds TensorRT engines: every builder and tactic option is its own",
    "check accuracy": "re-checks saved metrics: every metric option is its own (those that cannot act on saved numbers refuse)",
    "inspect capability": "one TensorRT parser query",
    "debug precision": "builds each candidate into a TensorRT engine when a builder option is given: every builder option is read",
    "template trt-network": "writes a script that applies every network option given",
    "template trt-config": "writes a script that applies every builder option given",
    "template onnx-gs": "writes a script that applies every loading option given",
    "template shard-hints": "every hint option is written into the hints",
    "multi-device shard": "every hint option shards the model",
    **{f"plugin {name}": "Polygraphy's plugin tool: every option is its own (data-loader flags refused)" for name in ("list", "match", "replace", "autotune")},
}


def _commands():
    from parity.cli import build_cli

    cli = build_cli()
    found = []

    def walk(group, path, ctx):
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            full = f"{path} {name}".strip()
            if isinstance(command, click.Group):
                walk(command, full, ctx)
            else:
                found.append((full, command))

    with click.Context(cli) as ctx:
        walk(cli, "", ctx)
    return cli, found


def _value(option: click.Option) -> list[str]:
    """A value click accepts for ``option`` (nothing for a flag)."""
    if option.is_flag or option.count:
        return []
    kind = option.type
    if isinstance(kind, click.Choice):
        return [str(kind.choices[0])]
    if isinstance(kind, click.IntRange):
        return [str((kind.min or 0) + 1)]
    if isinstance(kind, click.FloatRange):
        low = kind.min or 0
        return [str(low + 0.5 if kind.max is None or kind.max > low + 0.5 else low)]
    if isinstance(kind, click.types.IntParamType):
        return ["1"]
    if isinstance(kind, click.types.FloatParamType):
        return ["0.5"]
    return ["x:1" if option.name in ("atol", "rtol") else "1"]


def _long(option: click.Option) -> str:
    return max(option.opts, key=lambda o: o.startswith("--"))


def _base(path: str, command: click.Command, tmp: Path) -> tuple[list[str], list[str]]:
    """The arguments a command needs to parse (model, required options) and what goes last (``--check``)."""
    args: list[str] = []
    for param in command.params:
        if isinstance(param, click.Argument):
            args.append(str(TINY) if param.name in ("model", "models") else str(tmp / "arg"))
        elif isinstance(param, click.Option) and param.required:
            args += [param.opts[0], str(tmp / "out.onnx") if param.name == "output" else "1"]
    tail = ["--check", "true"] if any(p.name == "check" for p in command.params) else []
    return args, tail


def _out_of_use(path: str, command: click.Command, option: click.Option, tmp: Path) -> list[str] | None:
    """Arguments that put every owner of ``option`` out of use on ``command``; None if none can."""
    from parity.plugins import get_registry

    registry = get_registry()
    owners = owners_of(option)
    kinds = {kind for kind, _ in owners}
    owned = {name for _, name in owners}
    flags = {p.backend: p.opts[0] for p in command.params if getattr(p, "backend", None)}
    extra: list[str] = []
    if flags:  # runners that do not read it (two of them when a metric is at stake: a comparison happens)
        free = [b for b in flags if b not in owned and not registry.backends[b].reads_option(option.name or "")]
        if not free:
            return None
        extra += [flags[free[0]]] * (2 if "metric" in kinds or not owners else 1)
    if path == "convert":
        other = next((c for c in registry.converters.values() if c.name not in owned), None)
        if other is None:
            return None
        extra += ["--convert-to", other.name]
    elif "converter" in kinds:
        return None
    if "metric" in kinds:
        extra += ["--compare-func", next(m for m in registry.comparators if m not in owned)]
    if "executor" in kinds:
        extra += ["--executor", next(e for e in registry.executors if e not in owned)]
    if "data" in kinds or option.name in ("iterations", "data_loader"):  # a loaded file gives its own feeds
        extra += ["--load-inputs", str(tmp / "in.npz")]
    if "backend" in kinds and not flags and path != "convert":
        return None  # the command has no runner to choose: its backend options are its own
    return extra


def test_every_option_is_consumed_or_refused(main, tmp_path):
    np.savez(tmp_path / "in.npz", x=np.zeros((1, 3, 16, 16), np.float32))
    _, commands = _commands()
    refused, unexplained, tried = [], [], 0
    for path, command in commands:
        base, tail = _base(path, command, tmp_path)
        for option in command.params:
            if not isinstance(option, click.Option) or getattr(option, "backend", None):
                continue  # backend flags choose runners: they are the owners
            flag = _long(option)
            consumed = set(getattr(command, "parity_consumes", ()))
            if not owners_of(option) and option.name not in CONDITIONS or option.name in consumed:
                if flag not in ALWAYS and path not in COMMAND_OWNS:
                    unexplained.append(f"{path} {flag}")
                continue
            extra = _out_of_use(path, command, option, tmp_path)
            if extra is None:
                continue  # its owner is all this command can choose: always in use
            tried += 1
            code, _out, err = main(*path.split(), *base, *extra, option.opts[0], *_value(option), *tail)
            lines = [line for line in err.splitlines() if line.startswith("parity: error:")]
            if code != 2 or len(lines) != 1 or option.opts[0] not in lines[0] and flag not in lines[0]:
                refused.append(f"parity {path} ... {option.opts[0]}: exit {code}, {err.strip()[-200:]!r}")
    assert not unexplained, f"options neither owned nor listed in ALWAYS (say why the command always reads them): {unexplained}"
    assert not refused, "\n".join(refused)
    assert tried > 60  # run's backend, metric and data options, convert's, the debug commands' executor options


@pytest.mark.parametrize(
    "args, message",
    [
        (["--onnxrt", "--fp16"], "--fp16 applies to a TensorRT runner (--trt); this command has none"),
        (["--onnxrt", "--trt-outputs", "mark", "all"], "--trt-outputs applies to a TensorRT runner (--trt)"),
        (["--onnxrt", "--pool-limit", "workspace:1M"], "--pool-limit applies to a TensorRT runner (--trt)"),
        (["--onnxrt", "--onnxrt", "--top-k", "3"], "--top-k applies to the indices metric (--compare-func indices); it compares with simple"),
        (["--onnxrt", "--onnxrt", "--compare-func", "indices", "--atol", "1e-3"], "--atol applies to the simple metric"),
        (["--onnxrt", "--atol", "1e-3"], "--atol applies to the simple metric (--compare-func simple); this command compares nothing"),
        (["--onnxrt", "--onnxrt=fp16=1"], "--onnxrt: setting 'fp16' applies to a TensorRT runner (--trt), not to an ONNX Runtime runner"),
        (["--onnxrt", "--onnxrt", "--error-quantile", "0.5"], "--error-quantile applies to --check-error-stat quantile"),
        (["--onnxrt", "--onnx-exclude-outputs", "relu"], "--onnx-exclude-outputs applies to outputs marked with --onnx-outputs"),
        # the message names onnx-ref too where it is installed
        (["--trt", "--onnx-outputs", "mark", "all"], "ONNX Runtime runner (--onnxrt) or a Polygraphy plugin references runner (--pluginref); this command has none"),
        (["--load-outputs", "g.npz", "--seed", "3"], "--seed applies to generated inputs (--data-loader random); it runs no model"),
        (["--onnxrt", "--load-inputs", "in.npz", "--val-range", "[0,2]"], "--val-range applies to generated inputs (--data-loader random); it feeds --load-inputs"),
        (["--onnxrt", "--onnxrt", "--atol", "lgits:1e-3"], "--atol: no output 'lgits'; the model's outputs: probs"),
        (["--onnxrt", "--onnxrt", "--compare-func", "cosine", "--cosine-min", "prob:0.9"], "--cosine-min: no output 'prob' (did you mean 'probs'?)"),
        (["--onnxrt", "--onnxrt", "--check-error-stat", "prbs:max"], "--check-error-stat: no output 'prbs' (did you mean 'probs'?)"),
        # a tensor of the model that was not marked: known only when the outputs arrive
        (["--onnxrt", "--onnxrt", "--onnx-outputs", "relu", "--rtol", "conv:1e-2"], "--rtol: no output 'conv'; the compared outputs: relu"),
        (["--onnxrt", "--onnx-outputs", "mark", "all", "--onnx-exclude-outputs", "rleu"], "--onnx-exclude-outputs: the model has no tensor 'rleu' (did you mean"),
        (["--onnxrt", "--val-range", "xx:[0,1]"], "--val-range: the model has no input 'xx' (did you mean 'x'?)"),
        (["--onnxrt", "--load-inputs", "in.npz", "--iterations", "3"], "--iterations applies to inputs a data loader makes (--data-loader); --load-inputs"),
        (["--onnxrt", "--load-inputs", "in.npz", "--data-loader", "random"], "--data-loader applies to inputs a data loader makes"),
    ],
)
def test_run_refuses(main, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    code, _out, err = main("run", TINY, *args)
    lines = [line for line in err.splitlines() if line.startswith("parity: error:")]
    assert code == 2 and len(lines) == 1 and message in lines[0], err


@pytest.mark.parametrize(
    "args",
    [
        ["--onnxrt", "--onnxrt", "--compare-func", "indices", "--top-k", "2"],
        ["--onnxrt", "--onnxrt", "--check-error-stat", "quantile", "--error-quantile", "0.5"],
        ["--onnxrt", "--onnxrt", "--atol", "probs:1e-3", "--rtol", "1e-3", "--check-error-stat", "probs:max"],
        ["--onnxrt", "--onnxrt", "--onnx-outputs", "mark", "all", "--onnx-exclude-outputs", "relu", "--atol", "conv:1e-3"],
        ["--onnxrt", "--onnxrt=graph-optimization-level=disable", "--seed", "3", "--val-range", "[0,2]"],
        ["--onnxrt", "--onnxrt", "--compare-func", "simple", "cosine", "--cosine-min", "probs:0.9", "--atol", "1e-3"],
    ],
)
def test_run_consumes(main, args):
    code, _out, err = main("run", TINY, "--input-shapes", "x:[1,3,16,16]", *args)
    assert code == 0, err


def test_other_commands(main, tmp_path):
    code, _, err = main("convert", TINY, "-o", tmp_path / "m.onnx", "--fp-to-fp16", "--fp16")
    assert code == 2 and "--fp16 applies to the trt converter (--convert-to trt); it converts with onnx" in err
    code, _, err = main("convert", TINY, "-o", tmp_path / "m.onnx", "--fp-to-fp16", "--providers", "cpu")
    assert code == 2 and "--providers applies to an ONNX Runtime runner (--onnxrt)" in err
    code, _, err = main("debug", "repeat", "--until", "1", "--ray-address", "auto", "--check", "true")
    assert code == 2 and "--ray-address applies to the ray executor (--executor ray); it uses --executor local" in err
    code, _, err = main("debug", "reduce", TINY, "-o", tmp_path / "r.onnx", "--load-inputs", tmp_path / "in.npz", "--seed", "2", "--check", "true")
    assert code == 2 and "--seed applies to generated inputs" in err
    assert not (tmp_path / "m.onnx").exists() and not (tmp_path / "r.onnx").exists()
    code, _, err = main("inspect", "model", TINY, "--trt-network-func", "build")
    assert code == 2 and "--trt-network-func applies to a trt-network-script model (--model-type trt-network-script); the model is an onnx model" in err


@pytest.mark.parametrize(
    "args, message",
    [
        (["--atol", "rleu:1e-3"], "--atol: no output 'rleu' (did you mean 'relu'?); the model's tensors:"),
        (["--check-error-stat", "prbs:max"], "--check-error-stat: no output 'prbs' (did you mean 'probs'?)"),
        (["--onnx-outputs", "mark", "all", "--onnx-exclude-outputs", "rleu"], "--onnx-exclude-outputs: the model has no computed tensor 'rleu' (did you mean 'relu'?)"),
        (["--load-inputs", "in.npz", "--iterations", "2"], "--iterations applies to inputs a data loader makes"),
    ],
)
def test_localize_refuses_names(main, tmp_path, monkeypatch, args, message):
    """localize marks tensors itself: its per-tensor names are checked against every tensor of the model."""
    monkeypatch.chdir(tmp_path)
    np.savez(tmp_path / "in.npz", x=np.zeros((1, 3, 16, 16), np.float32))
    code, _out, err = main("debug", "localize", TINY, "--onnxrt", "--onnxrt", *args)
    lines = [line for line in err.splitlines() if line.startswith("parity: error:")]
    assert code == 2 and len(lines) == 1 and message in lines[0], err


def test_reduce_names_its_own_shapes_flag(main, tmp_path):
    code, _, err = main("debug", "reduce", TINY, "-o", tmp_path / "r.onnx", "--model-input-shapes", "xx:[1,3,16,16]", "--check", "true")
    assert code == 2 and "--model-input-shapes: the model has no input 'xx' (did you mean 'x'?)" in err, err
    assert not (tmp_path / "r.onnx").exists()


def test_golden_names(main, tmp_path, monkeypatch):
    """Without a model the names are checked against the first compared outputs (golden files only)."""
    monkeypatch.chdir(tmp_path)
    assert main("run", TINY, "--onnxrt", "--save-outputs", "g.npz")[0] == 0
    code, _, err = main("run", "--load-outputs", "g.npz", "g.npz", "--atol", "prbs:1e-3")
    assert code == 2 and "--atol: no output 'prbs' (did you mean 'probs'?); the compared outputs: probs" in err
    assert main("run", "--load-outputs", "g.npz", "g.npz", "--atol", "probs:1e-3")[0] == 0
