"""A quantized (QDQ) model against its float original: ``parity debug localize MODEL_qdq --reference-model
MODEL_float`` pairs every dequantized tensor with its float counterpart, as onnxruntime's
``onnxruntime.quantization.qdq_loss_debug`` does, by the quantizer's names or by graph position, and reports the
SQNR of each pair; the values must be onnxruntime's own (``compute_activation_error``, ``compute_weight_error``)
on the same data."""

from __future__ import annotations

import json
from importlib import resources

import jsonschema
import numpy as np
import onnx
import pytest

pytestmark = pytest.mark.corpus
SHAPES = ("--input-shapes", "x:[1,3,48,192]")
NO_FUSION = "--onnxrt=graph-optimization-level=disable"  # collect_activations runs with ORT_DISABLE_ALL too


@pytest.fixture(scope="module")
def quantized(corpus_model, tmp_path_factory):
    """ppocr_cls with its Constant weights made initializers and its opset raised to 13 (what per-channel
    quantization needs), and its QDQ quantization by quantize_static on random calibration data."""
    from onnx import version_converter
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    tmp = tmp_path_factory.mktemp("qdq")
    model = onnx.load(corpus_model("ppocr_cls"))
    nodes = []
    for node in model.graph.node:
        if node.op_type == "Constant" and [a.name for a in node.attribute] == ["value"]:
            init = onnx.TensorProto()
            init.CopyFrom(node.attribute[0].t)
            init.name = node.output[0]
            model.graph.initializer.append(init)
        else:
            nodes.append(node)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    fp32 = tmp / "cls.onnx"
    onnx.save(version_converter.convert_version(model, 13), fp32)

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            rng = np.random.default_rng(0)
            self.data = iter([{"x": rng.random((1, 3, 48, 192), dtype=np.float32)} for _ in range(2)])

        def get_next(self):
            return next(self.data, None)

    qdq = tmp / "cls_qdq.onnx"
    quantize_static(str(fp32), str(qdq), Reader(), quant_format=QuantFormat.QDQ, per_channel=True)
    return fp32, qdq


