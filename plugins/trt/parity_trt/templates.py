"""``parity template trt-network`` and ``trt-config``: Python scripts to start from, and what they call.

A generated script holds the command's options as a literal dict and builds through the same loaders as
``parity convert`` (so each option means what it means there), then leaves a marked place for your own
TensorRT API calls:

- trt-network: ``load_network()`` returns ``(builder, network)``, an empty network to fill in, or, given a model,
  ``(builder, network, parser)`` with the model parsed and the network options applied;
- trt-config: ``load_config(builder, network)`` returns the ``IBuilderConfig`` the build options make.

Either script is what ``--trt-network-func`` / ``--trt-config-script`` load (``parity run script.py --trt``)."""

from __future__ import annotations

import fnmatch
import os
import pprint
import tempfile
from collections.abc import Mapping
from typing import Any

from parity.api import UsageError, echo, onnx_models
from parity_trt.capability import fp16_copy

# options of build_options() that shape the network (everything else is the builder config's); a name absent from
# build_options() is simply not offered
NETWORK_OPTIONS = frozenset({
    "strongly_typed", "trt_plugins", "trt_outputs", "trt_exclude_outputs", "trt_outputs_by_type", "mark_debug",
    "mark_unfused_tensors_as_debug_tensors", "trt_network_postprocess_script", "layer_precisions", "tensor_datatypes",
    "all_tensor_datatypes", "tensor_formats", "all_tensor_formats", "onnx_flags", "plugin_instancenorm",
    "enable_uint8_asymmetric_quantization_dla", "decomposable_attentions",
})  # fmt: skip
# neither side: what happens after a build (the script builds nothing) or picks another kind of model
NEITHER = frozenset({"save_timing_cache", "trt_network_func", "save_engine", "trt_profile_index"})


def load_network_with(model: str | None, options: Mapping[str, Any]) -> tuple[Any, ...]:
    """``(builder, network, parser)`` for an ONNX ``model`` with the network ``options`` applied, or
    ``(builder, network)``, an empty network (``strongly_typed`` honoured), without a model."""
    from parity_trt import factory  # here: generated scripts call this; the CLI's --help never does
    from parity_trt import network as networks  # not `network`: the conformance walk reads network.X as TensorRT's INetworkDefinition

    if model is None:
        return networks.CreateNetwork(strongly_typed=bool(options.get("strongly_typed")))()
    factory.check_options(options)
    if not any(options.get(key) for key in ONNX_EDITS):
        return tuple(networks.unpack(factory.network_loader(model, options)()))
    # the ONNX model edited first, parsed from a private copy; its external data still read from where it is
    data_dir = str(onnx_models.data_dir(model, options.get("external_data_dir")))
    with tempfile.TemporaryDirectory(prefix="parity-network-") as tmp:
        edited = os.path.join(tmp, os.path.basename(model))
        _save(edit_onnx(model, options, data_dir), edited)
        rest = {k: v for k, v in options.items() if k not in ONNX_EDITS}
        return tuple(networks.unpack(factory.network_loader(edited, {**rest, "external_data_dir": data_dir})()))


ONNX_EDITS = ("onnx_outputs", "onnx_exclude_outputs", "onnx_outputs_by_type", "fp_to_fp16")


def _save(model: Any, path: str) -> None:
    import onnx  # here: only an edited model is written

    onnx.save(model, path)


def edit_onnx(model: str, options: Mapping[str, Any], data_dir: str) -> Any:
    """The ONNX model with Polygraphy's ONNX edits before TensorRT parses it: ``--onnx-outputs`` (fnmatch patterns,
    or every tensor), ``--onnx-exclude-outputs``, ``--onnx-outputs-by-type``, ``--fp-to-fp16``."""
    if options.get("fp_to_fp16"):
        with tempfile.TemporaryDirectory(prefix="parity-network-") as tmp:
            proto = onnx_models.load(fp16_copy(model, data_dir, tmp))
    else:
        proto = onnx_models.load(model, load_external_data=False, external_data_dir=data_dir)
    graph = proto.graph
    produced = [o for node in graph.node for o in node.output if o]
    names = [*(v.name for v in graph.input), *produced]
    patterns = list(options.get("onnx_outputs") or ())
    wanted = produced if onnx_models.wants_all(patterns) else _matching(patterns, names, "--onnx-outputs") if patterns else [o.name for o in graph.output]
    types = {t.lower() for t in options.get("onnx_outputs_by_type") or ()}
    for missing in sorted(types - {node.op_type.lower() for node in graph.node}):
        echo(f"parity: warning: --onnx-outputs-by-type: the model has no node of type '{missing}'", err=True)
    wanted = [*wanted, *(o for node in graph.node if node.op_type.lower() in types for o in node.output if o)]
    dropped = set(_matching(list(options.get("onnx_exclude_outputs") or ()), names, "--onnx-exclude-outputs"))
    return onnx_models.mark_outputs(proto, [n for n in dict.fromkeys(wanted) if n not in dropped])


