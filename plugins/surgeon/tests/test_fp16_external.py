"""``parity convert --fp-to-fp16`` on models with external data: the weights are converted tensor by tensor as the
output is written (``parity_surgeon.fp16.write_fp16``), in the layout Polygraphy's flags ask for
(``--save-external-data [PATH]``, ``--external-data-size-threshold``, ``--no-save-all-tensors-to-one-file``,
``--external-data-dir``), or in ``<output>.data`` by itself when one file would pass protobuf's 2 GiB limit.
Every output passes the full checker on its path, runs in onnxruntime close to the fp32 model, and leaves the
input and its data file as they were and no stray file behind."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

F16 = TensorProto.FLOAT16


def _digest(*paths: Path) -> list[str]:
    return [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths]


def _logits(path: Path) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ids = np.random.RandomState(0).randint(0, 1000, (1, 16)).astype(np.int64)
    return session.run(None, {"input_ids": ids})[0]


@pytest.fixture()
def decoder(llm_decoder):
    """The fixture decoder (read-only), with digests of its two files to check afterwards."""
    src = llm_decoder()
    files = [src, src.with_name(src.name + ".data")]
    return src, files, _digest(*files)


def _converted(parity_invoke, src: Path, out: Path, *flags: str) -> str:
    code, text, err = parity_invoke("convert", "--fp-to-fp16", src, "-o", out, *flags)
    assert code == 0, err
    onnx.checker.check_model(str(out), full_check=True)
    want, got = _logits(src), _logits(out)
    assert got.dtype == np.float32  # --keep-io-types by default
    assert np.abs(got - want).max() <= 2e-2 * np.abs(want).max()
    return text + err


def _weights(out: Path) -> dict[str, TensorProto]:
    return {t.name: t for t in onnx.load(str(out), load_external_data=False).graph.initializer}


@pytest.mark.parametrize("path", [None, "w16.bin"], ids=["default-name", "given-path"])
def test_save_external_data_writes_fp16_weights_beside_the_model(parity_invoke, decoder, tmp_path, path):
    src, inputs, before = decoder
    out = tmp_path / "out" / "dec16.onnx"
    _converted(parity_invoke, src, out, "--save-external-data", *([path] if path else []))
    data = out.parent / (path or "dec16.onnx.data")
    assert sorted(p.name for p in out.parent.iterdir()) == sorted([out.name, data.name])  # no stray file
    big = [t for t in _weights(out).values() if t.data_location == TensorProto.EXTERNAL]
    assert big and all(t.data_type == F16 for t in big)
    assert {e.value for t in big for e in t.external_data if e.key == "location"} == {data.name}
    assert data.stat().st_size < 0.55 * inputs[1].stat().st_size  # half the float32 bytes, plus alignment
    halves = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(out)).graph.initializer}  # read from the data file
    for t in onnx.load(str(src)).graph.initializer:
        if t.name in {b.name for b in big}:
            assert halves[t.name].dtype == np.float16
            np.testing.assert_allclose(halves[t.name], numpy_helper.to_array(t), rtol=1e-3, atol=1e-4)
    assert _digest(*inputs) == before  # the input model and its data file are untouched


def test_size_threshold_keeps_small_tensors_inside(parity_invoke, decoder, tmp_path):
    src, inputs, before = decoder
    out = tmp_path / "dec16.onnx"
    _converted(parity_invoke, src, out, "--save-external-data", "--external-data-size-threshold", "64K")
    weights = _weights(out).values()
    inside = [t for t in weights if t.data_location != TensorProto.EXTERNAL]
    outside = [t for t in weights if t.data_location == TensorProto.EXTERNAL]
    assert inside and outside
    assert all(len(t.raw_data) < 64 * 1024 for t in inside)
    sizes = [int(next(e.value for e in t.external_data if e.key == "length")) for t in outside]
    assert min(sizes) >= 64 * 1024
    assert all(t.data_type == F16 for t in outside)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dec16.onnx", "dec16.onnx.data"]
    assert _digest(*inputs) == before


def test_one_file_per_tensor(parity_invoke, decoder, tmp_path):
    src, inputs, before = decoder
    out = tmp_path / "dec16.onnx"
    _converted(parity_invoke, src, out, "--save-external-data", "--no-save-all-tensors-to-one-file")
    outside = [t for t in _weights(out).values() if t.data_location == TensorProto.EXTERNAL]
    locations = [next(e.value for e in t.external_data if e.key == "location") for t in outside]
    assert len(set(locations)) == len(outside) > 10
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["dec16.onnx", *locations])
    assert all((tmp_path / name).stat().st_size == 2 * int(np.prod(t.dims)) for name, t in zip(locations, outside))
    assert _digest(*inputs) == before


def test_small_result_of_an_external_model_is_one_file(parity_invoke, decoder, tmp_path):
    src, inputs, before = decoder
    out = tmp_path / "dec16.onnx"
    _converted(parity_invoke, src, out)
    assert [p.name for p in tmp_path.iterdir()] == ["dec16.onnx"]
    model = onnx.load(str(out), load_external_data=False)
    assert all(t.data_location != TensorProto.EXTERNAL for t in model.graph.initializer)
    assert _digest(*inputs) == before


def test_external_data_dir_reads_weights_from_another_folder(parity_invoke, llm_decoder, tmp_path):
    src = llm_decoder()
    (tmp_path / "m").mkdir()
    (tmp_path / "w").mkdir()
    shutil.copy(src, tmp_path / "m" / src.name)
    shutil.copy(src.with_name(src.name + ".data"), tmp_path / "w" / (src.name + ".data"))
    out = tmp_path / "o" / "dec16.onnx"
    code, _, err = parity_invoke("convert", "--fp-to-fp16", tmp_path / "m" / src.name, "-o", out, "--save-external-data", "--external-data-dir", tmp_path / "w")
    assert code == 0, err
    onnx.checker.check_model(str(out), full_check=True)
    assert np.abs(_logits(out) - _logits(src)).max() <= 2e-2 * np.abs(_logits(src)).max()
    # without it the data file is missing: one line, exit 3, nothing written
    code, _, err = parity_invoke("convert", "--fp-to-fp16", tmp_path / "m" / src.name, "-o", tmp_path / "o2.onnx")
    assert code == 3 and len(err.strip().splitlines()) == 1 and "--external-data-dir" in err
    assert not (tmp_path / "o2.onnx").exists()


def test_writing_modifiers_need_save_external_data(parity_invoke, decoder, tmp_path):
    src, _, _ = decoder
    for flags in (["--external-data-size-threshold", "1K"], ["--no-save-all-tensors-to-one-file"]):
        code, _, err = parity_invoke("convert", "--fp-to-fp16", src, "-o", tmp_path / "o.onnx", *flags)
        assert code == 2 and len(err.strip().splitlines()) == 1 and "--save-external-data" in err, err
    assert list(tmp_path.iterdir()) == []


def test_output_may_not_replace_the_input_data_file(parity_invoke, llm_decoder, tmp_path):
    src = llm_decoder()
    data = src.name + ".data"
    shutil.copy(src, tmp_path / src.name)
    shutil.copy(src.with_name(data), tmp_path / data)
    before = _digest(tmp_path / data)
    code, _, err = parity_invoke("convert", "--fp-to-fp16", tmp_path / src.name, "-o", tmp_path / "o.onnx", "--save-external-data", data)
    assert code == 2 and "refusing to overwrite" in err and len(err.strip().splitlines()) == 1, err
    assert _digest(tmp_path / data) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([src.name, data])


def test_non_onnx_converter_refuses_the_external_data_flags(parity_invoke, decoder, tmp_path):
    src, _, _ = decoder
    code, _, err = parity_invoke("convert", src, "-o", tmp_path / "m.engine", "--convert-to", "trt", "--save-external-data")
    assert code == 2 and "--save-external-data applies to ONNX output" in err and len(err.strip().splitlines()) == 1


def test_past_the_limit_the_weights_go_to_a_data_file_with_a_note(parity_invoke, decoder, tmp_path, monkeypatch):
    """With protobuf's limit lowered (in process), the 4 MB fp16 decoder no longer fits one file: it gets
    ``<output>.data`` without being asked, and one line says so."""
    from parity import onnx_external

    src, inputs, before = decoder
    monkeypatch.setattr(onnx_external, "PROTOBUF_LIMIT", (64 << 20) + (1 << 20))  # one file may hold 1 MiB
    out = tmp_path / "dec16.onnx"
    text = _converted(parity_invoke, src, out)
    notes = [line for line in text.splitlines() if "parity: note:" in line]
    assert len(notes) == 1 and "dec16.onnx.data" in notes[0] and "2 GiB" in notes[0], text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dec16.onnx", "dec16.onnx.data"]
    assert _digest(*inputs) == before
    # without the lowered limit the same conversion is one file, and no note
    monkeypatch.undo()
    code, text, err = parity_invoke("convert", "--fp-to-fp16", src, "-o", tmp_path / "one.onnx")
    assert code == 0 and "note" not in err and not (tmp_path / "one.onnx.data").exists()


def test_bytes_api_refuses_a_result_past_the_limit_in_one_line(decoder, monkeypatch):
    from parity_surgeon.fp16 import convert_to_fp16_bytes

    from parity import onnx_external
    from parity.api import ModelError

    src, _, _ = decoder
    data, report = convert_to_fp16_bytes(src)  # fits: the validated bytes, weights inside
    model = onnx.load_from_string(data)
    assert all(t.data_location != TensorProto.EXTERNAL for t in model.graph.initializer)
    assert report.converted_tensors > 0
    monkeypatch.setattr(onnx_external, "PROTOBUF_LIMIT", 1 << 20)
    with pytest.raises(ModelError) as err:
        convert_to_fp16_bytes(src)
    assert "\n" not in str(err.value) and "2 GiB" in str(err.value) and "--save-external-data" in str(err.value)


def _out_of_range_model(folder: Path) -> Path:
    """x[1,64] @ W[64,64] + b: W has 3 values beyond +-65504, and the weights are in an external data file."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 64)).astype(np.float32) * 0.1
    w[0, :3] = [1e5, -2e5, 7e4]
    b = rng.standard_normal(64).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"), helper.make_node("Add", ["h", "B"], ["y"], name="add")],
        "oor",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save_model(model, str(folder / "oor.onnx"), save_as_external_data=True, location="oor.onnx.data", size_threshold=0)
    return folder / "oor.onnx"


