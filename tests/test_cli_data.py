"""`parity data concat` and `parity data merge` on real run files."""

from __future__ import annotations

import numpy as np

from parity.results import load_inputs, load_results


def test_concat_inputs_and_outputs(main, affine_model, tmp_path):
    for i in (1, 2):
        assert main("run", affine_model, "--onnxrt", "--seed", i, "--iterations", i,
                    "--save-inputs", tmp_path / f"in{i}.npz", "--save-outputs", tmp_path / f"out{i}.npz")[0] == 0  # fmt: skip
    assert main("data", "concat", tmp_path / "in1.npz", tmp_path / "in2.npz", "-o", tmp_path / "in.npz")[0] == 0
    feeds = load_inputs(tmp_path / "in.npz")
    assert len(feeds) == 3 and np.array_equal(feeds[1]["x"], load_inputs(tmp_path / "in2.npz")[0]["x"])
    assert main("data", "concat", tmp_path / "out1.npz", tmp_path / "out2.npz", "-o", tmp_path / "out.npz")[0] == 0
    assert len(load_results(tmp_path / "out.npz")["onnxrt-0"]) == 3
    # the concatenated files drive a run like the originals
    assert main("run", affine_model, "--onnxrt", "--load-inputs", tmp_path / "in.npz", "--load-outputs", tmp_path / "out.npz")[0] == 0
    code, _, err = main("data", "concat", tmp_path / "in1.npz", tmp_path / "out1.npz", "-o", tmp_path / "mixed.npz")
    assert code == 2 and "only input files or only output files" in err


def test_merge_inputs_with_outputs_feeds_a_subgraph(main, affine_model, tmp_path):
    inputs, outputs = tmp_path / "in.npz", tmp_path / "out.npz"
    main("run", affine_model, "--onnxrt", "--onnx-outputs", "scaled", "y", "--save-inputs", inputs, "--save-outputs", outputs)
    assert main("data", "merge", inputs, outputs, "-o", tmp_path / "merged.npz")[0] == 0
    (feed,) = load_inputs(tmp_path / "merged.npz")
    assert sorted(feed) == ["scaled", "x", "y"]
    assert np.allclose(feed["scaled"], feed["x"] * 2)
