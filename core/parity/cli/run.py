"""``parity run``: run a model on one or more backends and compare the outputs."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from parity.cli import options as opts
from parity.cli.common import verbosity_options, warn
from parity.cli.parsing import ParityCommand
from parity.errors import ExitCode, UsageError
from parity.plugins import get_registry
from parity.registry import Backend, Registry, RunnerRequest
from parity.util.fs import check_model_path, refuse_overwrite
from parity.util.text import names_preview


def add_to(cli: click.Group) -> None:
    cli.add_command(make_command())


def make_command() -> click.Command:
    """``parity run``, built when it is used: its options come from the registry (backends, metrics)."""
    registry = get_registry()
    params = [click.Argument(["model"], required=False), *opts.model_options(), *opts.onnx_options(), *opts.data_options()]
    params += [*opts.compare_options(registry), *opts.backend_params(registry)]
    command = ParityCommand(
        "run",
        params=params,
        callback=click.pass_context(run_command),
        help=RUN_HELP,
        short_help="Run a model on backends and compare the outputs.",
        context_settings={"max_content_width": 110},
    )
    return verbosity_options(command)


RUN_HELP = """Run MODEL with each backend flag given (in order) and compare each runner with the next.

\b
  parity run model.onnx --onnxrt --onnxrt=graph-optimization-level=disable
  parity run model.onnx --onnxrt --save-inputs in.npz --save-outputs golden.npz
  parity run model_fp16.onnx --onnxrt --load-inputs in.npz --load-outputs golden.npz --tolerance-preset fp16

Per-runner settings follow the flag: --onnxrt=OPTION=VALUE[,OPTION=VALUE].
Exit codes: 0 passed, 1 mismatch, 2 usage error, 3 model or backend failure."""


# --- building runners and data ---------------------------------------------------------------------

def detect_model_kind(model: str, registry: Registry, declared: str | None = None) -> str | None:
    if declared:
        if declared not in registry.model_kinds:
            raise UsageError(f"--model-type: unknown kind '{declared}'; known: {', '.join(registry.model_kinds)}")
        return declared
    suffix = Path(model).suffix.lower()
    for kind in registry.model_kinds.values():
        if suffix in kind.suffixes:
            return kind.name
    try:
        head = Path(model).read_bytes()[:64] if Path(model).is_file() else b""
    except OSError:
        head = b""
    for kind in registry.model_kinds.values():
        if kind.magic and kind.magic(head):
            return kind.name
    return None


def cast_runner_settings(backend: Backend, overrides: Mapping[str, str], ctx: click.Context) -> dict[str, Any]:
    """Per-runner ``--flag=opt=value`` settings, converted by the option's own click type."""
    by_name = {p.name: p for p in ctx.command.params if p.name}
    out = {}
    for key, raw in overrides.items():
        param = by_name.get(key) or by_name.get(f"{backend.name.replace('-', '_')}_{key}")
        if param is None:
            raise UsageError(f"{backend.cli_flag}: unknown setting '{key}'")
        value: Any = [raw] if getattr(param, "multiple", False) else raw
        out[param.name] = param.type_cast_value(ctx, value)
    return out


def make_runners(ctx: click.Context, model: str | None, params: Mapping[str, Any], registry: Registry) -> list:
    chosen = ctx.meta.get("parity.runners", [])
    if chosen and not model:
        raise UsageError("a model path is required to run backends")
    kind = detect_model_kind(model, registry, params.get("model_type")) if model else None
    runners = []
    for index, (name, overrides) in enumerate(chosen):
        backend = registry.backend(name)
        if kind and kind not in backend.model_kinds:
            raise UsageError(f"{backend.cli_flag} cannot run a {kind} model ({model}); it runs: {', '.join(backend.model_kinds)}")
        options = {**params, **cast_runner_settings(backend, overrides, ctx)}
        runner = backend.make_runner(RunnerRequest(model, options, index, kind))
        runner.name = f"{backend.name}-{index}"
        runners.append(runner)
    return runners


def check_requirements(ctx: click.Context, registry: Registry) -> None:
    """A backend whose library is missing fails before any model is loaded, in one line."""
    from parity.errors import missing_dependency
    from parity.plugins import module_available

    for name, _ in ctx.meta.get("parity.runners", []):
        backend = registry.backend(name)
        for module in backend.requires:
            if not module_available(module):
                raise missing_dependency(module, backend.install_hint or f"pip install {module}")


def make_data_loader(params: Mapping[str, Any], model: str | None, kind: str | None, registry: Registry):
    from parity.data.loader import load_script_loader
    from parity.data.parse import parse_shapes, parse_val_ranges
    from parity.results.files import load_inputs

    if params.get("load_inputs") and params.get("data_loader_script"):
        raise UsageError("use either --load-inputs or --data-loader-script, not both")
    def model_inputs() -> dict:
        return registry.model_kinds[kind].read_inputs(model) if (model and kind in registry.model_kinds) else {}

    if params.get("load_inputs"):
        feeds = []
        for path in params["load_inputs"]:
            feeds.extend(load_inputs(path))
        return drop_extra_tensors(feeds, model_inputs())
    if params.get("data_loader_script"):
        return load_script_loader(params["data_loader_script"])
    spec = registry.data_loaders.get(params.get("data_loader") or "random")
    if spec is None:
        from parity.registry import _lookup

        _lookup(registry.data_loaders, params["data_loader"], "data loader")
    meta = model_inputs()
    request = DataRequest(
        meta,
        params.get("seed", 1),
        params.get("iterations", 1),
        parse_val_ranges(params.get("val_range") or ()),
        parse_shapes(params.get("input_shapes") or ()),
        params,
    )
    loader = spec.factory(request)  # type: ignore[union-attr]
    if hasattr(loader, "check_names") and meta:
        loader.check_names()
    return loader


