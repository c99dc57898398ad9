"""docs/torch.md end to end: its Python block exports the model (and the planted broken copy) in a fresh folder, then
every line of its ```sh blocks runs there with the exit code the page gives (``# exit N``, default 0), and what the
page shows of the first divergence is what the commands print."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxscript")

PAGE = Path(__file__).resolve().parents[3] / "docs" / "torch.md"


def sh_lines(text: str) -> list[tuple[list[str], int]]:
    lines = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        for line in block.strip().splitlines():
            found = re.search(r"#\s*exit\s+(\d+)\s*$", line)
            code, line = (int(found.group(1)), line[: found.start()]) if found else (0, line)
            if line.strip():
                lines.append((shlex.split(line), code))
    return lines


def test_the_page_runs(parity_invoke, tmp_path):
    text = PAGE.read_text()
    [code] = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    (tmp_path / "export.py").write_text(code)
    made = subprocess.run([sys.executable, "export.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr[-3000:]
    commands = sh_lines(text)
    assert len(commands) >= 8 and all(args[0] == "parity" for args, _ in commands)
    printed = {}
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        for args, expected in commands:
            result = parity_invoke(*args[1:])  # in this process: torch is imported once for the page
            assert result.exit_code == expected, f"{shlex.join(args)}\nexit {result.exit_code}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
            printed[shlex.join(args)] = result.stdout
    finally:
        os.chdir(cwd)
    shown = re.search(r"^(First divergence: .*?\(Conv2d\)):", text, re.M).group(1)
    localized = next(out for line, out in printed.items() if line.startswith("parity debug localize"))
    layerwise = next(out for line, out in printed.items() if "--report layers.json" in line)
    assert shown in localized and shown in layerwise and "INTRODUCES the error" in localized
    assert (tmp_path / "layers.json").is_file()
