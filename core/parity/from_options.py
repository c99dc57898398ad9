"""From parsed options to the objects a run needs: runners, a data loader, compare functions.

The engine side of ``parity run`` (and of plugin commands that run models: ``surgeon localize``, ``debug
precision``): plain functions of option values by name (``{"seed": 1, "atol": ("1e-5",), ...}``: what
:meth:`parity.run_engine.RunRequest.options` gives), with no click in sight and no flag spelled from a name:
where a message names a plugin's option, the caller's ``flags`` or the flag the plugin declared spells it.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from parity.errors import UsageError, missing_dependency
from parity.plugins import get_registry, module_available
from parity.registry import DataRequest, Registry, RunnerRequest, _lookup
from parity.util.text import names_preview, warn

# pathlib and parity.util.fs are imported in the functions that use them: ``parity run --help`` imports this
# module (through parity.cli.run) and needs neither (pathlib, with urllib.parse and ipaddress, is ~3 ms)


def detect_model_kind(model: str, registry: Registry, declared: str | None = None) -> str | None:
    if declared:
        if declared not in registry.model_kinds:
            raise UsageError(f"--model-type: unknown kind '{declared}'; known: {', '.join(registry.model_kinds)}")
        return declared
    from pathlib import Path  # 6 ms at parity run --help, which never needs it

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


def make_runners(model: str | None, kind: str | None, chosen: Sequence[tuple[str, Any]], options: Sequence[Mapping[str, Any]], registry: Registry) -> list:
    """One runner per chosen ``(backend name, ...)``, in order, named ``<backend>-<index>``, each built from its
    own option values (``options``, one mapping per runner: the per-runner settings already over them)."""
    if chosen and not model:
        raise UsageError("a model path is required to run backends")
    runners = []
    for index, ((name, _), values) in enumerate(zip(chosen, options)):
        backend = registry.backend(name)
        if kind and kind not in backend.model_kinds:
            raise UsageError(f"{backend.cli_flag} cannot run a {kind} model ({model}); it runs: {', '.join(backend.model_kinds)}")
        runner = backend.make_runner(RunnerRequest(model, values, index, kind))
        runner.name = f"{backend.name}-{index}"
        runners.append(runner)
    return runners


def check_requirements(backends: Sequence[str], registry: Registry) -> None:
    """A backend whose library is missing fails before any model is loaded, in one line."""

    for name in backends:
        backend = registry.backend(name)
        for module in backend.requires:
            if not module_available(module):
                raise missing_dependency(module, backend.install_hint or f"pip install {module}")


def make_data_loader(params: Mapping[str, Any], model: str | None, kind: str | None, registry: Registry, warn: Callable[[str], None] = warn):
    """The feeds of a run: ``--load-inputs`` files, a ``--data-loader-script``, or the registered loader named
    by ``--data-loader`` (default ``random``) given a :class:`DataRequest`. ``warn`` shows warnings."""
    from parity.data.loader import load_script_loader
    from parity.results.files import load_inputs

    if params.get("load_inputs") and params.get("data_loader_script"):
        raise UsageError("use either --load-inputs or --data-loader-script, not both")

    def model_inputs() -> dict:
        return registry.model_kinds[kind].read_inputs(model) if (model and kind in registry.model_kinds) else {}

    if params.get("load_inputs"):
        feeds, meta = [], model_inputs()
        for path in params["load_inputs"]:
            loaded = load_inputs(path)
            _refuse_missing_inputs(loaded, meta, path)
            feeds.extend(loaded)
        return drop_extra_tensors(feeds, meta, warn)
    if params.get("data_loader_script"):
        return load_script_loader(params["data_loader_script"])
    spec = registry.data_loaders.get(params.get("data_loader") or "random")
    if spec is None:
        _lookup(registry.data_loaders, params["data_loader"], "data loader")
    meta = model_inputs()
    return load_data(DataRequest.from_options(meta, params), registry, params.get("data_loader") or "random")


def load_data(request: DataRequest, registry: Registry, loader: str = "random"):
    """The registered data loader ``loader`` (``--data-loader``) made from ``request``."""

    spec = _lookup(registry.data_loaders, loader, "data loader")
    data = spec.factory(request)
    if hasattr(data, "check_names") and request.input_metadata:
        data.check_names()
    return data


def _refuse_missing_inputs(feeds: Sequence[Mapping[str, Any]], meta: Mapping[str, Any], path: str) -> None:
    """A ``--load-inputs`` file that lacks a model input is one line naming the file and the missing input first
    (its extra tensors after: often the same data under another name), before any runner is built."""
    for index, feed in enumerate(feeds):
        missing = [name for name in meta if name not in feed]
        if not missing:
            continue
        extra = [name for name in feed if name not in meta]
        what = f"input '{missing[0]}' (expected {meta[missing[0]]})" if len(missing) == 1 else f"inputs {names_preview(repr(n) for n in missing)}"
        also = f"; it has {names_preview(repr(n) for n in extra)} instead, which the model does not take" if extra else ""
        where = f" iteration {index}" if len(feeds) > 1 else ""
        raise UsageError(f"--load-inputs {path}:{where} no data for {what}{also}")


def drop_extra_tensors(feeds: list[dict], meta: Mapping[str, Any], warn: Callable[[str], None] = warn) -> list[dict]:
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


def make_compare_funcs(params: Mapping[str, Any], registry: Registry) -> list:
    """The metrics ``--compare-func`` names (default: simple), each made by its registered factory from every parsed
    option: a metric reads and parses its own (``simple``: ``SimpleCompare.from_options``)."""
    options = dict(params)
    names = list(params.get("compare_func") or ()) or ["simple"]
    funcs = []
    for name in names:
        try:
            funcs.append(registry.comparator(name).factory(options))
        except ValueError as exc:
            raise UsageError(f"--compare-func {name}: {exc}") from None
    from parity.compare.prepare import prepare_compare_funcs  # here: numpy-heavy, as the metrics' own modules are

    metric_options = {o.name: next(f for f in o.opts if f.startswith("--")) for spec in registry.comparators.values() for o in spec.options if o.name}
    return prepare_compare_funcs(funcs, options, metric_options)  # --compare-func-script, --postprocess, --no-shape-check


def refuse_overwrite_inputs(model: str | None, params: Mapping[str, Any], registry: Registry | None = None, flags: Mapping[str, str] | None = None) -> None:
    """Before any work: no file ``run`` writes is the model or a file it reads, and no two are one file; the
    files plugins' options read and write (``Backend``/``OptionSpec`` ``reads``/``writes``) count too, named
    as ``flags`` spells them (:func:`plugin_files`)."""
    from pathlib import Path  # 6 ms at parity run --help, which never needs it

    from parity.util.fs import refuse_overwrite  # here: util.fs imports pathlib, which 'run --help' never needs

    flags = flags or {}
    script = params.get("data_loader_script")
    if script and not Path(script).exists() and ":" in script:
        script = script.rsplit(":", 1)[0]  # FILE.py:FUNC
    reads, writes = plugin_files(params, registry, flags)
    saves = [params.get(k) for k in ("save_inputs", "save_outputs", "report", "save_onnx")] + list(writes.values())
    if model and any(saves) and Path(model).suffix.lower() == ".onnx" and Path(model).is_file():
        reads.update(_weight_files(model, params.get("external_data_dir")))
    refuse_overwrite(
        {
            "the model": model,
            f"the {flags.get('load_inputs', '--load-inputs')} file": params.get("load_inputs"),
            f"the {flags.get('load_outputs', '--load-outputs')} file": params.get("load_outputs"),
            f"the {flags.get('data_loader_script', '--data-loader-script')}": script,
            **reads,
        },
        **{
            flags.get("save_inputs", "--save-inputs"): params.get("save_inputs"),
            flags.get("save_outputs", "--save-outputs"): params.get("save_outputs"),
            flags.get("report", "--report"): params.get("report"),
            flags.get("save_onnx", "--save-onnx"): params.get("save_onnx"),
        },
        **writes,
    )


def _weight_files(model: str, external_data_dir: str | None) -> dict[str, str]:
    """``{"the model's data file": path}`` of an ONNX model's external data (read without a weight byte): a written
    file must not land on them either."""
    from parity import onnx_external, onnx_models  # here: only a run that writes files reads the graph for this

    try:
        proto = onnx_models.load(model, load_external_data=False, external_data_dir=external_data_dir, ignore_external_data=True)
    except Exception:  # noqa: BLE001 - an unreadable model is the runner's to report, in its own words
        return {}
    base = onnx_models.data_dir(model, external_data_dir)
    return {f"the model's data file {path.name}": str(path) for path in onnx_external.data_files(proto, base)}


def plugin_files(params: Mapping[str, Any], registry: Registry | None, flags: Mapping[str, str] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """``({"the --load-x file": path}, {"--save-x": path})`` of the plugins' file options given in ``params``,
    each spelled as ``flags`` says, else as the option the plugin declared (its first long flag)."""
    if registry is None:
        return {}, {}
    reads, writes = {}, {}
    for spec in [*registry.backends.values(), *registry.command_options.values()]:
        for name in spec.reads:
            if params.get(name):
                reads[f"the {option_flag(spec, name, flags)} file"] = params[name]
        for name in spec.writes:
            if params.get(name):
                writes[option_flag(spec, name, flags)] = params[name]
    return reads, writes


def option_flag(spec: Any, name: str, flags: Mapping[str, str] | None = None) -> str:
    """How option ``name`` of ``spec`` (a backend, an option spec...) is written in a message: as ``flags`` (the
    caller's spellings) says, else the first long flag the spec declared it with, else the name itself."""
    if flags and name in flags:
        return flags[name]
    declared = next((o for o in spec.options if o.name == name), None)
    return next((f for f in getattr(declared, "opts", ()) if f.startswith("--")), name)


def mark_params() -> tuple[str, ...]:
    """The options that mark intermediate tensors as outputs: every registered backend's ``mark_options``."""
    names: dict[str, None] = {}
    for backend in get_registry().backends.values():
        names.update(dict.fromkeys(backend.mark_options))
    return tuple(names)


def outputs_were_marked(params: Mapping[str, Any]) -> bool:
    """Whether any backend's marking option (:attr:`parity.registry.Backend.mark_options`) was given: then
    ``parity run`` builds the first-divergence report (:mod:`parity.compare.divergence`)."""
    return any(params.get(p) for p in mark_params())


# --- marking outputs of an ONNX model: --onnx-outputs, --onnx-exclude-outputs, --onnx-outputs-by-type ----------


def outputs_by_type(proto: Any, types: Sequence[str], model: str, flag: str = "--onnx-outputs-by-type", warn: Callable[[str], None] = warn) -> list[str]:
    """The outputs of every node whose op type is one of ``types`` (case-insensitive), in the order the types are
    given (Polygraphy's ``mark_types``). A type the model lacks is a warning naming the nearest ones; none found
    at all is refused (the option would do nothing)."""
    import difflib  # 2 ms at start-up: only --onnx-outputs-by-type suggests op types

    canonical = {node.op_type.lower(): node.op_type for node in proto.graph.node}
    marked: list[str] = []
    found = False
    for wanted in types:
        op = canonical.get(wanted.lower())
        if op is None:
            near = difflib.get_close_matches(wanted, sorted(set(canonical.values())), n=3, cutoff=0.6)
            warn(f"{flag}: {model} has no node of op type '{wanted}'" + (f"; did you mean {', '.join(near)}?" if near else ""))
            continue
        found = True
        marked += [out for node in proto.graph.node if node.op_type == op for out in node.output if out]
    if not found:
        raise UsageError(f"{flag}: {model} has no node of op type {' or '.join(types)}; its op types: {', '.join(sorted(set(canonical.values())))}")
    return list(dict.fromkeys(marked))


def type_outputs(proto: Any) -> None:
    """Marked outputs carry no type (``make_empty_tensor_value_info``), and an older model's outputs may lack a
    shape, which onnx.checker refuses in a written model: give each the type and shape shape inference finds (on
    the graph; external weights stay unread)."""
    import onnx  # here: only a command that writes a marked model gets here

    untyped = [vi for vi in proto.graph.output if not (vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"))]
    if not untyped:
        return
    try:
        inferred = onnx.shape_inference.infer_shapes(proto, strict_mode=False)
    except Exception:  # noqa: BLE001 - without inference the checker names the untyped output when the model is saved
        return
    found: dict[str, Any] = {}
    for vi in [*inferred.graph.output, *inferred.graph.value_info, *inferred.graph.input]:
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
            found.setdefault(vi.name, vi)
    for vi in untyped:
        if vi.name in found:
            vi.type.CopyFrom(found[vi.name].type)


def marked_onnx(model: str, params: Mapping[str, Any], flags: Mapping[str, str] | None = None, warn: Callable[[str], None] = warn) -> Any | None:
    """The graph of ONNX ``model`` (weights left in their files) with its outputs marked as ``params`` say
    (``onnx_outputs``, ``onnx_exclude_outputs``, ``onnx_outputs_by_type``) and typed, then its shapes inferred
    (``shape_inference``: ONNX's own inference, with data propagation), or None when none is given."""
    # read by the flags' parameter names (--onnx-outputs: onnx_outputs): the core names no plugin's option
    flags_ = ("--onnx-outputs", "--onnx-exclude-outputs", "--onnx-outputs-by-type")
    outputs, exclude, types = (list(params.get(flag[2:].replace("-", "_")) or ()) for flag in flags_)
    infer = bool(params.get("shape_inference"))
    if not (outputs or exclude or types or infer):
        return None
    from parity import onnx_models  # here: only marking reads the graph

    proto = onnx_models.load(model, load_external_data=False, external_data_dir=params.get("external_data_dir"))
    if outputs or exclude or types:
        if types and not onnx_models.wants_all(outputs):
            flag = (flags or {}).get("onnx_outputs_by_type", "--onnx-outputs-by-type")
            outputs = list(dict.fromkeys([*outputs, *outputs_by_type(proto, types, model, flag, warn)]))
        onnx_models.mark_outputs(proto, outputs or [o.name for o in proto.graph.output], exclude)
        type_outputs(proto)
    if infer:
        import onnx  # here: only --shape-inference gets this far

        proto = onnx.shape_inference.infer_shapes(proto, data_prop=True)  # reads no weight: they stay references
    return proto


def convert_marked(conv: Any, model: str, output: str, params: Mapping[str, Any], warn: Callable[[str], None] = warn) -> bool:
    """``parity convert`` with ``--onnx-outputs``/``--onnx-exclude-outputs``/``--onnx-outputs-by-type`` or
    ``--shape-inference`` (Polygraphy's ONNX loader marks and infers before any conversion): False when none is given. An ``.onnx`` output with nothing else to
    convert is the marked model itself, written with the external-data flags and checked before it appears; any
    other conversion reads the marked graph from a private temporary file, its weights still read from the
    model's data folder."""
    from parity import onnx_external, onnx_models  # here: only convert with marks gets this far

    proto = marked_onnx(model, params, warn=warn)
    if proto is None:
        return False
    base = onnx_models.data_dir(model, params.get("external_data_dir"))
    if ".onnx" in conv.suffixes and not params.get("fp_to_fp16"):
        onnx_external.save_model(proto, output, base_dir=base, external=external_data(params), what=f"the marked model for {output}")
        return True
    import tempfile  # 4.5 ms at start-up: only a marked conversion needs a temporary model

    from parity.registry import ConvertRequest  # here: the registry's request type, with the marked model's path

    with tempfile.TemporaryDirectory(prefix="parity-convert-") as folder:
        staged = os.path.join(folder, os.path.basename(model))
        with open(staged, "wb") as handle:
            handle.write(onnx_external.serialize(proto, "the marked model"))
        conv.convert(ConvertRequest(staged, output, {**params, "external_data_dir": str(base)}))
    return True


# the writing flags as Polygraphy and every Parity command that writes ONNX spell them
_EXTERNAL_FLAGS = {
    "save_external_data": "--save-external-data",
    "external_data_size_threshold": "--external-data-size-threshold",
    "no_save_all_tensors_to_one_file": "--no-save-all-tensors-to-one-file",
}


def external_data(params: Mapping[str, Any], flags: Mapping[str, str] | None = None) -> Any:
    """How a written model stores its weights (:class:`parity.onnx_external.ExternalData`), from the writing flags
    ``save_external_data``, ``external_data_size_threshold``, ``no_save_all_tensors_to_one_file``; a modifier
    without ``--save-external-data`` is refused."""
    from parity.onnx_external import ExternalData  # here: only a command that writes a model reads these
    from parity.util.units import parse_size  # here: likewise

    flags = flags or {}
    spell = {name: flags.get(name, flag) for name, flag in _EXTERNAL_FLAGS.items()}
    location, threshold = params.get("save_external_data"), params.get("external_data_size_threshold")
    one_file = not params.get("no_save_all_tensors_to_one_file")
    if location is None:
        given = [spell[n] for n, on in (("external_data_size_threshold", threshold is not None), ("no_save_all_tensors_to_one_file", not one_file)) if on]
        if given:
            raise UsageError(f"{given[0]} applies to weights written as external data: add {spell['save_external_data']} [PATH]")
        return ExternalData()
    bad = "{option}: cannot read '{text}'; write a size such as 1024, 64K or 1M"
    return ExternalData(location, 1024 if threshold is None else parse_size(threshold, spell["external_data_size_threshold"], bad), one_file)


# --- the ONNX model as Polygraphy's ONNX loader hands it on: --shape-inference, --fp-to-fp16 ----------------------

_LOADING_FLAGS = {"shape_inference": "--shape-inference", "no_onnxruntime_shape_inference": "--no-onnxruntime-shape-inference", "fp_to_fp16": "--fp-to-fp16"}


def check_loading_flags(params: Mapping[str, Any], command: str, runs: bool = True) -> None:
    """One line for a loading flag that cannot apply: ``--no-onnxruntime-shape-inference`` without
    ``--shape-inference`` (it chooses how that infers), and, where ``command`` runs the model (``runs``),
    ``--ignore-external-data`` (running needs the weights)."""
    if params.get("no_onnxruntime_shape_inference") and not params.get("shape_inference"):
        raise UsageError("--no-onnxruntime-shape-inference chooses how --shape-inference infers shapes: add --shape-inference")
    if runs and params.get("ignore_external_data"):
        does = "builds" if "build" in command else "runs"
        raise UsageError(f"--ignore-external-data: {command} {does} the model, which needs its weights; give --external-data-dir where they are")


def loading_flags_given(params: Mapping[str, Any]) -> bool:
    """Whether ``params`` ask for the model to be changed as it is read (``--shape-inference``, ``--fp-to-fp16``)."""
    return bool(params.get("shape_inference") or params.get("fp_to_fp16"))


def stage_loaded_onnx(model: str, params: Mapping[str, Any], folder: str, registry: Registry | None = None) -> tuple[str, str | None]:
    """``model`` as Polygraphy's ONNX loader hands it to the runners, written in ``folder`` (a private temporary
    one the caller removes): shapes inferred (``shape_inference``: ONNX's inference with data propagation, the
    one --no-onnxruntime-shape-inference asks for; weights stay in their files), then float32 converted to float16
    (``fp_to_fp16``: the registered ``onnx`` converter, what ``parity convert --fp-to-fp16`` runs; inputs and
    outputs stay float32). Returns ``(path, external data folder)``: ``model`` itself when neither is given."""
    from pathlib import Path  # 6 ms at parity run --help, which never needs it

    base = params.get("external_data_dir")
    if not loading_flags_given(params):
        return model, base
    from parity import onnx_external, onnx_models  # here: only a changed model reads the graph

    path = model
    if params.get("shape_inference"):
        import onnx  # here: likewise

        proto = onnx_models.load(model, load_external_data=False, external_data_dir=base)
        proto = onnx.shape_inference.infer_shapes(proto, data_prop=True)  # reads no weight: they stay references
        base = str(onnx_models.data_dir(model, base))
        path = str(Path(folder, "inferred") / Path(model).name)  # the model's own name, in messages
        Path(path).parent.mkdir()
        Path(path).write_bytes(onnx_external.serialize(proto, "the model with its shapes inferred"))
    if params.get("fp_to_fp16"):
        from parity.registry import ConvertRequest  # here: only --fp-to-fp16 converts

        converter = (registry or get_registry()).converters.get("onnx")
        if converter is None:
            raise UsageError("--fp-to-fp16 needs the plugin that registers the onnx converter (see 'parity plugins')")
        output = str(Path(folder, "fp16") / Path(model).name)
        Path(output).parent.mkdir()
        with contextlib.redirect_stdout(sys.stderr):  # the converter's report is a note: stdout is the command's own
            converter.convert(ConvertRequest(path, output, {"fp_to_fp16": True, "external_data_dir": base}))
        path, base = output, None  # the converted weights are written beside it
    return path, base


def loaded_onnx(model: str, params: Mapping[str, Any], folder: str, command: str, registry: Registry | None = None) -> tuple[str, str | None]:
    """For a command that runs or builds ``model``: its loading flags checked (:func:`check_loading_flags`) and
    the model as Polygraphy's ONNX loader hands it on (:func:`stage_loaded_onnx`, staged in ``folder``):
    ``(path, external data folder)``, ``model`` itself when no flag changes it."""
    check_loading_flags(params, command)
    return stage_loaded_onnx(model, params, folder, registry)
