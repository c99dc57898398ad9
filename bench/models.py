"""Model builders shared by the bench scripts (onnx.helper only; IR 10, opset 17 so onnxruntime loads them)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _save(nodes, inits, inputs, outputs, name: str, path: Path) -> Path:
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.save(model, str(path))
    return path


def transformer_encoder(path: str | Path, layers: int = 3, seq: int = 128, hidden: int = 256, heads: int = 4, ffn: int = 1024, seed: int = 0) -> Path:
    """A BERT-style encoder (158 nodes with the defaults, the size of the issue's encoder): decomposed LayerNorm, multi-head attention with
    Reshape/Transpose, erf-GELU feed-forward, residuals. Scale factors are written as constant subgraphs
    (``Sqrt`` of a constant), as exporters often leave them, so constant folding has work to do."""
    rng = np.random.RandomState(seed)
    nodes: list = []
    inits: list = []
    count = [0]

    def w(shape, scale=0.05):
        name = f"w{len(inits)}"
        inits.append(numpy_helper.from_array((rng.randn(*shape) * scale).astype(np.float32), name))
        return name

    def const(value, dtype=np.float32):
        name = f"c{len(inits)}"
        inits.append(numpy_helper.from_array(np.array(value, dtype=dtype), name))
        return name

    def op(kind, ins, **attrs):
        count[0] += 1
        out = f"{kind.lower()}_{count[0]}"
        nodes.append(helper.make_node(kind, ins, [out], name=f"{kind}_{count[0]}", **attrs))
        return out

    def layer_norm(x, bias=True):
        mean = op("ReduceMean", [x], axes=[-1])
        centered = op("Sub", [x, mean])
        sq = op("Mul", [centered, centered])
        var = op("ReduceMean", [sq], axes=[-1])
        std = op("Sqrt", [op("Add", [var, const(1e-5)])])
        scaled = op("Mul", [op("Div", [centered, std]), w((hidden,), 1.0)])
        return op("Add", [scaled, w((hidden,), 0.1)]) if bias else scaled

    def linear(x, n_in, n_out):
        return op("Add", [op("MatMul", [x, w((n_in, n_out))]), w((n_out,), 0.02)])

    head_dim = hidden // heads
    split = const([1, seq, heads, head_dim], np.int64)
    merge = const([1, seq, hidden], np.int64)
    h = "x"
    for _ in range(layers):
        n = layer_norm(h)
        q, k, v = (op("Transpose", [op("Reshape", [linear(n, hidden, hidden), split])], perm=[0, 2, 1, 3]) for _ in range(3))
        scale = op("Sqrt", [const(float(head_dim))])  # foldable
        scores = op("Div", [op("MatMul", [q, op("Transpose", [k], perm=[0, 1, 3, 2])]), scale])
        ctx = op("MatMul", [op("Softmax", [scores], axis=-1), v])
        attn = linear(op("Reshape", [op("Transpose", [ctx], perm=[0, 2, 1, 3]), merge]), hidden, hidden)
        h = op("Add", [h, attn])
        n = layer_norm(h)
        f = linear(n, hidden, ffn)
        gelu = op("Mul", [f, op("Add", [op("Erf", [op("Mul", [f, const(2**-0.5)])]), const(1.0)])])  # the 0.5 is in the next weights
        h = op("Add", [h, linear(gelu, ffn, hidden)])
    layer_norm(h, bias=False)
    nodes[-1].output[0] = "y"  # the last LayerNorm's output is the graph output
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, hidden])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, hidden])]
    return _save(nodes, inits, inputs, outputs, "encoder", Path(path))


def activation_chain(path: str | Path, nodes: int = 72, shape: tuple = (1, 16, 1024, 1024)) -> Path:
    """Cheap elementwise ops on one big tensor: activations add up to ``nodes * prod(shape) * 4`` bytes
    (4.5 GiB with the defaults) while any single tensor is small (64 MiB)."""
    ops = ["Mul", "Add", "Tanh", "Relu", "Sigmoid", "Add"]
    graph_nodes, inits, prev = [], [], "x"
    for i in range(nodes):
        kind = ops[i % len(ops)]
        out = f"t{i}"
        if kind in ("Mul", "Add"):
            c = f"k{i}"
            inits.append(numpy_helper.from_array(np.array(0.9 if kind == "Mul" else 0.01, np.float32), c))
            graph_nodes.append(helper.make_node(kind, [prev, c], [out], name=f"{kind}_{i}"))
        else:
            graph_nodes.append(helper.make_node(kind, [prev], [out], name=f"{kind}_{i}"))
        prev = out
    graph_nodes.append(helper.make_node("Identity", [prev], ["y"], name="output"))
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))]
    return _save(graph_nodes, inits, inputs, outputs, "chain", Path(path))


def small_cnn(path: str | Path, seed: int = 0) -> Path:
    """Conv + Relu + global pooling on a 1x3x32x32 input: a model whose run takes about a millisecond."""
    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 1, 1])
    return _save(nodes, [w], [x], [y], "cnn", Path(path))
