"""The `sh` blocks in docs/cli.md are real: run each line and check its exit code (default 0, or `# exit N`)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "docs" / "cli.md", ROOT / "docs" / "real-models.md", ROOT / "docs" / "html-report.md", ROOT / "docs" / "big-models.md"]
CORPUS_MODELS = ("silero_vad", "ppocr_det")  # copied next to the examples as NAME.onnx


def commands(page: Path) -> list[tuple[str, int]]:
    lines = []
    for block in re.findall(r"```sh\n(.*?)```", page.read_text(), flags=re.S):
        for line in block.strip().splitlines():
            code = 0
            match = re.search(r"#\s*exit\s+(\d+)\s*$", line)
            if match:
                code, line = int(match.group(1)), line[: match.start()]
            if line.strip():
                lines.append((line.strip(), code))
    return lines


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_documented_commands_run(page, tmp_path, corpus_model, llm_decoder):
    for model in (ROOT / "examples" / "models").glob("*.onnx"):
        shutil.copy(model, tmp_path)
    decoder = llm_decoder(layers=2, hidden=64, heads=4, vocab=100, seq=8, overflow_block=1)  # decoder.onnx + decoder.onnx.data
    for part in decoder.parent.iterdir():
        shutil.copy(part, tmp_path)
    for name in CORPUS_MODELS:
        shutil.copy(corpus_model(name), tmp_path / f"{name}.onnx")
    found = commands(page)
    assert found, f"no sh examples in {page}"
    for line, expected in found:
        result = subprocess.run(shlex.split(line), cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert result.returncode == expected, f"{line}\nexit {result.returncode}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
