"""Every command on every corpus model (tests/corpus): it answers with a documented exit code and no traceback,
and every model it writes passes onnx.checker with full shape inference and loads in onnxruntime."""

from __future__ import annotations

import pytest
from corpus import MODELS
from corpus.commands import COMMANDS, assert_loadable, run

pytestmark = [pytest.mark.corpus, pytest.mark.slow]


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("model", list(MODELS))
def test_command_on_corpus_model(model, command, tmp_path):
    spec, corpus_model = COMMANDS[command], MODELS[model]
    proc = run(spec, corpus_model, tmp_path)
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode in spec.ok_codes, f"exit {proc.returncode}\n{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}"
    for written in spec.writes:
        assert_loadable(tmp_path / written)
