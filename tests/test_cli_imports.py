"""`parity --help` and `parity <cmd> --help` never import onnx, onnxruntime, tensorrt or matplotlib (they cost seconds)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("onnx", "onnxruntime", "tensorrt", "torch", "onnx_graphsurgeon", "matplotlib")

PROBE = f"""
import json, sys
from parity.cli import main
code = main(sys.argv[1:])
print(json.dumps({{"code": code, "heavy": sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})}}))
"""


def commands() -> list[list[str]]:
    """Every command path, read from the lazy tree's listing (imports no command module)."""
    import click

    from parity.cli import build_cli

    cli = build_cli()
    ctx = click.Context(cli)
    found = [[]]
    for name in cli.list_commands(ctx):
        found.append([name])
        sub = cli.commands.get(name)
        if isinstance(sub, click.Group):
            found += [[name, child] for child in sub.list_commands(ctx)]
    return found


@pytest.mark.parametrize("argv", commands(), ids=lambda a: " ".join(a) or "parity")
def test_help_imports_nothing_heavy(argv):
    result = subprocess.run([sys.executable, "-c", PROBE, *argv, "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["code"] == 0
    assert report["heavy"] == [], f"{' '.join(argv)} --help imported {report['heavy']}"
    assert "could not be loaded" not in result.stderr and "failed to load" not in result.stderr
