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


def test_to_input_writes_polygraphy_json_unless_npz(main, affine_model, tmp_path):
    """Polygraphy's name for merge: its scripts read -o as Polygraphy's JSON, whatever the suffix."""
    import json

    inputs, outputs = tmp_path / "in", tmp_path / "out"  # no suffix: Parity's archive, as `polygraphy run` users write them
    assert main("run", affine_model, "--onnxrt", "--save-inputs", inputs, "--save-outputs", outputs)[0] == 0
    assert main("data", "to-input", inputs, outputs, "-o", tmp_path / "merged")[0] == 0
    data = json.loads((tmp_path / "merged").read_text())  # JSON, not a zip archive
    assert isinstance(data, list) and len(data) == 1 and sorted(data[0]) == ["x", "y"]
    (feed,) = load_inputs(tmp_path / "merged")
    assert np.array_equal(feed["x"], load_inputs(inputs)[0]["x"]) and np.array_equal(feed["y"], load_results(outputs)["onnxrt-0"][0]["y"])
    assert main("data", "to-input", inputs, outputs, "-o", tmp_path / "merged.npz")[0] == 0
    assert (tmp_path / "merged.npz").read_bytes()[:2] == b"PK"  # .npz: Parity's archive, as data merge writes it
    assert main("run", affine_model, "--onnxrt", "--load-inputs", tmp_path / "merged")[0] == 0
