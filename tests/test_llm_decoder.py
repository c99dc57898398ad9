"""bench/llm_decoder.py: streamed external weights, a valid ONNX model onnxruntime runs, the causal mask, the planted
float16 overflow."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

ort = pytest.importorskip("onnxruntime")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import llm_decoder  # noqa: E402

SMALL = dict(layers=2, hidden=64, heads=4, vocab=100, seq=8)
FP16_MAX = llm_decoder.FP16_MAX


def _ids(seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, SMALL["vocab"], (1, SMALL["seq"]))


def _run_with_outputs(path: Path, extra: list[str], ids: np.ndarray) -> list[np.ndarray]:
    """Runs ``path`` with ``extra`` intermediate tensors added as graph outputs. The edited copy goes into the
    same folder, so the relative data location still resolves."""
    model = onnx.load(str(path), load_external_data=False)
    for name in extra:
        model.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    edited = path.with_name(path.stem + "_outputs.onnx")
    edited.write_bytes(model.SerializeToString())
    return ort.InferenceSession(str(edited), providers=["CPUExecutionProvider"]).run(None, {"input_ids": ids})


def test_weights_stream_into_one_aligned_data_file(tmp_path):
    info = llm_decoder.build_decoder(tmp_path / "m.onnx", **SMALL)
    path, data = Path(info["path"]), Path(info["data"])
    assert data == tmp_path / "m.onnx.data" and sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "m.onnx.data"]
    assert path.stat().st_size < 32 * 1024 < info["weight_bytes"]
    assert data.stat().st_size == info["data_bytes"] and info["data_bytes"] + info["inline_bytes"] >= info["weight_bytes"]

    model = onnx.load(str(path), load_external_data=False)
    assert model.ir_version == 10 and [(o.domain, o.version) for o in model.opset_import] == [("", 17)]
    external = [t for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    inline = [t for t in model.graph.initializer if t.data_location != onnx.TensorProto.EXTERNAL]
    assert {"embed/tokens", "lm_head/weight", "block1/mlp/up/weight"} <= {t.name for t in external}
    assert {"block0/ln1/scale", "block0/attn/q/bias"} <= {t.name for t in inline}  # under the 1024-byte threshold
    for t in external:
        entries = {e.key: e.value for e in t.external_data}
        assert entries["location"] == "m.onnx.data" and int(entries["offset"]) % 4096 == 0
        assert int(entries["length"]) == 4 * int(np.prod(t.dims))
    assert all(t.raw_data for t in inline)

    # every node named after its block, every tensor named, all unique
    names = [n.name for n in model.graph.node]
    assert len(set(names)) == len(names) and "block1/mlp/up" in names and all(names)
    outputs = [o for n in model.graph.node for o in n.output]
    assert len(set(outputs)) == len(outputs) and all(outputs)

    # the weights on disk are the initializers onnx reads back through the external data
    full = onnx.load(str(path))
    weight = onnx.numpy_helper.to_array(next(t for t in full.graph.initializer if t.name == "lm_head/weight"))
    assert weight.shape == (64, 100) and 0.08 < weight.std() < 0.17  # ~ 1/sqrt(64)


def test_threshold_moves_small_tensors_into_the_data_file(tmp_path):
    info = llm_decoder.build_decoder(tmp_path / "m.onnx", **SMALL, threshold=0)
    model = onnx.load(info["path"], load_external_data=False)
    inline = {t.name for t in model.graph.initializer if t.data_location != onnx.TensorProto.EXTERNAL}
    assert inline == {"const/shape_heads", "const/shape_hidden"}  # onnxruntime cannot load external Reshape shapes
    ort.InferenceSession(info["path"], providers=["CPUExecutionProvider"]).run(None, {"input_ids": _ids()})


def test_checker_and_onnxruntime_accept_it(tmp_path):
    info = llm_decoder.build_decoder(tmp_path / "m.onnx", **SMALL, batch=2)
    onnx.checker.check_model(info["path"], full_check=True)
    ids = np.random.default_rng(1).integers(0, SMALL["vocab"], (2, SMALL["seq"]))
    (logits,) = ort.InferenceSession(info["path"], providers=["CPUExecutionProvider"]).run(None, {"input_ids": ids})
    assert logits.shape == (2, SMALL["seq"], SMALL["vocab"]) and logits.dtype == np.float32
    assert np.isfinite(logits).all() and 0.3 < logits.std() < 3


def test_attention_is_causal(tmp_path):
    info = llm_decoder.build_decoder(tmp_path / "m.onnx", **SMALL)
    session = ort.InferenceSession(info["path"], providers=["CPUExecutionProvider"])
    ids = _ids()
    changed = ids.copy()
    changed[0, -1] = (ids[0, -1] + 1) % SMALL["vocab"]
    before, after = (session.run(None, {"input_ids": x})[0] for x in (ids, changed))
    np.testing.assert_allclose(after[:, :-1], before[:, :-1], rtol=1e-5, atol=1e-5)  # earlier positions never see it
    assert np.abs(after[:, -1] - before[:, -1]).max() > 1e-2


def test_same_seed_same_model(tmp_path):
    a = llm_decoder.build_decoder(tmp_path / "a.onnx", **SMALL)
    b = llm_decoder.build_decoder(tmp_path / "b.onnx", **SMALL)
    assert Path(a["data"]).read_bytes() == Path(b["data"]).read_bytes()


def test_overflow_block_overflows_float16_only(tmp_path):
    ids = _ids()
    plain = llm_decoder.build_decoder(tmp_path / "plain.onnx", **SMALL)
    planted = llm_decoder.build_decoder(tmp_path / "planted.onnx", **SMALL, overflow_block=1)
    assert planted["overflow_tensor"] == llm_decoder.gelu_output(1) and plain["overflow_tensor"] is None
    names = [llm_decoder.mlp_up_output(1), llm_decoder.gelu_output(1), llm_decoder.gelu_output(0)]

    logits, up, gelu, gelu0 = _run_with_outputs(Path(planted["path"]), names, ids)
    assert np.isfinite(logits).all() and np.abs(logits).max() < 100
    assert np.abs(up).max() > FP16_MAX and np.abs(gelu).max() > FP16_MAX
    with np.errstate(over="ignore"):
        assert not np.isfinite(gelu.astype(np.float16)).all()  # what a float16 model would hold there
    assert np.abs(gelu0).max() < FP16_MAX  # only the planted block

    logits_plain, up, gelu, _ = _run_with_outputs(Path(plain["path"]), names, ids)
    assert np.abs(up).max() < FP16_MAX and np.abs(gelu).max() < FP16_MAX
    # block 0 is untouched, so the residual stream into block 1 is the same; only block 1's MLP differs
    # (gelu(F*h)/F ~ relu(h)), so the logits move but stay in the same range
    assert 0.5 < np.abs(logits).max() / np.abs(logits_plain).max() < 2


def test_layers_for_gib_matches_the_written_size(tmp_path):
    # the docstring's example: hidden 2048, vocab 32000, ffn 8192 -> 2.4 GiB is about 10 blocks
    assert llm_decoder.layers_for_gib(2.4, 2048, 32000, 8192, 128) == 10
    layers = llm_decoder.layers_for_gib(0.002, 64, 100, None, 8)
    info = llm_decoder.build_decoder(tmp_path / "m.onnx", **{**SMALL, "layers": layers})
    assert abs(info["weight_bytes"] / (0.002 * (1 << 30)) - 1) < 0.1


def test_cli(tmp_path, capsys):
    out = tmp_path / "sub" / "m.onnx"
    argv = [str(out), "--gib", "0.002", "--hidden", "64", "--heads", "4", "--vocab", "100", "--seq", "8", "--overflow-block", "0", "--threshold", "4096"]
    assert llm_decoder.main(argv) == 0
    line = capsys.readouterr().out
    assert str(out) in line and "GiB" in line and "overflow block 0" in line
    model = onnx.load(str(out), load_external_data=False)
    by_name = {t.name: t for t in model.graph.initializer}
    assert by_name["block0/mlp/up/bias"].data_location != onnx.TensorProto.EXTERNAL  # 1 KiB, under 4096
    assert by_name["block0/mlp/up/weight"].data_location == onnx.TensorProto.EXTERNAL
