"""``parity plugin list``, ``plugin match`` and ``plugin replace``: find the subgraphs of an ONNX model that a
TensorRT plugin could replace, and replace them.

A plugin directory holds one folder per plugin, each with a ``pattern.py`` (the layout Polygraphy 0.53.6 reads):

- ``get_matching_subgraphs(graph)``: given an onnx-graphsurgeon graph, a list of matches, each a dict with
  ``inputs`` and ``outputs`` (tensor names) and ``attributes`` (the plugin node's attributes);
- ``get_plugin_metadata()``: ``{"name": ..., "op": ...}``, the plugin's name and the op type of its node;
- optionally ``replace_with_plugin(graph, input_tensors, output_tensors, attrs, op)``: a custom replacement.

``match`` writes the matches to a config file (YAML documents, one per plugin: ``name``, ``op``, ``instances``)
that the user may edit; ``replace`` reads it and puts one plugin node in place of each instance's subgraph."""

from __future__ import annotations

import ast
import glob
import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import click

from parity.api import (
    GreedyOption,
    ModelError,
    UsageError,
    echo,
    load_user_function,
    onnx_external,
    onnx_models,
    refuse_overwrite,
    warn,
    write_text_atomic,
)
from parity.commands import ParityCommand, verbosity_options
from parity_surgeon import autotune, onnx_load

PATTERN = "pattern.py"
PLUGIN_DOMAIN = "trt.plugins"  # the plugin node's domain: declared in opset_import, so the ONNX checker accepts it


def _plugins(plugin_dir: str, include: Sequence[str], exclude: Sequence[str]) -> dict[str, str]:
    """``{plugin name: its pattern.py}`` for the folders of ``plugin_dir`` that have one, filtered."""
    if not os.path.isdir(plugin_dir):
        raise UsageError(f"--plugin-dir: no such folder: {plugin_dir}")
    if include and exclude:
        raise UsageError("--include and --exclude cannot be used together")
    found = {os.path.basename(os.path.dirname(p)): p for p in sorted(glob.glob(os.path.join(plugin_dir, "*", PATTERN)))}
    if include:
        found = {name: path for name, path in found.items() if name in include}
    return {name: path for name, path in found.items() if name not in set(exclude)}


def _function(path: str, name: str, required: bool = True) -> Callable[..., Any] | None:
    # load_user_function falls back to its default name; a pattern file without the function must not run another
    with open(path, encoding="utf-8") as handle:
        defined = {n.name for n in ast.parse(handle.read(), path).body if isinstance(n, ast.FunctionDef)}
    if name not in defined:
        if required:
            raise UsageError(f"{path}: defines no function {name}()")
        return None
    return load_user_function(f"{path}:{name}", name, "--plugin-dir")


def find_matches(model: str, params: Mapping[str, Any], plugin_dir: str, include: Sequence[str] = (), exclude: Sequence[str] = ()) -> tuple[list[dict], dict[str, int]]:
    """The config documents (plugins with at least one match) and the match count of every plugin considered."""
    import onnx_graphsurgeon as gs  # here, not at the top: the commands' --help never needs it

    plugins = _plugins(plugin_dir, include, exclude)
    proto, _base = onnx_load.load_model(model, params)
    onnx_load.quiet_graphsurgeon()
    documents, counts = [], {}
    for name, path in plugins.items():
        graph = gs.import_onnx(proto)  # a fresh graph per plugin: a pattern may edit what it is given
        try:
            matches = list(_function(path, "get_matching_subgraphs")(graph) or [])
            meta = _function(path, "get_plugin_metadata")() or {}
        except UsageError:
            raise
        except Exception as exc:  # noqa: BLE001 - the user's pattern code: any failure is one line naming it
            raise UsageError(f"{path}: {type(exc).__name__}: {exc}") from None
        counts[name] = len(matches)
        if matches:
            if "op" not in meta:
                raise UsageError(f"{path}: get_plugin_metadata() gives no 'op' (the plugin node's op type)")
            documents.append({"name": meta.get("name", name), "op": meta["op"], "instances": [_plain(m) for m in matches]})
    return documents, counts


def _plain(match: Mapping[str, Any]) -> dict[str, Any]:
    """A match as plain data (lists, not sets; numbers, not numpy scalars), so the config file can hold it."""
    out: dict[str, Any] = {"inputs": [str(n) for n in match.get("inputs", [])], "outputs": [str(n) for n in match.get("outputs", [])]}
    attrs = match.get("attributes")
    if attrs is not None:
        out["attributes"] = {str(k): v.item() if hasattr(v, "item") else v for k, v in dict(attrs).items()}
    return out