def drop_extra_tensors(feeds: list[dict], meta: Mapping[str, Any]) -> list[dict]:
    """Saved inputs may hold more tensors than the model takes (Polygraphy's layerwise inputs hold every
    tensor): keep the model's inputs when all are there, with one warning; otherwise leave the names for the
    runner to reject."""
    if not meta:
        return feeds
    dropped: set[str] = set()
    kept = []
    for feed in feeds:
        if set(meta) <= set(feed) and set(feed) - set(meta):
            dropped |= set(feed) - set(meta)
            feed = {name: feed[name] for name in meta}
        kept.append(feed)
    if dropped:
        names = sorted(dropped)
        warn(f"--load-inputs: ignoring {len(names)} tensor(s) the model does not take as inputs: {names_preview(names)}")
    return kept


class DataRequest:
    """What a registered data loader's factory receives."""

    def __init__(self, input_metadata, seed, iterations, val_range, input_shapes, options) -> None:
        self.input_metadata = input_metadata
        self.seed = seed
        self.iterations = iterations
        self.val_range = val_range
        self.input_shapes = input_shapes
        self.options = options


def make_compare_funcs(params: Mapping[str, Any], registry: Registry) -> list:
    from parity.data.parse import parse_per_name

    options = dict(params)
    options["atol"] = parse_per_name(params.get("atol") or (), float, "--atol") or None
    options["rtol"] = parse_per_name(params.get("rtol") or (), float, "--rtol") or None
    options["check_error_stat"] = parse_per_name(params.get("check_error_stat") or (), str, "--check-error-stat") or None
    names = list(params.get("compare_func") or ()) or ["simple"]
    funcs = []
    for name in names:
        try:
            funcs.append(registry.comparator(name).factory(options))
        except ValueError as exc:
            raise UsageError(f"--compare-func {name}: {exc}") from None
    return funcs


# --- the command -----------------------------------------------------------------------------------

def refuse_overwrite_inputs(model: str | None, params: Mapping[str, Any]) -> None:
    """Before any work: no file ``run`` writes is the model or a file it reads, and no two are one file."""
    script = params.get("data_loader_script")
    if script and not Path(script).exists() and ":" in script:
        script = script.rsplit(":", 1)[0]  # FILE.py:FUNC
    refuse_overwrite(
        {
            "the model": model,
            "the --load-inputs file": params.get("load_inputs"),
            "the --load-outputs file": params.get("load_outputs"),
            "the --data-loader-script": script,
        },
        **{"--save-inputs": params.get("save_inputs"), "--save-outputs": params.get("save_outputs"), "--report": params.get("report")},
    )


def run_command(ctx: click.Context, model: str | None, **params: Any) -> int:
    from parity import runflow
    from parity.results.files import check_output_path, load_results
    from parity.results.model import RunResults

    refuse_overwrite_inputs(model, params)
    for option in ("save_inputs", "save_outputs", "report"):  # a bad output path fails before any work
        if params.get(option):
            check_output_path(params[option], "--" + option.replace("_", "-"))
    registry = get_registry()
    if not ctx.meta.get("parity.runners") and not params.get("load_outputs"):
        flags = " ".join(b.cli_flag for b in registry.backends.values())
        raise UsageError(f"choose at least one backend ({flags or 'none installed: see parity plugins'}) or --load-outputs")
    if model:
        check_model_path(model)
    funcs = make_compare_funcs(params, registry)
    golden = RunResults()
    for path in params.get("load_outputs") or ():
        golden.extend(load_results(path), prefix=f"{Path(path).name}:")
    kind = detect_model_kind(model, registry, params.get("model_type")) if model else None
    data = make_data_loader(params, model, kind, registry) if model and ctx.meta.get("parity.runners") else None
    runners = make_runners(ctx, model, params, registry)  # validates backend options: usage errors come first
    check_requirements(ctx, registry)
    for path in (params.get("save_outputs"), params.get("save_inputs")):
        if path and Path(path).suffix == ".json":
            warn(f"{path} is written in Parity's binary format (a zip of .npy arrays), not JSON")
    from parity.cli.report import ReportPrinter, write_report

    printer = ReportPrinter()
    summary = runflow.run(
        runners,
        data,
        golden,
        funcs,
        save_inputs=params.get("save_inputs"),
        save_outputs=params.get("save_outputs"),
        do_validate=params.get("validate", False),
        fail_fast=params.get("fail_fast", False),
        on_iteration=printer.iteration,
    )
    if not runners:
        for index in range(summary.iterations):
            printer.iteration(index, [p for p in summary.accuracy if index < len(p.iterations)])
    code = ExitCode.PASSED if summary.passed else ExitCode.MISMATCH
    from parity.compare.divergence import first_divergence, outputs_were_marked, print_reports

    # layerwise runs: where the runners start to disagree (built once: printed and reported)
    layerwise = first_divergence(summary, model) if outputs_were_marked(params) else None
    print_reports(layerwise or [])
    printer.summary(summary)
    if params.get("report"):
        write_report(params["report"], summary, code, layerwise)
    return int(code)
