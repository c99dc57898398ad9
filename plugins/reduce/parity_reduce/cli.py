"""``parity debug reduce`` and ``parity debug precision``. Heavy imports happen inside the commands."""

from __future__ import annotations

import contextlib
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import click
from parity_reports.api import report_file_options

from parity.api import (
    ExitCode,
    GreedyOption,
    ParityError,
    UsageError,
    check_model_path,
    command_line,
    did_you_mean,
    echo,
    file_fingerprint,
    get_registry,
    names_preview,
    onnx_external,
    onnx_models,
    parse_shapes,
    refuse_overwrite,
    subset_key,
    warn,
    write_debug_report,
    write_text_atomic,
)
from parity.commands import (
    ParityCommand,
    data_options,
    debug_options,
    external_data_from_params,
    external_data_read_options,
    external_data_write_options,
    group,
    no_onnxruntime_shape_inference_option,
    note_external_data,
    onnx_load_options,
    report_option,
    session_from_options,
    verbosity_options,
)
from parity_reduce.external import check_location

REDUCE_HELP = """Shrink a failing ONNX MODEL to a minimal subgraph that still fails the --check.

\b
  parity debug reduce model.onnx -o reduced.onnx --check parity run parity_debug.onnx --onnxrt=providers=cuda --onnxrt
  parity debug reduce model.onnx -o reduced.onnx --load-inputs in.npz \\
      --check parity run parity_debug.onnx --onnxrt --load-inputs parity_debug_inputs.npz --fail-fast

Each iteration writes the candidate to --iter-artifact (parity_debug.onnx) and, if the check names it,
its inputs (values from a reference run, per sample) to --iter-inputs (parity_debug_inputs.npz).
Tensors cut from their producers become inputs (or constants: --cut-tensors constant), so any subset
of nodes is a valid model. The default --mode dichotomic needs about log2(nodes) checks per culprit node;
--mode staged first reaches a failing region in no more checks than Polygraphy's bisect (with a check that
feeds known-good values, e.g. fp32 intermediates), then refines it within --max-checks/--max-time.
At the end a repro bundle (model, inputs, expected outputs, check command) is written to --repro.

With --reference-model fp32.onnx (an fp16 MODEL's original), each candidate is judged against the same
subgraph of the reference fed the same inputs: cut tensors get the reference's values (fp32 intermediates,
cast to MODEL's dtype) and --iter-expected the reference's values of the candidate's outputs, so the answer
is a node that introduces the error, not one that propagates it:

\b
  parity debug reduce fp16.onnx -o reduced.onnx --reference-model fp32.onnx --load-inputs in.npz \\
      --check parity run parity_debug.onnx --onnxrt --load-inputs parity_debug_inputs.npz \\
      --load-outputs parity_debug_expected.npz --atol 0.01 --rtol 0.01

A model with external data (past 2 GiB too) is read lazily: each check's candidate is its graph alone,
written in a private work folder beside --iter-artifact that holds the weights once for the whole run (a
reflink clone where the filesystem has them, else one copy). -o and --min-good get their weights only:
inside the model, or in <output>.data when one file would pass 2 GiB (or as --save-external-data says).
The repro bundle holds small weights, or refers to the original weights file."""

PRECISION_HELP = """Find a small set of nodes that must stay fp32 for MODEL to pass the --check in fp16.

\b
  parity debug precision model.onnx -o mixed.onnx --save-nodes fp32_nodes.json \\
      --check parity run parity_debug.onnx --onnxrt --load-inputs in.npz --load-outputs golden.npz --atol 1e-2

Precision is written into the ONNX model (Cast nodes around fp16 nodes), as strongly typed TensorRT 11
expects, so it works with any backend. The result is a set of nodes, not a prefix or suffix.

A model with external data (past 2 GiB too) is read lazily: lowered weights are converted once into a private
work folder beside --iter-artifact, which holds the original weights once for the whole run (a reflink clone
where the filesystem has them, else one copy); each check's candidate is its graph alone."""


def _modes(kind: str) -> list[str]:
    names = {name for name, spec in get_registry().strategies.items() if not spec.kinds or kind in spec.kinds}
    return sorted(names | ({"auto"} if kind == "reduce" else set()))  # auto: this command's choice, see _auto_mode


