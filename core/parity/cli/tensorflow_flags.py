"""Polygraphy's TensorFlow flags, as hidden options that refuse in one line (exit 2): Parity has no TensorFlow
backend, so these cannot apply. They are real options (not "No such option") so the refusal names the reason,
whatever the flag's position or value."""

from __future__ import annotations

from typing import Any

import click

from parity.cli.parsing import GreedyOption
from parity.errors import UsageError

WHY = "Parity has no TensorFlow backend; convert the model to ONNX (e.g. with tf2onnx) and run that"

# flag spellings -> takes a value; Polygraphy 0.53.6's TfRunnerArgs, TfTrtArgs, TfLoadArgs, TfConfigArgs, OnnxFromTfArgs
RUN_FLAGS: dict[tuple[str, ...], bool] = {
    ("--tf",): False,
    ("--tftrt", "--use-tftrt"): False,
    ("--minimum-segment-size",): True,
    ("--dynamic-op",): False,
    ("--ckpt",): True,
    ("--tf-outputs",): True,
    ("--save-pb",): True,
    ("--save-tensorboard",): True,
    ("--freeze-graph",): False,
    ("--gpu-memory-fraction",): True,
    ("--allow-growth",): False,
    ("--xla",): False,
    ("--save-timeline",): True,
    ("--opset",): True,
}
# what `polygraphy convert` takes of them (TfLoadArgs without TF-TRT, OnnxFromTfArgs)
CONVERT_FLAGS = ("--ckpt", "--tf-outputs", "--freeze-graph", "--opset")


def _refuse(ctx: click.Context, param: click.Parameter, value: Any) -> None:  # noqa: ARG001 - click's callback signature
    if value not in (None, False, ()):
        raise UsageError(f"{'/'.join(param.opts)} is a TensorFlow option: {WHY}")


def tensorflow_options(only: tuple[str, ...] | None = None) -> list[click.Option]:
    """Hidden options that refuse each of Polygraphy's TensorFlow flags (``only``: those whose first spelling is
    listed; default all of ``run``'s)."""
    params: list[click.Option] = []
    for flags, takes_value in RUN_FLAGS.items():
        if only is not None and flags[0] not in only:
            continue
        name = "tf_" + flags[0].lstrip("-").replace("-", "_")
        kwargs: dict[str, Any] = {"hidden": True, "expose_value": False, "callback": _refuse}
        if flags[0] == "--tf-outputs":
            params.append(GreedyOption([*flags, name], **kwargs))
        elif takes_value:
            params.append(click.Option([*flags, name], type=str, default=None, **kwargs))
        else:
            params.append(click.Option([*flags, name], is_flag=True, default=False, **kwargs))
    return params
