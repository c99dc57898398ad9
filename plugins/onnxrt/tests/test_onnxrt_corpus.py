"""The onnxrt runner on trained corpus models (tests/corpus)."""

from __future__ import annotations

import numpy as np
import pytest
from parity_onnxrt import OnnxrtRunner, SessionFromOnnx


@pytest.mark.corpus
def test_silero_vad_scalar_sr_keeps_rank_0_and_mark_all_runs(corpus_model, parity_invoke):
    from corpus import MODELS

    path = corpus_model("silero_vad")
    with OnnxrtRunner(SessionFromOnnx(str(path), graph_optimization_level="disable")) as runner:
        meta = runner.get_input_metadata()
        assert meta["sr"].shape == () and meta["sr"].dtype == np.int64  # a true scalar, not unknown rank
        feed = {"input": np.zeros((1, 512), np.float32), "state": np.zeros((2, 1, 128), np.float32), "sr": np.array(16000)}
        first = runner.infer(feed)
        second = runner.infer(feed)
    for name in first:
        np.testing.assert_array_equal(first[name], second[name])
    code, out, err = parity_invoke("run", path, "--onnxrt", "--onnxrt=graph-optimization-level=disable", "--onnx-outputs", "mark", "all", *MODELS["silero_vad"].run_args)
    assert code == 0, err
    assert "PASSED" in out