def test_out_of_range_external_weights_kept_fp32_or_clamped(parity_invoke, tmp_path):
    src = _out_of_range_model(tmp_path / "in")
    kept, clamped = tmp_path / "kept.onnx", tmp_path / "clamped.onnx"
    code, text, err = parity_invoke("convert", "--fp-to-fp16", src, "-o", kept, "--save-external-data")
    assert code == 0, err
    assert "kept fp32: 1 weight(s) beyond +-65504 (3 values: W)" in text
    weights = {t.name: t for t in onnx.load(str(kept)).graph.initializer}
    assert weights["W"].data_type == TensorProto.FLOAT and weights["B"].data_type == F16
    assert numpy_helper.to_array(weights["W"])[0, 1] == np.float32(-2e5)

    code, text, err = parity_invoke("convert", "--fp-to-fp16", "--clamp-out-of-range", src, "-o", clamped, "--save-external-data")
    assert code == 0, err
    assert "clamped to +-65504: 3 value(s) in 1 weight(s): W" in text
    w = numpy_helper.to_array({t.name: t for t in onnx.load(str(clamped)).graph.initializer}["W"])
    assert w.dtype == np.float16 and list(w[0, :3]) == [65504, -65504, 65504]
    for out in (kept, clamped):
        onnx.checker.check_model(str(out), full_check=True)
        ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])


