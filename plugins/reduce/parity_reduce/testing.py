"""Small models with known structure, for tests, benchmarks and docs (built with onnx.helper).

* :func:`chain` -- ``n`` elementwise nodes in a line (``n0`` ... ``n{n-1}``).
* :func:`encoder` -- a transformer encoder (attention, decomposed LayerNorm, erf-GELU MLP); 158 nodes
  with the defaults (like the ones Polygraphy's figures were taken on), every node named.
* :func:`planted_check` -- the text of a check script that fails iff every given node name is present.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def finish(nodes, inputs, outputs, inits, name: str = "g") -> onnx.ModelProto:
    model = helper.make_model(helper.make_graph(nodes, name, inputs, outputs, inits), opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return model


def chain(n: int = 800, width: int = 8) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(np.full([width], 0.01, np.float32), "c_add"), numpy_helper.from_array(np.full([width], 0.999, np.float32), "c_mul")]
    nodes, prev = [], "x"
    for i in range(n):
        out = f"t{i}" if i < n - 1 else "y"
        op = ("Add", "Mul", "Relu")[i % 3]
        ins = [prev, "c_add"] if op == "Add" else [prev, "c_mul"] if op == "Mul" else [prev]
        nodes.append(helper.make_node(op, ins, [out], name=f"n{i}"))
        prev = out
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])
    return finish(nodes, [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, width])], inits, "chain")


class _Builder:
    def __init__(self, seed: int = 0) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.rng = np.random.default_rng(seed)
        self.count = 0

    def const(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, op: str, inputs: list[str], **attrs) -> str:
        name = f"{op.lower()}_{self.count}"
        self.count += 1
        self.nodes.append(helper.make_node(op, inputs, [name + "_out"], name=name, **attrs))
        return name + "_out"

    def weight(self, shape: list[int]) -> str:
        return self.const(f"w{len(self.inits)}", (self.rng.standard_normal(shape) * 0.1).astype(np.float32))

    def layernorm(self, x: str, d: int) -> str:  # 9 nodes
        mean = self.op("ReduceMean", [x], axes=[-1])
        cen = self.op("Sub", [x, mean])
        sq = self.op("Mul", [cen, cen])
        var = self.op("ReduceMean", [sq], axes=[-1])
        eps = self.op("Add", [var, self.const(f"eps{len(self.inits)}", np.array(1e-5, np.float32))])
        std = self.op("Sqrt", [eps])
        norm = self.op("Div", [cen, std])
        scaled = self.op("Mul", [norm, self.const(f"g{len(self.inits)}", np.ones([d], np.float32))])
        return self.op("Add", [scaled, self.const(f"b{len(self.inits)}", np.zeros([d], np.float32))])


def encoder(layers: int = 3, seq: int = 4, d: int = 8, heads: int = 2) -> onnx.ModelProto:
    """``8 + 50 * layers`` nodes: input projection, ``layers`` encoder blocks, a classifier head."""
    b = _Builder()
    dh = d // heads
    split = b.const("shape_split", np.array([1, seq, heads, dh], np.int64))
    merge = b.const("shape_merge", np.array([1, seq, d], np.int64))
    h = b.op("Add", [b.op("MatMul", ["x", b.weight([d, d])]), b.weight([d])])
    for _ in range(layers):
        heads_ = []
        for _ in range(3):  # q, k, v: MatMul, Add, Reshape, Transpose
            t = b.op("Add", [b.op("MatMul", [h, b.weight([d, d])]), b.weight([d])])
            heads_.append(b.op("Transpose", [b.op("Reshape", [t, split])], perm=[0, 2, 1, 3]))
        q, k, v = heads_
        kt = b.op("Transpose", [k], perm=[0, 1, 3, 2])
        scores = b.op("Div", [b.op("MatMul", [q, kt]), b.const(f"scale{len(b.inits)}", np.array(np.sqrt(dh), np.float32))])
        ctx = b.op("MatMul", [b.op("Softmax", [scores], axis=-1), v])
        merged = b.op("Reshape", [b.op("Transpose", [ctx], perm=[0, 2, 1, 3]), merge])
        attn = b.op("Add", [b.op("MatMul", [merged, b.weight([d, d])]), b.weight([d])])
        h = b.layernorm(b.op("Add", [h, attn]), d)
        up = b.op("Add", [b.op("MatMul", [h, b.weight([d, 2 * d])]), b.weight([2 * d])])
        erf = b.op("Erf", [b.op("Div", [up, b.const(f"sqrt2_{len(b.inits)}", np.array(np.sqrt(2), np.float32))])])
        one_plus = b.op("Add", [erf, b.const(f"one{len(b.inits)}", np.array(1, np.float32))])
        gelu = b.op("Mul", [b.op("Mul", [up, one_plus]), b.const(f"half{len(b.inits)}", np.array(0.5, np.float32))])
        down = b.op("Add", [b.op("MatMul", [gelu, b.weight([2 * d, d])]), b.weight([d])])
        h = b.layernorm(b.op("Add", [h, down]), d)
    # A classifier head: MatMul, Add, Tanh, MatMul, Add, Softmax; the last node writes the graph output.
    t = b.op("Tanh", [b.op("Add", [b.op("MatMul", [h, b.weight([d, d])]), b.weight([d])])])
    b.op("Softmax", [b.op("Add", [b.op("MatMul", [t, b.weight([d, d])]), b.weight([d])])], axis=-1)
    b.nodes[-1].output[0] = "y"
    return finish(
        b.nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, d])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, d])],
        b.inits,
        "encoder",
    )


PLANTED_CHECK = '''"""Fails (exit 1) iff the model given as argv[1] contains every node named in argv[2:]."""
import sys

import onnx

names = {n.name for n in onnx.load(sys.argv[1], load_external_data=False).graph.node}
sys.exit(1 if all(n in names for n in sys.argv[2:]) else 0)
'''


def planted_check() -> str:
    return PLANTED_CHECK


def fp16_sensitive() -> onnx.ModelProto:
    """A 26-node chain on values near 1 where only two distant pairs of nodes need fp32:
    ``shift_a``/``unshift_a`` and ``shift_b``/``unshift_b`` add then subtract 1e5, which is inf in fp16."""
    inits = [numpy_helper.from_array(np.array(1e5, np.float32), "big"), numpy_helper.from_array(np.array(0.1, np.float32), "k01")]
    nodes: list[onnx.NodeProto] = []

    def op(kind: str, extra: list[str], name: str) -> None:
        prev = nodes[-1].output[0] if nodes else "x"
        nodes.append(helper.make_node(kind, [prev, *extra], [f"{name}_out"], name=name))

    for k in range(6):
        op("Add", ["k01"], f"add{k}")
    op("Add", ["big"], "shift_a")
    op("Sub", ["big"], "unshift_a")
    for k in range(6, 16):
        op("Relu", [], f"b{k}") if k % 2 else op("Add", ["k01"], f"b{k}")
    op("Add", ["big"], "shift_b")
    op("Sub", ["big"], "unshift_b")
    for k in range(16, 22):
        op("Add", ["k01"], f"m{k}")
    nodes[-1].output[0] = "y"
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])
    return finish(nodes, [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])], inits, "fp16_sensitive")