def _localize(parity_invoke, tmp_path, qdq, fp32, inputs, name="loc"):
    report = tmp_path / f"{name}.json"
    code, text, err = parity_invoke("debug", "localize", qdq, NO_FUSION, "--reference-model", fp32, "--load-inputs", inputs, "--all-tensors", "--report", report)
    assert code == 1, text + err  # quantization error is out of the default tolerance from the first dequantized input on
    data = json.loads(report.read_text())
    schema = json.loads(resources.files("parity_surgeon").joinpath("schemas", "localize.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(data)
    return data, text


def test_sqnr_of_every_pair_is_onnxruntimes(quantized, parity_invoke, tmp_path):
    from onnxruntime.quantization.qdq_loss_debug import (
        collect_activations,
        compute_activation_error,
        compute_signal_to_quantization_noice_ratio,
        create_activation_matching,
        create_weight_matching,
        modify_model_output_intermediate_tensors,
    )

    from parity.api import load_inputs

    fp32, qdq = quantized
    inputs = tmp_path / "in.npz"
    assert parity_invoke("run", fp32, "--onnxrt", *SHAPES, "--save-inputs", inputs)[0] == 0
    data, text = _localize(parity_invoke, tmp_path, qdq, fp32, inputs)
    quant = data["quantization"]
    counts = quant["counts"]
    assert "SQNR dB" in text and "Lowest SQNR, dequantized activations vs float" in text and "Lowest SQNR, weights vs float" in text
    assert counts["dequantized"] >= 100 and counts["unpaired"] <= counts["dequantized"] // 10, counts  # most are paired

    # onnxruntime's own debugging helpers on the same input
    feed = load_inputs(str(inputs))[0]
    acts = {}
    for side, path in (("float", fp32), ("qdq", qdq)):
        modify_model_output_intermediate_tensors(str(path), str(tmp_path / f"{side}_aug.onnx"))
        acts[side] = collect_activations(str(tmp_path / f"{side}_aug.onnx"), [feed])
    ort = compute_activation_error(create_activation_matching(acts["qdq"], acts["float"]))
    ort = {name: err for name, err in ort.items() if "xmodel_err" in err}
    ours = {r["reference"]: r for r in quant["activations"] if r["kind"] == "dequantized"}
    assert len(ort) >= 100 and set(ort) <= set(ours), sorted(set(ort) - set(ours))[:10]  # every pair onnxruntime finds
    for name, err in ort.items():
        assert ours[name]["sqnr_db"] == pytest.approx(err["xmodel_err"], abs=1e-3), name
        assert ours[name]["own_sqnr_db"] == pytest.approx(err["qdq_err"], abs=1e-3), name
    # the table's rows carry the same values
    rows = {t["name"]: t for t in data["divergence"]["tensors"]}
    assert all(rows[r["tensor"]]["sqnr_db"] == r["sqnr_db"] and rows[r["tensor"]]["reference_name"] == r["reference"] for r in ours.values())

    # weights: dequantized here as onnxruntime's DequantizeLinear kernel does, SQNR as compute_weight_error does
    weights = {r["reference"]: r for r in quant["weights"]}
    model = onnx.load(qdq)
    inits = {i.name for i in model.graph.initializer}
    dqs = [n for n in model.graph.node if n.op_type == "DequantizeLinear" and n.input[0] in inits]
    assert len(weights) == len(dqs) >= 50
    kernel = _ort_dequantized(model, dqs)
    floats = {i.name: onnx.numpy_helper.to_array(i) for i in onnx.load(fp32).graph.initializer}
    for node in dqs:
        row = next(r for r in weights.values() if r["tensor"] == node.input[0])
        want = compute_signal_to_quantization_noice_ratio(np.atleast_1d(floats[row["reference"]]).ravel(), np.atleast_1d(kernel[node.output[0]]).ravel())
        assert row["sqnr_db"] == pytest.approx(want, abs=1e-2), row
    # create_weight_matching agrees where its int8 arithmetic does not wrap around (zero points of 0)
    matched = create_weight_matching(str(fp32), str(qdq))
    zero_zp = [n.input[0][: -len("_quantized")] for n in dqs if len(n.input) < 3 or not np.any(onnx.numpy_helper.to_array(_init(model, n.input[2])))]
    assert len(zero_zp) >= 50
    for name in zero_zp:
        m = matched[name]
        want = compute_signal_to_quantization_noice_ratio(np.atleast_1d(m["float"]).ravel(), np.atleast_1d(m["dequantized"]).ravel())
        assert weights[name]["sqnr_db"] == pytest.approx(want, abs=1e-2), name


def _init(model, name):
    return next(i for i in model.graph.initializer if i.name == name)


def _ort_dequantized(model, dqs):
    """Every weight's DequantizeLinear, run by onnxruntime in one model."""
    import onnxruntime as ort
    from onnx import helper

    used = {t for n in dqs for t in n.input if t}
    outputs = [helper.make_tensor_value_info(n.output[0], onnx.TensorProto.FLOAT, None) for n in dqs]
    graph = helper.make_graph(dqs, "weights", [], outputs, [i for i in model.graph.initializer if i.name in used])
    small = helper.make_model(graph, opset_imports=list(model.opset_import))
    small.ir_version = model.ir_version
    session = ort.InferenceSession(small.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([n.output[0] for n in dqs], session.run(None, {})))


def test_pairs_by_graph_position_when_names_differ(quantized, parity_invoke, tmp_path):
    """Every computed tensor and node of the QDQ model renamed: the same pairs, by position, with the same SQNR."""
    fp32, qdq = quantized
    inputs = tmp_path / "in.npz"
    assert parity_invoke("run", fp32, "--onnxrt", *SHAPES, "--save-inputs", inputs)[0] == 0
    by_name, _ = _localize(parity_invoke, tmp_path, qdq, fp32, inputs, "by_name")
    model = onnx.load(qdq)
    keep = {i.name for i in model.graph.initializer} | {i.name for i in model.graph.input}
    renamed: dict[str, str] = {}

    def rename(t: str) -> str:
        return t if not t or t in keep else renamed.setdefault(t, f"t{len(renamed)}")

    for node in model.graph.node:
        node.name = ""
        node.input[:] = [rename(t) for t in node.input]
        node.output[:] = [rename(t) for t in node.output]
    for out in model.graph.output:
        out.name = rename(out.name)
    del model.graph.value_info[:]
    other = tmp_path / "renamed_qdq.onnx"
    onnx.save(model, other)
    by_position, _ = _localize(parity_invoke, tmp_path, other, fp32, inputs, "by_position")
    first = {r["tensor"]: r for r in by_name["quantization"]["activations"] if r["kind"] == "dequantized"}
    second = {r["tensor"]: r for r in by_position["quantization"]["activations"] if r["kind"] == "dequantized"}
    assert by_name["quantization"]["counts"]["dequantized_by_name"] == len(first)
    assert len(second) == len(first) and {r["matched_by"] for r in second.values()} == {"position"}
    for name, row in first.items():
        twin = second[renamed[name]]
        assert twin["reference"] == row["reference"] and twin["sqnr_db"] == pytest.approx(row["sqnr_db"], abs=1e-9), name
    assert len(by_position["quantization"]["weights"]) == len(by_name["quantization"]["weights"])
