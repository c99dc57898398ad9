"""TensorRT commands: ``parity inspect trt-network`` (a network script, with ``--trt-network-func``).

``parity convert model.onnx -o model.engine`` is the core's command, through the converter this plugin registers."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from parity.api import ParityError


def _one_line_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Expected failures print one line and exit with their code (the core's main does the same)."""

    def wrapper(**kwargs: Any) -> Any:
        try:
            return func(**kwargs)
        except ParityError as exc:
            click.echo(f"parity: error: {exc}", err=True)
            sys.exit(int(exc.exit_code))

    wrapper.__name__ = func.__name__
    wrapper.__doc__ = func.__doc__
    return wrapper


def _inspect_network(script: str, trt_network_func: str, show: tuple[str, ...]) -> None:
    """Print the TensorRT network a script builds (``file.py``, function from --trt-network-func)."""
    from parity_trt.inspect import describe_network
    from parity_trt.network import NetworkFromScript, unpack

    _builder, network, _parser = unpack(NetworkFromScript(script, trt_network_func)())
    click.echo(describe_network(network, show))


def inspect_network_command() -> click.Command:
    params = [
        click.Argument(["script"]),
        click.Option(["--trt-network-func"], default="load_network", show_default=True, help="Function returning (builder, network[, parser])."),
        click.Option(["--show"], multiple=True, type=click.Choice(["layers", "attrs", "weights"]), help="What to list."),
    ]
    return click.Command("trt-network", callback=_one_line_errors(_inspect_network), params=params, help=_inspect_network.__doc__)


def add_commands(cli: click.Group) -> None:
    inspect_group = cli.commands.get("inspect")
    if inspect_group is None:
        try:
            from parity.commands import group  # the core's helper, once the core CLI exists
        except ImportError:
            return
        inspect_group = group(cli, "inspect")
    if isinstance(inspect_group, click.Group) and "trt-network" not in inspect_group.commands:
        inspect_group.add_command(inspect_network_command())
