"""LLM-like decoder ONNX models of any size, for large-model benches.

    python bench/llm_decoder.py out.onnx --gib 2.4 --hidden 2048 --heads 32 --vocab 32000 --seq 128 [--overflow-block 3]

Weights are streamed in 16 MiB chunks into one external data file (``<model>.data``, each tensor aligned to 4096
bytes), so a model of any size is built in under 100 MB of memory and no proto ever holds the weight bytes.
Tensors under ``threshold`` bytes stay inline in the .onnx, as in real exports.
``overflow_block=k`` makes block k's MLP overflow float16 while the float32 model stays finite.
"""

from __future__ import annotations

import argparse
import math
import os
import queue
import threading
import time
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

ALIGN = 4096
CHUNK_BYTES = 16 << 20
BUFFERS = 3
# A power of two keeps the scaling exact in float32. Pre-activations of block k's MLP are ~N(0, 1), so
# 2**15 pushes every one above 2 in magnitude past float16's 65504.
OVERFLOW_FACTOR = 2.0**15
FP16_MAX = 65504.0


def gelu_output(block: int) -> str:
    """Name of block ``block``'s GELU output tensor (the one ``overflow_block`` overflows in float16)."""
    return f"block{block}/mlp/gelu/mul_half:0"


def mlp_up_output(block: int) -> str:
    """Name of block ``block``'s MLP up-projection output (after its bias)."""
    return f"block{block}/mlp/up/add_bias:0"


def block_params(hidden: int, ffn: int) -> int:
    return 4 * hidden * hidden + 4 * hidden + 2 * hidden * ffn + ffn + hidden + 4 * hidden


def fixed_params(hidden: int, vocab: int, seq: int) -> int:
    return 2 * vocab * hidden + seq * hidden + 2 * hidden


def layers_for_gib(gib: float, hidden: int, vocab: int, ffn: int | None = None, seq: int = 128) -> int:
    """Number of blocks whose float32 weights (with embeddings and LM head) total about ``gib`` GiB; at least 1."""
    ffn = ffn or 4 * hidden
    floats = gib * (1 << 30) / 4 - fixed_params(hidden, vocab, seq)
    return max(1, round(floats / block_params(hidden, ffn)))