def dump_config(documents: Sequence[Mapping[str, Any]]) -> str:
    """YAML documents; each is written as JSON, which YAML reads as it is, so no YAML library is needed to write."""
    return "".join(f"---\n{json.dumps(doc, indent=2)}\n" for doc in documents)


def load_config(path: str) -> list[dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise UsageError(f"--config: cannot read {path}: {exc.strerror or exc}") from None
    try:
        import yaml  # a config the user edited in YAML style needs a YAML reader
    except ImportError:
        yaml = None
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None] if yaml else [json.loads(p) for p in text.split("---\n") if p.strip()]
    except Exception as exc:  # noqa: BLE001 - yaml and json raise their own errors
        raise UsageError(f"--config: {path} is not a plugin config: {str(exc).splitlines()[0]}") from None
    for doc in docs:
        if not isinstance(doc, dict) or not {"name", "op", "instances"} <= set(doc):
            raise UsageError(f"--config: {path}: each document needs name, op and instances")
    return docs


def replace_subgraph(graph: Any, input_tensors: list[Any], output_tensors: list[Any], attrs: Mapping[str, Any] | None = None, op: str | None = None) -> Any:
    """Put one ``op`` node in place of the nodes that compute ``output_tensors`` from ``input_tensors``: every
    node reached going back from the outputs without crossing an input. Returns the new node."""
    stop = {id(t) for t in input_tensors}
    doomed: dict[int, Any] = {}
    todo = list(output_tensors)
    while todo:
        tensor = todo.pop()
        if id(tensor) in stop:
            continue
        for node in list(tensor.inputs):
            if id(node) not in doomed:
                doomed[id(node)] = node
                todo.extend(node.inputs)
    for node in doomed.values():
        node.inputs.clear()
        node.outputs.clear()
    taken = {n.name for n in graph.nodes}  # node names must stay unique (onnxruntime refuses a model with two alike)
    name = next(f"{op}_{i}" for i in range(len(taken) + 1) if f"{op}_{i}" not in taken)
    new = graph.layer(op=op, inputs=list(input_tensors), outputs=list(output_tensors), attrs=dict(attrs or {}), name=name)
    node = next(n for n in graph.nodes if n.outputs and n.outputs[0] is new[0])
    node.domain = PLUGIN_DOMAIN
    graph.cleanup().toposort()
    return node


def replace(model: str, params: Mapping[str, Any], plugin_dir: str, config: str) -> tuple[Any, Any, list[str]]:
    """The model with each configured instance replaced; returns ``(ModelProto, base_dir, report lines)``."""
    return replace_documents(model, params, plugin_dir, load_config(config))


def replace_documents(model: str, params: Mapping[str, Any], plugin_dir: str, documents: Sequence[Mapping[str, Any]]) -> tuple[Any, Any, list[str]]:
    """:func:`replace` with the config's documents given."""
    import onnx  # here, not at the top: the commands' --help never needs these
    import onnx_graphsurgeon as gs

    proto, base = onnx_load.load_model(model, params)
    graph = gs.import_onnx(proto)
    tensors = graph.tensors()
    lines = []
    for doc in documents:
        pattern = os.path.join(plugin_dir, str(doc["name"]), PATTERN)
        custom = _function(pattern, "replace_with_plugin", required=False) if os.path.isfile(pattern) else None
        done = 0
        for index, instance in enumerate(doc["instances"] or []):
            names = {key: list(instance.get(key) or []) for key in ("inputs", "outputs")}
            for key, wanted in names.items():
                unknown = [n for n in wanted if n not in tensors]
                if unknown:
                    raise UsageError(f"--config: {doc['name']} instance {index}: the model has no tensor {', '.join(map(repr, unknown))} ({key})")
            args = {"graph": graph, "input_tensors": [tensors[n] for n in names["inputs"]], "output_tensors": [tensors[n] for n in names["outputs"]],
                    "attrs": instance.get("attributes"), "op": doc["op"]}  # fmt: skip
            if custom is not None:
                try:
                    replaced = custom(**args)
                except Exception as exc:  # noqa: BLE001 - the user's code: one line naming it
                    raise UsageError(f"{pattern}: replace_with_plugin: {type(exc).__name__}: {exc}") from None
            else:
                replaced = replace_subgraph(**args)
            done += 1 if replaced is not None and replaced is not False else 0
        lines.append(f"{doc['name']}: replaced {done} of {len(doc['instances'] or [])} instance(s) with {doc['op']}")
    graph.cleanup().toposort()
    result = gs.export_onnx(graph)
    result.ir_version = proto.ir_version
    if any(n.domain == PLUGIN_DOMAIN for n in result.graph.node) and not any(o.domain == PLUGIN_DOMAIN for o in result.opset_import):
        result.opset_import.append(onnx.helper.make_opsetid(PLUGIN_DOMAIN, 1))
    return result, base, lines


