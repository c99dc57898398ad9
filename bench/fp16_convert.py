"""Bench: ``convert --fp-to-fp16`` on a 47 MB CNN, Parity vs Polygraphy 0.53.6 (the anchor), issue 30.

    python bench/fp16_convert.py [--repeat 5] [--quick]

Polygraphy's conversion is onnxconverter-common's ``convert_float_to_float16`` (``keep_io_types=True``,
no shape inference): ``pip install onnxconverter-common`` first, or the anchor cannot run. Both CLIs run
interleaved, one unmeasured warm-up each first (page cache, bytecode); medians of wall time and peak RSS,
ratios, and both outputs compared with the fp32 model. Parity's figure includes its final validation (onnx
checker full check + an onnxruntime load), which Polygraphy does not do. A third row, ``floor``, times
``python -c "import onnx, onnxruntime"``: what any in-process converter that validates its output pays
before its first step. Targets: Parity <= 0.35x Polygraphy's time, <= 1.0x its peak RSS (read with GNU
time where it is installed). ``--quick``: 2 repeats (the lead's device run).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from common import clean_env, median, run_measured, table, tool, verdict  # noqa: E402

TARGET = 0.35  # x Polygraphy's time (issue 30)


def cnn(path: Path, seed: int = 0) -> Path:
    """A 47 MB VGG-like CNN: 10 Conv+BatchNorm+Relu blocks, pooling, a Gemm head to 8192 classes (12M float32 weights)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    x, ch = "x", 3
    for i, out in enumerate([64, 64, 128, 128, 256, 256, 384, 384, 512, 512]):
        w = numpy_helper.from_array((rng.standard_normal((out, ch, 3, 3)) * (2 / (9 * ch)) ** 0.5).astype(np.float32), f"w{i}")
        bn = [
            numpy_helper.from_array(a.astype(np.float32), f"bn{i}_{k}")
            for k, a in enumerate([rng.uniform(0.5, 1.5, out), rng.normal(0, 0.1, out), rng.normal(0, 0.1, out), rng.uniform(0.5, 1.5, out)])
        ]
        inits += [w, *bn]
        nodes += [
            helper.make_node("Conv", [x, f"w{i}"], [f"c{i}"], name=f"conv{i}", pads=[1, 1, 1, 1]),
            helper.make_node("BatchNormalization", [f"c{i}", *(t.name for t in bn)], [f"b{i}"], name=f"bn{i}"),
            helper.make_node("Relu", [f"b{i}"], [f"r{i}"], name=f"relu{i}"),
        ]
        x, ch = f"r{i}", out
        if i % 2:
            nodes.append(helper.make_node("MaxPool", [x], [f"p{i}"], name=f"pool{i}", kernel_shape=[2, 2], strides=[2, 2]))
            x = f"p{i}"
    nodes.append(helper.make_node("Flatten", [x], ["flat"], name="flatten"))
    inits.append(numpy_helper.from_array((rng.standard_normal((512, 8192)) * 0.02).astype(np.float32), "fc_w"))
    nodes.append(helper.make_node("Gemm", ["flat", "fc_w"], ["logits"], name="fc"))
    nodes.append(helper.make_node("Softmax", ["logits"], ["y"], name="softmax", axis=1))
    graph = helper.make_graph(
        nodes, "cnn47", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8192])], inits
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.save(model, str(path))
    return path


def _outputs(path: str, x) -> object:
    import numpy as np
    import onnxruntime as ort

    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feed = x.astype(np.float16) if s.get_inputs()[0].type == "tensor(float16)" else x
    return np.asarray(s.run(None, {"x": feed})[0], np.float64).ravel()


def main() -> int:
    import numpy as np

    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="2 repeats")
    args = parser.parse_args()
    repeat = 2 if args.quick else args.repeat
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as pyc:
        model = cnn(Path(tmp) / "cnn47.onnx")
        print(f"model: {model.stat().st_size / 1e6:.1f} MB")
        cmds = {
            "polygraphy": [tool("polygraphy"), "convert", "--fp-to-fp16", str(model), "-o", f"{tmp}/poly.onnx"],
            "parity": [tool("parity"), "convert", "--fp-to-fp16", str(model), "-o", f"{tmp}/parity.onnx"],
            # the floor of any in-process converter that validates its output: the interpreter, onnx, onnxruntime
            "floor": [sys.executable, "-c", "import onnx, onnxruntime"],
        }
        times: dict[str, list[float]] = {k: [] for k in cmds}
        rss: dict[str, list[float]] = {k: [] for k in cmds}
        for i in range(repeat + 1):
            for name, cmd in cmds.items():
                if name != "floor":
                    Path(cmd[-1]).unlink(missing_ok=True)
                wall, peak, code, out = run_measured(cmd, env=clean_env(pyc))
                if code != 0:
                    print(out)
                    return verdict(name, False, f"exit {code} (polygraphy needs onnxconverter-common)") and 1
                if i:  # the first round warms the page cache and the bytecode cache
                    times[name].append(wall)
                    rss[name].append(peak)
        x = np.random.default_rng(1).standard_normal((1, 3, 32, 32)).astype(np.float32)
        ref = _outputs(str(model), x)
        cos = {k: float(_outputs(f"{tmp}/{'poly' if k == 'polygraphy' else k}.onnx", x) @ ref / np.linalg.norm(ref) ** 2) if k != "floor" else "-" for k in cmds}
        t, m = {k: median(v) for k, v in times.items()}, {k: median(v) for k, v in rss.items()}
        print(
            table(
                ["tool", "median s", "x Polygraphy", "peak MiB", "x Polygraphy", "y.ref/|ref|^2"],
                [[k, t[k], t[k] / t["polygraphy"], m[k], m[k] / m["polygraphy"], cos[k]] for k in cmds],
            )
        )
        ok = verdict(f"time <= {TARGET}x Polygraphy", t["parity"] <= TARGET * t["polygraphy"], f"{t['parity'] / t['polygraphy']:.2f}x Polygraphy")
        if m["parity"] == m["parity"]:  # not NaN: GNU time is there to read it
            ok &= verdict("peak RSS <= 1.0x Polygraphy", m["parity"] <= m["polygraphy"], f"{m['parity'] / m['polygraphy']:.2f}x Polygraphy")
        else:
            print("SKIP  peak RSS: /usr/bin/time is missing, so no peak was read")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