def add_commands(cli: click.Group) -> None:
    debug = group(cli, "debug")
    reduce_params = [
        click.Argument(["model"]),
        click.Option(["-o", "--output"], metavar="PATH", help="Where to write the minimal failing model (-o and/or --min-good, as Polygraphy)."),
        click.Option(["--min-good", "--minimal-good", "min_good"], metavar="PATH", help="Also write the largest passing model close to the result."),
        click.Option(
            ["--mode"],
            default="auto",
            show_default=True,
            help=f"Search strategy: {', '.join(_modes('reduce'))}. auto: staged, or dichotomic when the check reads --iter-inputs.",
        ),  # fmt: skip
        GreedyOption(
            ["--model-input-shapes", "--model-inputs", "model_input_shapes"],
            metavar="NAME:[D0,...]",
            help="Freeze input shapes first (dynamic dims), e.g. x:[1,3,224,224].",
        ),
        click.Option(["--max-checks"], type=click.IntRange(min=1), metavar="N", help="Stop after N checks in all (the original's included) with the best model so far."),
        click.Option(["--max-time"], type=click.FloatRange(min=0, min_open=True), metavar="SECONDS", help="Start no check after SECONDS; keep the best model so far."),
        click.Option(["--no-reduce-inputs"], is_flag=True, help="Keep the model's inputs: only remove nodes from the end."),
        click.Option(["--no-reduce-outputs"], is_flag=True, help="Keep the model's outputs: only remove nodes from the start."),
        click.Option(
            ["--cut-tensors"],
            type=click.Choice(["input", "constant"]),
            default="input",
            show_default=True,
            help="A tensor cut from its producer becomes a graph input, or a constant frozen to its reference value.",
        ),
        click.Option(
            ["--iter-inputs"],
            default="parity_debug_inputs.npz",
            show_default=True,
            metavar="PATH",
            help="Per-iteration inputs file (all samples, cut tensors included), written when the check names it.",
        ),
        click.Option(
            ["--reference-model"],
            metavar="PATH",
            help="Judge each candidate against the same subgraph of this model (e.g. the fp32 original of an fp16 MODEL): its cut tensors "
            "get the reference's values, and --iter-expected the reference's outputs. The check must read --iter-expected.",
        ),
        click.Option(
            ["--iter-expected"],
            default="parity_debug_expected.npz",
            show_default=True,
            metavar="PATH",
            help="Per-iteration expected outputs (Parity's results format, for --load-outputs), written when the check names it.",
        ),
        click.Option(["--no-shape-inference"], is_flag=True, help="Skip ONNX shape inference: cut tensors get their types from the reference (onnxruntime) run only."),
        click.Option(
            ["--force-fallback-shape-inference"], is_flag=True, help="I/O get the static shapes of an onnxruntime run, not ONNX shape inference's; exit 3 if it fails."
        ),
        click.Option(["--repro"], metavar="DIR", help="Repro bundle folder [<output>_repro]."),
        click.Option(["--no-repro"], is_flag=True, help="Do not write the repro bundle."),
        report_option("parity_reduce/schemas/reduce-report.schema.json"),
        *report_file_options(None),
        *data_options(),
        *external_data_read_options(ignore=True),  # --ignore-external-data: refused (candidates run with their weights)
        no_onnxruntime_shape_inference_option(),
        *onnx_load_options(shape_inference=False),  # --fp-to-fp16: the fp16 model is what is reduced
        *external_data_write_options(),
        *debug_options("parity_debug.onnx"),
    ]
    command = ParityCommand("reduce", params=reduce_params, callback=reduce_command, help=REDUCE_HELP, short_help="Shrink a failing model to a minimal failing subgraph.")
    debug.add_command(verbosity_options(command))
    precision_params = [
        click.Argument(["model"]),
        click.Option(["-o", "--output"], metavar="PATH", help="Where to write the mixed-precision model (without it, as Polygraphy: the nodes are printed only)."),
        click.Option(["--save-nodes"], metavar="PATH", help="Write the fp32 node names as JSON."),
        report_option("parity_reduce/schemas/precision-report.schema.json"),
        *report_file_options("1 for each node kept fp32, 0 for the other candidates"),
        click.Option(["--mode"], default="dichotomic", show_default=True, help=f"Search strategy: {', '.join(_modes('precision'))}."),
        click.Option(["--precision", "-p"], type=click.Choice(["float16", "bfloat16"]), default="float16", show_default=True, help="The lower precision."),
        click.Option(
            ["--direction", "--dir"],
            type=click.Choice(["forward", "reverse"]),
            help="Polygraphy's search: keep the first (forward) or last (reverse) k nodes fp32 and find the smallest k, "
            "with --mode bisect (the default then) or linear. Without it, any set of nodes.",
        ),
        click.Option(["--fp16"], is_flag=True, help="Polygraphy's flag: float16 as the lower precision (the default; -p float16)."),
        click.Option(["--int8"], is_flag=True, hidden=True),  # Polygraphy's builder flags: refused with the reason
        click.Option(["--tf32"], is_flag=True, hidden=True),
        click.Option(
            ["--clamp-out-of-range"],
            is_flag=True,
            help="As convert --fp-to-fp16: clamp weights beyond +-65504 instead of keeping them and their readers fp32 (they become search candidates).",
        ),
        GreedyOption(["--model-input-shapes"], metavar="NAME:[D0,...]", help="Input shapes for the generated inputs (dynamic dims), e.g. x:[1,3,224,224]."),
        *data_options(),
        click.Option(["--model-type"], default=None, help="The model's kind: only onnx applies."),
        *onnx_load_options(),  # --shape-inference applies; --fp-to-fp16 is refused (the search converts)
        *external_data_read_options(ignore=True),  # --ignore-external-data: refused (candidates run with their weights)
        *external_data_write_options(),
        *debug_options("parity_debug.onnx"),
    ]
    command = ParityCommand(
        "precision", params=precision_params, callback=precision_command, help=PRECISION_HELP, short_help="Find the nodes that must stay fp32 (strongly typed)."
    )
    debug.add_command(verbosity_options(command))