def test_missing_fp16_kernel_is_found_on_the_graph_alone(parity_invoke, decoder, tmp_path, monkeypatch):
    """An op type onnxruntime could not run in fp16 (simulated for Erf) is kept fp32: the graph-only probe finds
    it, so the model is written and validated once."""
    from parity import onnx_models

    src, inputs, before = decoder
    real = onnx_models.validate
    written: list[str] = []

    def validate(model, what="the model", onnxruntime=True, missing_kernels_ok=False):
        if isinstance(model, str):
            written.append(model)
            proto = onnx.load(model, load_external_data=False)
        else:
            proto = onnx.load_from_string(model)
        if any(n.op_type == "Erf" and not n.input[0].endswith("__fp32") for n in proto.graph.node) and not missing_kernels_ok:
            raise onnx_models.MissingKernelError(f"{what} does not load in onnxruntime (CPU): no kernel for Erf at these types", "Erf")
        return real(model, what, onnxruntime, missing_kernels_ok)

    monkeypatch.setattr(onnx_models, "validate", validate)
    out = tmp_path / "dec16.onnx"
    text = _converted(parity_invoke, src, out, "--save-external-data")
    assert "kept fp32 because onnxruntime has no fp16 kernel: Erf" in text
    assert len(written) == 1  # the final check on the written path, once
    model = onnx.load(str(out), load_external_data=False)
    assert all(n.input[0].endswith("__fp32") for n in model.graph.node if n.op_type == "Erf")
    assert _digest(*inputs) == before