# --- the commands -----------------------------------------------------------------------------------


def _common(func: Callable) -> Callable:
    params = [
        click.Argument(["model"]),
        onnx_load.model_type_option(),
        *onnx_load.read_options(),
        *onnx_load.refused_data_options(),
        click.Option(["--plugin-dir"], required=True, type=click.Path(file_okay=False), help="Folder of plugins, one subfolder with a pattern.py each."),
    ]
    func.__dict__.setdefault("__click_params__", []).extend(reversed(params))
    return func


_FILTERS = [
    click.option("--include", cls=GreedyOption, metavar="NAME", help="Only these plugins (not with --exclude)."),
    click.option("--exclude", cls=GreedyOption, metavar="NAME", help="Leave these plugins out."),
]


def _filters(func: Callable) -> Callable:
    for option in reversed(_FILTERS):
        func = option(func)
    return func


@click.command("list", cls=ParityCommand, short_help="Count the subgraphs each plugin's pattern matches.")
@_common
@_filters
@verbosity_options
def list_cmd(model: str, plugin_dir: str, include: Sequence[str], exclude: Sequence[str], **params: Any) -> int:
    """Count, per plugin of --plugin-dir, the subgraphs of MODEL its pattern matches.

    \b
      parity plugin list model.onnx --plugin-dir plugins/
    """
    onnx_load.refuse_unused(params, "plugin list")
    _documents, counts = find_matches(model, params, plugin_dir, include or (), exclude or ())
    for name, count in sorted(counts.items()):
        echo(f"{name}: {count} match(es)")
    echo(f"plugins matched: {counts}")  # Polygraphy's spelling of the same counts
    return 0


@click.command("match", cls=ParityCommand, short_help="Write the subgraphs plugins could replace to a config file.")
@_common
@_filters
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None, help="Config file to write [config.yaml beside the model].")
@verbosity_options
def match_cmd(model: str, plugin_dir: str, include: Sequence[str], exclude: Sequence[str], output: str | None, **params: Any) -> int:
    """Find the subgraphs of MODEL the plugins of --plugin-dir match and write them to a config file (-o), which
    you may edit and then give to parity plugin replace --config.

    \b
      parity plugin match model.onnx --plugin-dir plugins/ -o config.yaml
    """
    onnx_load.refuse_unused(params, "plugin match")
    output = output or os.path.join(os.path.dirname(os.path.abspath(model)), "config.yaml")
    if os.path.realpath(output) == os.path.realpath(model):
        raise UsageError(f"-o {output}: that is the input model")
    documents, counts = find_matches(model, params, plugin_dir, include or (), exclude or ())
    write_text_atomic(output, dump_config(documents))
    for name, count in sorted(counts.items()):
        echo(f"{name}: {count} match(es)")
    echo(f"wrote {output}")
    return 0


@click.command("replace", cls=ParityCommand, short_help="Replace the subgraphs of a plugin config with plugin nodes.")
@_common
@click.option("--config", type=click.Path(dir_okay=False), default=None, help="The config from parity plugin match [config.yaml beside the model].")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None, help="Where to write the model [replaced.onnx beside the model].")
@onnx_load.write_options
@verbosity_options
def replace_cmd(model: str, plugin_dir: str, config: str | None, output: str | None, **params: Any) -> int:
    """Replace each subgraph the config lists with one plugin node (op type from the config, attributes from
    each instance; domain trt.plugins) and write the model. A pattern.py with replace_with_plugin() does the
    replacing itself.

    \b
      parity plugin replace model.onnx --plugin-dir plugins/ --config config.yaml -o replaced.onnx
    """
    from parity.commands import external_data_from_params  # here: the command's --help never needs the writing layer
    from parity_surgeon import graph as g

    onnx_load.refuse_unused(params, "plugin replace")
    folder = os.path.dirname(os.path.abspath(model))
    config = config or os.path.join(folder, "config.yaml")
    output = output or os.path.join(folder, "replaced.onnx")
    external = external_data_from_params(params)
    result, base, lines = replace(model, params, plugin_dir, config)
    for line in lines:
        echo(line)
    _save(g, result, output, model, base, external)
    return 0