def _feeds(model: str, params: dict[str, Any], shapes: dict) -> list[dict]:
    from parity.api import make_data_loader  # here: `debug reduce --help` imports this module, not parity.from_options

    loader_params = dict(params)
    if shapes:  # named in the user's flag, before the loader words it as --input-shapes
        inputs = get_registry().model_kinds["onnx"].read_inputs(model)
        for name in shapes:
            if name not in inputs:
                raise UsageError(f"--model-input-shapes: the model has no input '{name}'{did_you_mean(name, inputs)}; inputs: {names_preview(inputs)}")
    if shapes and not loader_params.get("input_shapes"):
        loader_params["input_shapes"] = [f"{k}:[{','.join(map(str, v))}]" for k, v in shapes.items()]
    return list(make_data_loader(loader_params, model, "onnx", get_registry()))


def _check_writable(**paths: str | None) -> None:
    """Every file the command will write can be written: refused before the search, not after it."""
    from parity.api import check_output_path

    for option, path in paths.items():
        if path:
            check_output_path(path, "-o" if option == "output" else "--" + option.replace("_", "-"))


def _writing(params: dict[str, Any], *outputs: str | None) -> Any:
    """The --save-external-data flags (refused in one line before any work when they cannot apply)."""
    external = external_data_from_params(params)
    check_location(external, outputs)
    return external


def _refuse_data_overwrite(inputs: list[Path], external: Any, **outputs: str | None) -> None:
    """No data file an output may get (``<output>.data``, the --save-external-data name) is one of the input
    model's data files, or another output: checked once the model is read, before the first check."""
    labelled = {}
    for option, path in outputs.items():
        if path:  # <output>.data (asked without a name, or past 2 GiB) and the --save-external-data name
            target = Path(path)
            names = {f"{target.name}.data", *([external.location] if external.location else [])}
            labelled[f"{option}'s data file"] = [str(target.parent / name) for name in sorted(names)]
    refuse_overwrite({"the input model's external data": [str(p) for p in inputs]}, **labelled)


