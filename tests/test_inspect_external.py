"""``parity inspect model`` on ONNX models with external data (issue 25): no weight is read, the data files are
checked where ``--external-data-dir`` says (default the model's folder), or not at all with
``--ignore-external-data``; bad combinations are one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest


@pytest.fixture()
def lone(llm_decoder, tmp_path) -> tuple[Path, Path]:
    """The decoder's graph alone in tmp_path (its data file stays in the fixture's folder), and that folder."""
    decoder = llm_decoder()
    shutil.copy(decoder, tmp_path / "decoder.onnx")
    return tmp_path / "decoder.onnx", decoder.parent


def _one_line(err: str) -> None:
    assert err.count("\n") == 1 and err.startswith("parity: error:") and "Traceback" not in err, err


def test_inspect_names_the_external_data_without_reading_it(parity_invoke, llm_decoder, monkeypatch):
    from parity.api import onnx_external

    def refuse(*_: object) -> None:
        raise AssertionError("a weight was read")

    monkeypatch.setattr(onnx_external.WeightReader, "buffer", refuse)
    code, out, err = parity_invoke("inspect", "model", llm_decoder(), "--show", "weights")
    assert code == 0, err
    assert "of them in external data: decoder.onnx.data" in out
    assert "lm_head/weight: float32[256,1000] (external data: decoder.onnx.data)" in out


def test_ignore_external_data_needs_no_data_file(parity_invoke, lone):
    model, _ = lone
    code, _, err = parity_invoke("inspect", "model", model)
    assert code == 3 and "decoder.onnx.data" in err and "missing" in err
    _one_line(err)
    code, out, err = parity_invoke("inspect", "model", model, "--ignore-external-data", "--show", "layers", "weights")
    assert code == 0, err
    assert "input_ids: int64[1,16]" in out and "logits: float32[1,16,1000]" in out and "(external data: decoder.onnx.data)" in out
    code, out, err = parity_invoke("inspect", "model", model, "--ignore-external-data", "--json")
    assert code == 0, err
    facts = json.loads(out)
    assert facts["nodes"] == 74 and facts["outputs"]["logits"]["shape"] == [1, 16, 1000]


def test_external_data_dir_points_at_the_data(parity_invoke, lone):
    model, folder = lone
    code, out, err = parity_invoke("inspect", "model", model, "--external-data-dir", folder)
    assert code == 0 and "external data: decoder.onnx.data" in out, err
    code, out, err = parity_invoke("inspect", "model", model, "--ext", folder, "--json")
    assert code == 0 and json.loads(out)["initializers"] == 44, err


def test_bad_external_data_options_are_one_line(parity_invoke, lone, tmp_path):
    model, folder = lone
    code, _, err = parity_invoke("inspect", "model", model, "--external-data-dir", tmp_path / "nowhere")
    assert code == 2 and "not a folder" in err
    _one_line(err)
    code, _, err = parity_invoke("inspect", "model", model, "--external-data-dir", folder, "--ignore-external-data")
    assert code == 2
    _one_line(err)
    code, _, err = parity_invoke("inspect", "model", model, "--external-data-dir", model)
    assert code == 2 and "Traceback" not in err