def _matching(patterns: list[str], names: list[str], option: str) -> list[str]:
    found = []
    for pattern in patterns:
        hits = fnmatch.filter(names, pattern)
        if not hits:
            raise UsageError(f"{option}: no tensor of the model matches '{pattern}'")
        found += hits
    return found


def load_config_with(model: str | None, options: Mapping[str, Any]) -> Any:
    """A ``(builder, network) -> IBuilderConfig`` callable applying the build ``options`` (``model``: for int8
    calibration data, optional)."""
    from parity_trt import config as configs  # not `config`: the conformance walk reads config.X as IBuilderConfig's
    from parity_trt import factory  # here: see load_network_with

    factory.check_options(options)
    return factory.config_loader(model or "", options, configs.build_extensions(options))


def _literal(options: Mapping[str, Any]) -> str:
    kept = {k: (list(v) if isinstance(v, tuple) else v) for k, v in sorted(options.items()) if v not in (None, False, (), [])}
    for key in ("external_data_dir", "load_timing_cache", "calibration_cache", "trt_network_postprocess_script",
                "trt_config_postprocess_script", "data_loader_script"):  # fmt: skip
        if isinstance(kept.get(key), str):
            kept[key] = os.path.abspath(kept[key])
    for key in ("trt_plugins", "load_inputs"):
        if kept.get(key):
            kept[key] = [os.path.abspath(p) for p in kept[key]]
    return pprint.pformat(kept, indent=4, width=100)


NETWORK_SCRIPT = '''\
#!/usr/bin/env python3
"""Creates a TensorRT network{what}. Written by: {command}
Load it with: parity run THIS_FILE.py --trt (or --trt-network-func THIS_FILE.py:load_network)."""
from parity_trt.templates import load_network_with

MODEL = {model!r}
# the network options of the command that wrote this script (as for parity convert)
OPTIONS = {options}


def load_network():
    {unpack} = load_network_with(MODEL, OPTIONS)

    # Set up or change the network here with TensorRT's network API, e.g.:
    #   tensor = network.get_input(0)
    #   layer = network.add_identity(tensor)
    #   network.mark_output(layer.get_output(0))

    return {unpack}
'''

CONFIG_SCRIPT = '''\
#!/usr/bin/env python3
"""Creates a TensorRT builder config. Written by: {command}
Use it with: parity run model.onnx --trt --trt-config-script THIS_FILE.py (its load_config)."""
from parity_trt.templates import load_config_with

MODEL = {model!r}
# the builder options of the command that wrote this script (as for parity convert)
OPTIONS = {options}


def load_config(builder, network):
    config = load_config_with(MODEL, OPTIONS)(builder, network)

    # Change the config here with TensorRT's API, e.g.:
    #   config.set_flag(trt.BuilderFlag.FP16)   (after import tensorrt as trt)

    return config
'''


def network_script(model: str | None, options: Mapping[str, Any], command: str) -> str:
    return NETWORK_SCRIPT.format(
        what=f" from {os.path.basename(model)}" if model else " with the network API",
        command=command, model=os.path.abspath(model) if model else None, options=_literal(options),
        unpack="builder, network, parser" if model else "builder, network",
    )  # fmt: skip


def config_script(model: str | None, options: Mapping[str, Any], command: str) -> str:
    return CONFIG_SCRIPT.format(command=command, model=os.path.abspath(model) if model else None, options=_literal(options))