def _fingerprint(model: str, external_data_dir: str | None) -> dict[str, Any]:
    """What identifies the input for the state file: the model file, and its data files' size and time."""
    found: dict[str, Any] = {"model": file_fingerprint(model)}
    try:
        proto = onnx_models.load(model, load_external_data=False, ignore_external_data=True)
        folder = onnx_models.data_dir(model, external_data_dir)
        stats = {}
        for location in onnx_external.external_locations(proto):
            st = (Path(folder) / location).stat()
            stats[location] = f"{st.st_size}:{st.st_mtime_ns}"
        if stats:
            found["data"] = stats
    except (OSError, ParityError):
        pass
    return found


def _remove_stale(written: set[Path], kept: list[Path]) -> None:
    """Data files an earlier write of -o made (a larger model, in <output>.data) that the final -o lacks."""
    for path in written - set(kept):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _auto_mode(mode: str, iter_inputs: str | None) -> str:
    """``auto``: ``staged`` reaches a failing region in no more checks than Polygraphy's bisect, then refines; but
    when the check reads --iter-inputs (cut tensors carry the faulty model's own values), every node downstream
    of the fault fails alone and the region search would find a symptom, so ``dichotomic`` finds the origin."""
    if mode != "auto":
        return mode
    return "dichotomic" if iter_inputs else "staged"


