"""`parity --help` and `parity <cmd> --help` never import onnx, onnxruntime or tensorrt (they cost seconds)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("onnx", "onnxruntime", "tensorrt", "torch", "onnx_graphsurgeon")

PROBE = f"""
import json, sys
from parity.cli import main
code = main(sys.argv[1:])
print(json.dumps({{"code": code, "heavy": sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})}}))
"""


def commands() -> list[list[str]]:
    from parity.cli import build_cli

    cli = build_cli()
    found = [[]]
    for name, cmd in cli.commands.items():
        found.append([name])
        for sub in getattr(cmd, "commands", {}):
            found.append([name, sub])
    return found


@pytest.mark.parametrize("argv", commands(), ids=lambda a: " ".join(a) or "parity")
def test_help_imports_nothing_heavy(argv):
    result = subprocess.run([sys.executable, "-c", PROBE, *argv, "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["code"] == 0
    assert report["heavy"] == [], f"{' '.join(argv)} --help imported {report['heavy']}"
    assert "could not be loaded" not in result.stderr and "failed to load" not in result.stderr
