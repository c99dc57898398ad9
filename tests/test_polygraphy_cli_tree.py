"""Polygraphy's command tree, walked (issue 29): every tool, subtool and flag that ``polygraphy -h`` knows,
recursively, is known to ``parity``'s parser, so a new Polygraphy release shows at once what Parity lacks.

Polygraphy (a development dependency) builds its argparse tree without importing TensorRT or onnxruntime; the
walk reads it and Parity's click tree (every installed first-party plugin loaded) and compares the two. Known
means: a real option of that command (an alias counts), or a TensorFlow flag, refused in one line because Parity
has no TensorFlow backend (the only refusal issue 29 allows). ``NOT_YET`` is the backlog, kept honest: an entry
that has become a real option fails the test until it is removed from the list.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import click
import polygraphy
import pytest

from parity.cli import build_cli

POLYGRAPHY_TOOLS = Path(polygraphy.__file__).parent / "tools"
HELP = {"-h", "--help"}

# Flags still missing, per command path (issue 29's backlog; each entry is checked to be still missing).
NOT_YET: dict[str, set[str]] = {}


def tensorflow_flags() -> set[str]:
    """Flags only Polygraphy's TensorFlow backend reads: those its tf argument groups define, the runners' names,
    and --opset (the opset of TensorFlow-to-ONNX conversion)."""
    flags = {"--tf", "--opset"}
    for source in (POLYGRAPHY_TOOLS / "args" / "backend" / "tf").glob("*.py"):
        flags |= set(re.findall(r"\"(--[a-z0-9-]+)\"", source.read_text()))
    return flags


def polygraphy_tree() -> dict[tuple[str, ...], set[str]]:
    from polygraphy.tools.registry import TOOL_REGISTRY

    root = argparse.ArgumentParser(prog="polygraphy")
    tools = root.add_subparsers()
    for tool in TOOL_REGISTRY:
        tool.setup_parser(tools)
    tree: dict[tuple[str, ...], set[str]] = {}

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        flags: set[str] = set()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*path, name))
            else:
                flags.update(action.option_strings)
        tree[path] = flags - HELP

    walk(root, ())
    return tree


def parity_tree() -> dict[tuple[str, ...], set[str]]:
    tree: dict[tuple[str, ...], set[str]] = {}

    def walk(command: click.Command, path: tuple[str, ...], ctx: click.Context) -> None:
        tree[path] = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts) if opt.startswith("-")}
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                walk(sub, (*path, name), click.Context(sub, parent=ctx, info_name=name))

    cli = build_cli()
    walk(cli, (), click.Context(cli, info_name="parity"))
    return tree


@pytest.fixture(scope="module")
def trees():
    return polygraphy_tree(), parity_tree()


def test_every_polygraphy_command_exists(trees):
    polygraphy_commands, parity_commands = trees
    missing = sorted(" ".join(path) for path in polygraphy_commands if path not in parity_commands)
    assert not missing, f"Polygraphy commands parity lacks: {missing}"


def test_every_polygraphy_flag_is_known(trees):
    polygraphy_commands, parity_commands = trees
    tensorflow = tensorflow_flags()
    missing = {}
    for path, flags in polygraphy_commands.items():
        lacking = flags - parity_commands.get(path, set()) - tensorflow - NOT_YET.get(" ".join(path), set())
        if lacking:
            missing[" ".join(path) or "parity"] = sorted(lacking)
    assert not missing, f"Polygraphy flags parity's parser lacks: {missing}"


def test_the_backlog_is_still_missing(trees):
    """An entry of NOT_YET that parity now knows must leave the list (so the backlog never overstates)."""
    polygraphy_commands, parity_commands = trees
    done = {path: sorted(flags & parity_commands.get(tuple(path.split()), set())) for path, flags in NOT_YET.items()}
    unknown = sorted(set(NOT_YET) - {" ".join(p) for p in polygraphy_commands})
    assert not {p: f for p, f in done.items() if f} and not unknown, (done, unknown)


def test_tensorflow_flags_are_refused_in_one_line(tmp_path):
    """A TensorFlow flag gets one line saying why (exit 2), never click's 'No such option', and writes nothing."""
    model = Path(__file__).resolve().parents[1] / "examples" / "models" / "tiny_cnn.onnx"
    for flags in (["--tf"], ["--save-pb", "out.pb"], ["--xla"]):
        proc = subprocess.run([sys.executable, "-m", "parity", "run", str(model), "--onnxrt", *flags], capture_output=True, text=True, cwd=tmp_path, timeout=120)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and "TensorFlow" in lines[0], proc.stderr
        assert "No such option" not in lines[0]
    assert list(tmp_path.iterdir()) == []