def reduce_command(model: str, output: str | None = None, report: str | None = None, **params: Any) -> int:
    from parity_reduce.bundle import check_target, write_bundle
    from parity_reduce.reducer import Reducer

    started = time.perf_counter()
    if not output and not params.get("min_good"):
        raise UsageError("give -o PATH (the minimal failing model) and/or --min-good PATH (a passing model close to it)")
    check_model_path(model)
    external = _writing(params, output, params.get("min_good"))
    ext_dir = params.get("external_data_dir")
    # the repro bundle reproduces the failing model: named after -o; without -o only where --repro names it
    repro = None if params["no_repro"] else (params.get("repro") or (str(Path(output).with_suffix("")) + "_repro" if output else None))
    refuse_overwrite(
        {"the input model": model, "the --reference-model": params.get("reference_model"), "the --load-inputs file": params.get("load_inputs")},
        **{
            "-o": output,
            "--save-debug-replay": params.get("save_debug_replay"),
            "--min-good": params.get("min_good"),
            "--iter-artifact": params.get("iter_artifact"),
            "--save-inputs": params.get("save_inputs"),
            "--report": report,
            "--save-report-html": params.get("save_report_html"),
        },
    )
    _check_writable(output=output, min_good=params.get("min_good"), save_inputs=params.get("save_inputs"), report=report, save_report_html=params.get("save_report_html"))
    if repro:
        check_target(repro)  # before the search: an existing non-empty folder is refused, never replaced
    if params.get("mode") not in _modes("reduce"):
        raise UsageError(f"unknown --mode '{params.get('mode')}'; known: {', '.join(_modes('reduce'))}")
    shapes = parse_shapes(params.get("model_input_shapes") or (), "--model-input-shapes")
    feeds = _feeds(model, params, shapes)
    if params.get("save_inputs"):
        from parity.api import save_inputs

        save_inputs(feeds, params["save_inputs"])
    check = params.get("check") or []
    iter_inputs = params["iter_inputs"] if any(params["iter_inputs"] in tok for tok in check) else None
    iter_expected = params["iter_expected"] if any(params["iter_expected"] in tok for tok in check) else None
    reference_model = params.get("reference_model")
    if not reference_model and click.get_current_context().get_parameter_source("iter_expected") is click.core.ParameterSource.COMMANDLINE:
        raise UsageError("--iter-expected applies to --reference-model (the reference's outputs of each candidate); this command has none")
    if reference_model:
        check_model_path(reference_model)
        if not (iter_expected and iter_inputs):
            raise UsageError(
                f"--reference-model needs a --check that reads {params['iter_inputs']} and compares with {params['iter_expected']} (--iter-inputs, --iter-expected), "
                f"e.g. --check parity run {params['iter_artifact']} --onnxrt --load-inputs {params['iter_inputs']} --load-outputs {params['iter_expected']} --atol ..."
            )
    if params.get("no_shape_inference") and params.get("force_fallback_shape_inference"):
        raise UsageError("--no-shape-inference and --force-fallback-shape-inference exclude each other")
    if params.get("ignore_external_data"):
        raise UsageError("--ignore-external-data: each candidate runs, and writing it needs its weights; give --external-data-dir where they are")
    # reduce infers shapes with onnx.shape_inference (never onnxruntime's symbolic inference): the flag asks for that
    if params.get("no_onnxruntime_shape_inference") and params.get("force_fallback_shape_inference"):
        raise UsageError("--no-onnxruntime-shape-inference and --force-fallback-shape-inference (shapes from an onnxruntime run) exclude each other")
    shape_inference = "none" if params.get("no_shape_inference") else "fallback" if params.get("force_fallback_shape_inference") else "onnx"
    mode = _auto_mode(params["mode"], iter_inputs)
    session = session_from_options(params, label="reduce", fingerprint=_fingerprint(model, ext_dir))
    fields = {"name": "parity-reduce-report", "command": "debug reduce", "model": model, "started": started}
    reducer = None
    staged = tempfile.TemporaryDirectory(prefix="parity-reduce-")  # --fp-to-fp16: the converted model, reduced
    try:
        from parity.api import loaded_onnx  # here: `debug reduce --help` never needs it

        source, source_dir = loaded_onnx(model, {"fp_to_fp16": params.get("fp_to_fp16"), "external_data_dir": ext_dir}, staged.name, "debug reduce")
        reducer = Reducer(
            source,
            session=session,
            mode=mode,
            inputs=feeds,
            cut=params["cut_tensors"],
            input_shapes=shapes,
            reduce_inputs=not params["no_reduce_inputs"],
            reduce_outputs=not params["no_reduce_outputs"],
            iter_inputs=iter_inputs,
            warn=warn,
            max_checks=params.get("max_checks"),
            max_time=params.get("max_time"),
            save_best=output,  # each smaller failing model is written at once: stopping keeps the best so far
            external_data_dir=source_dir,
            external=external,
            reference_model=reference_model,
            iter_expected=iter_expected,
            shape_inference=shape_inference,
        )
        _refuse_data_overwrite(reducer.data_files, external, **{"-o": output, "--min-good": params.get("min_good")})
        total = len(reducer.index)
        result = reducer.run()
        if output:
            saved = result.save(output, external)
            _remove_stale(reducer.saved_data, saved.data_files)
            note_external_data(saved)
        min_good = None
        if params.get("min_good"):
            if result.min_good is None:
                warn("no passing candidate was checked; --min-good not written")
            else:
                note_external_data(result.save_min_good(params["min_good"], external))
                min_good = params["min_good"]
        echo(session.summary.line())
        echo(f"Minimum bad model: {len(result.nodes)} of {total} nodes" + (f" -> {output}" if output else " (not written: no -o)"))
        echo("  nodes: " + ", ".join(result.nodes[:20]) + (f", ... ({len(result.nodes) - 20} more)" if len(result.nodes) > 20 else ""))
        reproduces = None
        if repro:
            from parity_reduce.reducer import prove_bundle

            subs = {
                "polygraphy_debug.onnx": "model.onnx",
                params["iter_artifact"]: "model.onnx",
                "{artifact}": "model.onnx",
                params["iter_inputs"]: "inputs.npz",
                params["iter_expected"]: "expected.npz",
            }
            write_bundle(
                repro,
                result.model,
                result.nodes,
                result.inputs(),
                result.expected(),
                check or None,
                subs,
                model,
                result.checks,
                params.get("load_inputs") or (),
                base_dir=result.base_dir,
            )
            reproduces, why = prove_bundle(repro, session) if check else (None, "")
            if reproduces is not False:  # proven: its check.sh, run from another directory, fails as the original did
                echo(f"Repro bundle: {repro}" + ("" if check else " (not verified: no --check command)"))
            else:
                warn(f"the repro bundle in {repro} does not reproduce the failure ({why}); not announced as a repro")
    except ParityError as exc:
        if report:
            write_debug_report(report, session, exit_code=exc.exit_code, error=str(exc), **fields)
        raise
    finally:
        if reducer is not None:
            reducer.close()  # the candidates' work folder
        staged.cleanup()
    if report:
        key = subset_key(result.indices)
        found = {
            "mode": mode,
            "nodes": result.nodes,
            "node_count": len(result.nodes),
            "total_nodes": total,
            "key": key,
            "verified": session.known(key) == "bad",
            "stopped": result.stopped,
            "min_good": min_good,
            "repro": repro,
            "repro_verified": reproduces,
        }
        write_debug_report(report, session, exit_code=ExitCode.PASSED, output=output, result=found, **fields)
    if params.get("save_report_html"):
        from parity_reports.api import write_html_report  # only for --save-report-html: it loads numpy

        verified = session.known(subset_key(result.indices)) == "bad"
        caption = f"{len(result.nodes)} of {total} nodes still fail the check" + ("" if verified else " (not verified: the search stopped)")
        nodes = {"heading": "Nodes of the minimal failing model", "caption": caption, "nodes": result.nodes, "op_types": _op_types(model, ext_dir)}
        good_means = "bad: the candidate still fails the check as the original does; good: it passes."
        search = _search_data(session, "nodes in the candidate", total, len(result.nodes), good_means)
        facts = [["model", model], ["mode", mode], ["output", output], ["checks", session.summary.line()]]
        if result.stopped:
            facts.append(["stopped", str(result.stopped)])
        write_html_report(params["save_report_html"], _html_data("parity debug reduce", f"{len(result.nodes)} of {total} nodes", facts, nodes=nodes, search=search))
    return int(ExitCode.PASSED)