class _Writer:
    """Appends tensors to the data file and returns initializers that point into it. A thread writes while the
    caller generates the next chunk (both release the GIL), through a pool of BUFFERS reused chunk buffers."""

    def __init__(self, data_path: Path, threshold: int):
        self.file = open(data_path, "wb")  # noqa: SIM115 (closed by close())
        self.location = data_path.name
        self.threshold = threshold
        self.offset = 0
        self.inits: list[TensorProto] = []
        self.params = 0
        self.inline_bytes = 0
        self.error: BaseException | None = None
        self.free: queue.Queue = queue.Queue()
        for _ in range(BUFFERS):
            self.free.put(np.empty(CHUNK_BYTES // 4, np.float32))
        self.todo: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._drain, name="llm-decoder-writer", daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        while (item := self.todo.get()) is not None:
            data, buf = item
            try:
                if self.error is None:
                    self.file.write(data)
            except BaseException as e:  # raised again by the caller's next write or close()
                self.error = e
            if buf is not None:
                self.free.put(buf)

    def _write(self, data, buf: np.ndarray | None = None) -> None:
        if self.error is not None:
            raise self.error
        self.todo.put((data, buf))
        self.offset += len(data)

    def close(self) -> None:
        self.todo.put(None)
        self.thread.join()
        self.file.close()
        if self.error is not None:
            raise self.error

    def _external(self, name: str, shape: tuple, dtype, chunks) -> None:
        if pad := -self.offset % ALIGN:
            self._write(b"\0" * pad)
        start = self.offset
        for data, buf in chunks:
            self._write(data, buf)
        t = TensorProto(name=name, dims=shape, data_type=helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))
        t.data_location = TensorProto.EXTERNAL
        for key, value in (("location", self.location), ("offset", start), ("length", self.offset - start)):
            t.external_data.add(key=key, value=str(value))
        self.inits.append(t)

    def const(self, name: str, array: np.ndarray, inline: bool = False) -> str:
        array = np.ascontiguousarray(array)
        if inline or array.nbytes < self.threshold:
            self.inits.append(numpy_helper.from_array(array, name))
            self.inline_bytes += array.nbytes
        else:
            self._external(name, array.shape, array.dtype, [(array.tobytes(), None)])
        return name

    def random(self, name: str, shape: tuple, rng: np.random.Generator, scale: float) -> str:
        """float32 N(0, scale^2), generated into the pool's buffers a chunk at a time."""
        size = math.prod(shape)
        self.params += size
        if size * 4 < self.threshold:
            return self.const(name, rng.standard_normal(shape, dtype=np.float32) * np.float32(scale))

        def chunks():
            for start in range(0, size, CHUNK_BYTES // 4):
                buf = self.free.get()  # blocks while the writer is BUFFERS chunks behind
                out = buf[: min(CHUNK_BYTES // 4, size - start)]
                rng.standard_normal(out=out, dtype=np.float32)
                out *= np.float32(scale)
                yield memoryview(out).cast("B"), buf

        self._external(name, shape, np.float32, chunks())
        return name

    def filled(self, name: str, shape: tuple, value: float) -> str:
        self.params += math.prod(shape)
        return self.const(name, np.full(shape, value, np.float32))


def build_decoder(
    path: str | os.PathLike,
    *,
    layers: int = 2,
    hidden: int = 256,
    heads: int = 4,
    vocab: int = 1000,
    seq: int = 16,
    ffn: int | None = None,
    batch: int = 1,
    overflow_block: int | None = None,
    seed: int = 0,
    threshold: int = 1024,
    overflow_factor: float = OVERFLOW_FACTOR,
) -> dict:
    """Write a GPT-like decoder to ``path`` plus its weights to ``path.name + '.data'`` next to it.

    input_ids int64 [batch, seq] -> logits float32 [batch, seq, vocab]. Returns a summary dict: path, data,
    params, weight_bytes (float32 parameters), data_bytes (file size with padding), inline_bytes, layers,
    outputs, overflow_block and overflow_tensor (that block's GELU output, or None)."""
    if hidden % heads:
        raise ValueError(f"hidden {hidden} is not a multiple of heads {heads}")
    if overflow_block is not None and not 0 <= overflow_block < layers:
        raise ValueError(f"overflow_block {overflow_block} is not in 0..{layers - 1}")
    ffn = ffn or 4 * hidden
    d = hidden // heads
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data_path = path.with_name(path.name + ".data")
    rng = np.random.default_rng(seed)
    w = _Writer(data_path, threshold)
    nodes: list = []

    def op(kind: str, name: str, inputs: list, **attrs) -> str:
        out = f"{name}:0"
        nodes.append(helper.make_node(kind, inputs, [out], name=name, **attrs))
        return out

    def linear(x: str, name: str, n_in: int, n_out: int, gain: float = 1.0) -> str:
        weight = w.random(f"{name}/weight", (n_in, n_out), rng, gain / math.sqrt(n_in))
        bias = w.random(f"{name}/bias", (n_out,), rng, 0.02 * gain)
        return op("Add", f"{name}/add_bias", [op("MatMul", name, [x, weight]), bias])

    def layer_norm(x: str, name: str) -> str:
        scale, bias = w.filled(f"{name}/scale", (hidden,), 1.0), w.filled(f"{name}/bias", (hidden,), 0.0)
        return op("LayerNormalization", name, [x, scale, bias], axis=-1, epsilon=1e-5)

    try:
        # Embedding rows are unit variance: the first LayerNorm rescales anyway.
        tokens = w.random("embed/tokens", (vocab, hidden), rng, 1.0)
        positions = w.random("embed/positions", (seq, hidden), rng, 1.0)
        # -1e4, not -inf: stays finite in float16, and exp() of it is still exactly 0 in float32.
        mask = w.const("const/causal_mask", np.triu(np.full((seq, seq), -1e4, np.float32), k=1))
        attn_scale = w.const("const/attn_scale", np.array(1 / math.sqrt(d), np.float32))
        sqrt2 = w.const("const/sqrt2", np.array(math.sqrt(2), np.float32))
        one = w.const("const/one", np.array(1.0, np.float32))
        half = w.const("const/half", np.array(0.5, np.float32))
        # Shapes stay inline whatever the threshold: onnxruntime's shape inference cannot read external ones.
        split = w.const("const/shape_heads", np.array([batch, seq, heads, d], np.int64), inline=True)
        merge = w.const("const/shape_hidden", np.array([batch, seq, hidden], np.int64), inline=True)

        x = op("Gather", "embed/tokens", [tokens, "input_ids"], axis=0)
        x = op("Add", "embed/add_positions", [x, positions])
        for b in range(layers):
            p = f"block{b}"
            n = layer_norm(x, f"{p}/ln1")
            heads_out = []
            for t in "qkv":
                r = op("Reshape", f"{p}/attn/{t}/reshape", [linear(n, f"{p}/attn/{t}", hidden, hidden), split])
                heads_out.append(op("Transpose", f"{p}/attn/{t}/transpose", [r], perm=[0, 2, 1, 3]))
            q, k, v = heads_out
            kt = op("Transpose", f"{p}/attn/k/transpose_t", [k], perm=[0, 1, 3, 2])
            scores = op("Mul", f"{p}/attn/scale", [op("MatMul", f"{p}/attn/scores", [q, kt]), attn_scale])
            probs = op("Softmax", f"{p}/attn/softmax", [op("Add", f"{p}/attn/mask", [scores, mask])], axis=-1)
            ctx = op("MatMul", f"{p}/attn/context", [probs, v])
            ctx = op("Reshape", f"{p}/attn/merge", [op("Transpose", f"{p}/attn/transpose_back", [ctx], perm=[0, 2, 1, 3]), merge])
            x = op("Add", f"{p}/attn/residual", [x, linear(ctx, f"{p}/attn/out", hidden, hidden)])

            n = layer_norm(x, f"{p}/ln2")
            # Scaling up (weight and bias) by F and down by 1/F: float32 sees gelu(F*h)/F ~ relu(h), finite;
            # float16 sees F*h > 65504 -> inf.
            factor = overflow_factor if b == overflow_block else 1.0
            h = linear(n, f"{p}/mlp/up", hidden, ffn, gain=factor)
            erf = op("Erf", f"{p}/mlp/gelu/erf", [op("Div", f"{p}/mlp/gelu/div", [h, sqrt2])])
            g = op("Mul", f"{p}/mlp/gelu/mul", [h, op("Add", f"{p}/mlp/gelu/add_one", [erf, one])])
            g = op("Mul", f"{p}/mlp/gelu/mul_half", [g, half])
            x = op("Add", f"{p}/mlp/residual", [x, linear(g, f"{p}/mlp/down", ffn, hidden, gain=1 / factor)])

        x = layer_norm(x, "final_ln")
        head = w.random("lm_head/weight", (hidden, vocab), rng, 1 / math.sqrt(hidden))
        nodes.append(helper.make_node("MatMul", [x, head], ["logits"], name="lm_head"))
    finally:
        w.close()

    graph = helper.make_graph(
        nodes,
        "llm_decoder",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [batch, seq])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, seq, vocab])],
        w.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="parity-bench-llm-decoder")
    model.ir_version = 10
    path.write_bytes(model.SerializeToString())  # last: a complete .onnx means a complete data file
    return {
        "path": str(path),
        "data": str(data_path),
        "layers": layers,
        "params": w.params,
        "weight_bytes": 4 * w.params,
        "data_bytes": w.offset,
        "inline_bytes": w.inline_bytes,
        "outputs": ["logits"],
        "overflow_block": overflow_block,
        "overflow_tensor": None if overflow_block is None else gelu_output(overflow_block),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path", type=Path, help="the .onnx to write; weights go to PATH.data")
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--gib", type=float, help="pick the number of layers so the weights total about this many GiB")
    size.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=1000)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--ffn", type=int, default=None, help="MLP width (default 4 * hidden)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--overflow-block", type=int, default=None, help="make this block's MLP overflow float16 (harmless in float32)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threshold", type=int, default=1024, help="tensors under this many bytes stay inline in the .onnx (default 1024)")
    args = ap.parse_args(argv)
    layers = layers_for_gib(args.gib, args.hidden, args.vocab, args.ffn, args.seq) if args.gib else args.layers
    start = time.perf_counter()
    info = build_decoder(
        args.path, layers=layers, hidden=args.hidden, heads=args.heads, vocab=args.vocab, seq=args.seq, ffn=args.ffn,
        batch=args.batch, overflow_block=args.overflow_block, seed=args.seed, threshold=args.threshold,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    print(
        f"wrote {info['path']} ({os.path.getsize(info['path']) / 1024:.0f} KiB) + {info['data']}: {info['weight_bytes'] / (1 << 30):.2f} GiB weights, "
        f"{layers} layers, {info['params'] / 1e6:.1f}M params, overflow block {info['overflow_block']}, {seconds:.1f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