def _save(g: Any, result: Any, output: str, model: str, base: Any, external: Any) -> None:
    """Written only after the full checker passes, as every model Parity writes; a model whose input already fails
    the checker (made-up op types, as in tests of patterns) is written as it is, with a warning saying so."""
    try:
        onnx_models.validate(str(model), "the input model", missing_kernels_ok=True)
        valid_input = True
    except ModelError:
        valid_input = False
    if valid_input:
        saved = g.save(result, output, model, "the model with plugins", base_dir=base, external=external)
    else:
        warn(f"{model} fails the ONNX checker itself; the model with plugins is written without that check")
        refuse_overwrite({"the input model": model}, output)
        saved = onnx_external.save_model(result, output, base_dir=base, external=external, what="the model with plugins", validate=False)
    echo(f"wrote {saved.path}")



@click.command("autotune", cls=ParityCommand, short_help="Keep the plugin replacements that make the TensorRT engine faster.")
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Where to write the fastest model.")
@onnx_load.write_options
@click.option("--plugin-dir", required=True, type=click.Path(file_okay=False), help="Folder of plugins, one subfolder with a pattern.py each.")
@click.option("--python-plugins", cls=GreedyOption, metavar="FILE.py", help="Python files to run first (they register TensorRT plugins).")
@click.option("--plugin-libraries", cls=GreedyOption, metavar="LIB.so", help="Plugin libraries to load first.")
@click.option("--include", cls=GreedyOption, metavar="NAME", help="Only these plugins (not with --exclude).")
@click.option("--exclude", cls=GreedyOption, metavar="NAME", help="Leave these plugins out.")
@click.option("--report", type=click.Path(dir_okay=False), default=None, help="Write what was tried and what won to this text file.")
@click.option(
    "--autotune-mode", type=click.Choice(["greedy", "exhaustive"]), default="greedy", show_default=True,
    help="greedy: one instance at a time; exhaustive: every subset.",
)
@click.option("--max-combinations", type=click.IntRange(min=1), default=1000, show_default=True, help="Most candidate models to build and time.")
@click.option("--threshold", type=float, default=0.1, show_default=True, help="Keep a replacement when it cuts the latency by more than this fraction.")
@click.option("--no-timing-cache", is_flag=True, help="Build every candidate without a TensorRT timing cache.")
@click.option("--timing-cache", type=click.Path(dir_okay=False), default=None, help="Timing cache file shared by the builds (created if missing) [a temporary one].")
@click.option("--save-config-yaml", is_flag=False, flag_value="", default=None, metavar="[PATH]", help="Also write the matches as a plugin config [config.yaml].")
@click.option("--load-config-yaml", type=click.Path(dir_okay=False), default=None, help="Take the candidates from this plugin config instead of matching.")
@click.option("--skip-autotuning", is_flag=True, help="Only match (and --save-config-yaml); build nothing.")
@verbosity_options
def autotune_cmd(model: str, output: str, **params: Any) -> int:
    """Find the plugin replacements of MODEL (as plugin match does), build each candidate model with TensorRT, time
    it, and write the fastest to -o.

    \b
      parity plugin autotune model.onnx --plugin-dir plugins/ -o tuned.onnx --report tuned.txt
    """
    from parity.commands import external_data_from_params  # here: the command's --help never needs these
    from parity_surgeon import graph as g

    if params.get("include") and params.get("exclude"):
        raise UsageError("--include and --exclude cannot be used together")
    if params.get("no_timing_cache") and params.get("timing_cache"):
        raise UsageError("--no-timing-cache and --timing-cache cannot be used together")
    if params.get("skip_autotuning"):
        for key in ("report", "timing_cache", "python_plugins", "plugin_libraries"):
            if params.get(key):
                raise UsageError(f"--{key.replace('_', '-')}: --skip-autotuning builds nothing")
    external = external_data_from_params(params)
    refuse_overwrite({"the input model": model}, output)
    proto, base, outcome, _documents = autotune.run(model, params)
    if outcome is None:
        return 0
    text = outcome.report(params["autotune_mode"], params["threshold"])
    echo(text.rstrip())
    if params.get("report"):
        write_text_atomic(params["report"], text)
        echo(f"wrote {params['report']}")
    saved = g.save(proto, output, model, "the tuned model", base_dir=base, external=external)
    echo(f"wrote {saved.path}")
    return 0
