"""The command tree is lazy: `parity --help` lists every command with its help and imports none of the command
modules (checked in a fresh interpreter); a command's module is imported when it runs or shows its --help;
the described help says what the command itself says."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest

# what `parity --help` may import from Parity and its plugins: the CLI's frame, the registry, hook modules
ALLOWED = {
    "parity", "parity.api", "parity.core_plugin", "parity.cli", "parity.cli.common", "parity.cli.lazy", "parity.cli.parsing",
    "parity.console", "parity.errors", "parity.hookspecs", "parity.plugins", "parity.registry", "parity.util",
    "parity.util.lazy", "parity.util.text",
}  # fmt: skip
HEAVY = ("numpy", "onnx", "onnxruntime", "tensorrt", "torch", "onnx_graphsurgeon", "importlib.metadata")

PROBE = f"""
import io, json, sys, contextlib
from parity.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(sys.argv[1:])
mods = sorted(m for m in sys.modules if m.split('.')[0].startswith('parity') or m.split('.')[0] in {HEAVY!r} or m == 'importlib.metadata')
print(json.dumps({{"code": code, "out": out.getvalue(), "modules": mods}}))
"""


def probe(*argv: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def tree() -> tuple[click.Group, list[tuple[str, object]]]:
    """The root and every (path, lazy-or-loaded entry) of it, without loading anything."""
    from parity.cli import build_cli

    cli = build_cli()
    entries = []
    for name, item in [*cli.lazy.items(), *cli.commands.items()]:
        entries.append((name, item))
        if isinstance(item, click.Group):
            entries += [(f"{name} {sub}", spec) for sub, spec in [*getattr(item, "lazy", {}).items(), *item.commands.items()]]
    return cli, entries


def test_root_help_lists_every_command_and_imports_no_command_module():
    report = probe("--help")
    assert report["code"] == 0
    extra = [m for m in report["modules"] if m not in ALLOWED and not m.endswith((".hooks", ".hookspecs")) and m.count(".") <= 1 and "." in m]
    heavy = [m for m in report["modules"] if m.split(".")[0] in HEAVY or m == "importlib.metadata"]
    assert heavy == [], f"parity --help imported {heavy}"
    assert extra == [], f"parity --help imported modules beyond the CLI frame and plugin hooks: {extra}"
    _, entries = tree()
    top = [(path, item) for path, item in entries if " " not in path]
    assert {"run", "convert", "inspect", "debug", "data", "plugins", "surgeon", "check"} <= {p for p, _ in top}
    for path, item in top:
        text = item.help if hasattr(item, "target") else item.get_short_help_str(200)
        assert path in report["out"] and text.split()[0] in report["out"], f"{path} missing from parity --help"


@pytest.mark.parametrize("group", ["inspect", "debug", "data", "surgeon", "check"])
def test_group_help_imports_no_command_module(group):
    report = probe(group, "--help")
    assert report["code"] == 0
    _, entries = tree()
    for path, item in entries:
        if path.startswith(f"{group} ") and not getattr(item, "hidden", False):
            assert path.split()[1] in report["out"]
            target = getattr(item, "target", None)
            if target:
                assert target.split(":")[0] not in report["modules"] or target.split(":")[0].endswith(".hooks"), f"{group} --help imported {target}"


def test_a_command_loads_when_it_shows_its_help():
    report = probe("debug", "repeat", "--help")
    assert report["code"] == 0 and "parity.cli.debug" in report["modules"] and "--until" in report["out"]
    assert "parity.cli.run" not in report["modules"]


def test_described_help_matches_the_command():
    """A described command's one-line help is what the command itself would show, and its target loads."""
    _, entries = tree()
    described = [(path, item) for path, item in entries if hasattr(item, "target")]
    assert len(described) >= 8
    for path, spec in described:
        command = spec.load()
        assert command.name == path.split()[-1]
        assert spec.help == command.get_short_help_str(500), f"'parity {path}': described help differs from the command's"
        assert spec.hidden == command.hidden


def test_plugin_options_join_a_command_when_it_loads():
    from parity.cli import build_cli

    cli = build_cli()
    ctx = click.Context(cli)
    run = cli.get_command(ctx, "run")
    names = [o for p in run.params for o in getattr(p, "opts", [])]
    assert "--onnxrt" in names
    assert cli.get_command(ctx, "run") is run  # loaded once