def _op_types(model: str, external_data_dir: str | None = None) -> dict[str, str]:
    proto = onnx_models.load(model, load_external_data=False, ignore_external_data=True)
    return {n.name: n.op_type for n in proto.graph.node if n.name}


def _search_data(session: Any, what: str, total: int, result: int, good_means: str) -> dict[str, Any]:
    """The HTML report's search history: every check the search used, in its serial order (the same for every
    --jobs), its candidate's size and verdict."""
    checks = [{"check": i, "size": r["size"], "verdict": r["verdict"], "label": r["label"], "resumed": r["resumed"]} for i, r in enumerate(session.consumed)]
    return {"what": what, "total": total, "result": result, "good_means": good_means, "checks": checks}


def _html_data(title: str, verdict: str, facts: list, **sections: Any) -> dict[str, Any]:
    return {"title": title, "passed": None, "verdict": verdict, "command": command_line(), "facts": facts, **sections}


def _precision_flags(params: dict[str, Any], engines: bool = False) -> None:
    """Polygraphy's precision flags: --fp16 is -p float16; --int8 and --tf32 (TensorRT builder flags, with
    per-layer precision TensorRT 11 no longer has) apply to the engines it builds (``engines``), else are refused;
    --direction picks Polygraphy's search (bisect by default)."""
    for flag in ("int8", "tf32"):
        if params.get(flag) and not engines:
            raise UsageError(
                f"--{flag}: debug precision writes precision into the ONNX model (TensorRT 11 is strongly typed, without per-layer "
                f"precision flags); search float16 or bfloat16 with -p, and give {'Q/DQ nodes' if flag == 'int8' else 'builder flags'} to the --check's build"
            )
    if params.get("fp16") and params["precision"] != "float16":
        raise UsageError(f"--fp16 contradicts -p {params['precision']}")
    source = click.get_current_context().get_parameter_source("mode")
    if params.get("direction") and source is not click.core.ParameterSource.COMMANDLINE:
        params["mode"] = "bisect"  # Polygraphy's default mode with its --direction


