"""The ``--save-tactics``/``--load-tactics`` options for ``run --trt``, ``convert`` and ``debug build``.

Nothing here imports TensorRT; :func:`parity_tactics.trt_tactics.build_hooks` turns the parsed values into
the recorder/replayer the TensorRT builder calls.
"""

from __future__ import annotations

import click

# the choices of --tactics-mechanism; trt_tactics checks against this (it is not imported here: declaring
# options runs at every start-up, recording tactics only when asked)
MECHANISMS = ("auto", "timing-cache", "algorithm-selector")


def tactic_options() -> list[click.Option]:
    return [
        click.Option(
            ["--save-tactics", "--save-tactic-replay", "save_tactics"],
            type=click.Path(dir_okay=False),
            default=None,
            help="Record the tactics TensorRT chooses to this replay JSON (per layer on 10.x, per timing-cache key on 10.8+/11).",
        ),
        click.Option(
            ["--load-tactics", "--load-tactic-replay", "load_tactics"],
            type=click.Path(dir_okay=False),
            default=None,
            help="Make TensorRT use the tactics of this replay JSON (Parity or Polygraphy format).",
        ),
        click.Option(
            ["--tactics-mechanism"],
            type=click.Choice(MECHANISMS),
            default="auto",
            show_default=True,
            help="How to record tactics: the editable timing cache (TensorRT 10.8+) or IAlgorithmSelector (10.x only).",
        ),
    ]