def precision_command(model: str, output: str | None = None, report: str | None = None, **params: Any) -> int:
    from parity_reduce.precision import PrecisionSearch, engine_options_for, loading_flags

    started = time.perf_counter()
    check_model_path(model)
    if not output and params.get("save_external_data") is not None:
        raise UsageError("--save-external-data applies to the model -o writes; give -o PATH")
    external = _writing(params, output)
    ext_dir = params.get("external_data_dir")
    refuse_overwrite(
        {"the input model": model, "the --load-inputs file": params.get("load_inputs")},
        **{
            "-o": output,
            "--save-debug-replay": params.get("save_debug_replay"),
            "--save-nodes": params.get("save_nodes"),
            "--iter-artifact": params.get("iter_artifact"),
            "--save-inputs": params.get("save_inputs"),
            "--report": report,
            "--save-report-html": params.get("save_report_html"),
            "--save-model-explorer": params.get("save_model_explorer"),
        },
    )
    _check_writable(
        output=output,
        save_nodes=params.get("save_nodes"),
        save_inputs=params.get("save_inputs"),
        report=report,
        save_report_html=params.get("save_report_html"),
        save_model_explorer=params.get("save_model_explorer"),
    )
    engine_options = engine_options_for(params, tuple(params.get("check") or ()))  # TensorRT builder flags: engines
    _precision_flags(params, engines=engine_options is not None)
    shape_inference = loading_flags(params)
    if params.get("mode") not in _modes("precision"):
        raise UsageError(f"unknown --mode '{params.get('mode')}'; known: {', '.join(_modes('precision'))}")
    if params.get("save_inputs"):  # the data options make the inputs the check reads, as in debug reduce
        from parity.api import save_inputs

        save_inputs(_feeds(model, params, parse_shapes(params.get("model_input_shapes") or (), "--model-input-shapes")), params["save_inputs"])
    session = session_from_options(params, label="precision", fingerprint=_fingerprint(model, ext_dir))
    fields = {"name": "parity-precision-report", "command": "debug precision", "model": model, "started": started}
    search = None
    try:
        search = PrecisionSearch(
            model,
            session=session,
            mode=params["mode"],
            low=params["precision"],
            keep_out_of_range=not params.get("clamp_out_of_range"),
            external_data_dir=ext_dir,
            direction=params.get("direction"),
            engine_options=engine_options,
            shape_inference=shape_inference,
        )
        _refuse_data_overwrite(search.data_files, external, **{"-o": output})
        result = search.run()
        if output:
            note_external_data(result.save(output, external))
        if params.get("save_nodes"):
            write_text_atomic(
                params["save_nodes"],
                json.dumps(
                    {
                        "format": "parity-precision-nodes",
                        "version": 1,
                        "fp32_nodes": result.fp32_nodes,
                        "low_precision": params["precision"],
                        "candidates": len(result.candidates),
                    },
                    indent=2,
                )
                + "\n",
            )
    except ParityError as exc:
        if report:
            write_debug_report(report, session, exit_code=exc.exit_code, error=str(exc), **fields)
        raise
    finally:
        if search is not None:
            search.close()  # the work folder: lowered weights, candidates
    echo(session.summary.line())
    written = f" -> {output}" if output else ""
    echo(f"{len(result.fp32_nodes)} of {len(result.candidates)} node(s) must stay fp32: {', '.join(result.fp32_nodes) or '(none)'}{written}")
    if report:
        position = {name: i for i, name in enumerate(result.candidates)}
        key = subset_key(position[n] for n in result.fp32_nodes)
        found = {
            "mode": params["mode"],
            "precision": params["precision"],
            "fp32_nodes": result.fp32_nodes,
            "candidates": len(result.candidates),
            "key": key,
            "verified": session.known(key) == "good",
            "save_nodes": params.get("save_nodes"),
        }
        write_debug_report(report, session, exit_code=ExitCode.PASSED, output=output, result=found, **fields)
    if params.get("save_report_html"):
        from parity_reports.api import write_html_report  # only for --save-report-html: it loads numpy

        precision = {"fp32_nodes": result.fp32_nodes, "op_types": _op_types(model, ext_dir), "candidates": len(result.candidates), "low": params["precision"]}
        good_means = f"good: the check passes with these nodes in fp32 and the others in {params['precision']}; bad: it fails."
        search = _search_data(session, "nodes kept fp32", len(result.candidates), len(result.fp32_nodes), good_means)
        facts = [["model", model], ["mode", params["mode"]], ["lower precision", params["precision"]], ["output", output], ["checks", session.summary.line()]]
        verdict = f"{len(result.fp32_nodes)} of {len(result.candidates)} nodes fp32"
        write_html_report(params["save_report_html"], _html_data("parity debug precision", verdict, facts, precision=precision, search=search))
    if params.get("save_model_explorer"):
        from parity_reports.api import fp32_node_data, write_node_data  # only for --save-model-explorer: it loads onnx

        label = f"parity: nodes kept fp32 ({params['precision']} elsewhere)"
        # keyed by the -o model's node ids: every candidate is there (the original lacks the Casts convert adds)
        write_node_data(params["save_model_explorer"], fp32_node_data(result.model, result.fp32_nodes, result.candidates, label))
    return int(ExitCode.PASSED)
