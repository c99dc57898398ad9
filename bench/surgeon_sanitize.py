"""Bench: ``surgeon sanitize --fold-constants`` on the 158-node encoder, Parity vs Polygraphy 0.53.6.

    python bench/surgeon_sanitize.py [--repeat 5]

Runs both CLIs interleaved, reports median wall time and peak RSS, checks the two folded models compute the
same thing, and prints the ratio. Target: Parity no slower than Polygraphy.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from common import clean_env, median, run_measured, table, tool, verdict  # noqa: E402
from models import transformer_encoder  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model = transformer_encoder(Path(tmp) / "encoder.onnx")
        cmds = {
            "polygraphy": [tool("polygraphy"), "surgeon", "sanitize", str(model), "--fold-constants", "-o", f"{tmp}/poly.onnx"],
            "parity": [tool("parity"), "surgeon", "sanitize", str(model), "--fold-constants", "-o", f"{tmp}/parity.onnx"],
        }
        times: dict[str, list[float]] = {k: [] for k in cmds}
        rss: dict[str, list[float]] = {k: [] for k in cmds}
        for _ in range(args.repeat):
            for name, cmd in cmds.items():
                wall, peak, code, out = run_measured(cmd, env=clean_env())
                if code != 0:
                    print(out)
                    return verdict(name, False, f"exit {code}") and 1
                times[name].append(wall)
                rss[name].append(peak)
        import numpy as np
        import onnx
        import onnxruntime as ort

        x = np.random.RandomState(0).rand(1, 128, 256).astype(np.float32)
        outs = {n: ort.InferenceSession(f"{tmp}/{n}.onnx").run(None, {"x": x})[0] for n in ("poly", "parity")}
        nodes = {n: len(onnx.load(f"{tmp}/{n}.onnx").graph.node) for n in ("poly", "parity")}
        same = np.array_equal(outs["poly"], outs["parity"])
    rows = [[name, median(times[name]), median(rss[name])] for name in cmds]
    print(f"encoder: 158 nodes; after folding: parity {nodes['parity']}, polygraphy {nodes['poly']} nodes; outputs identical: {same}")
    print(table(["tool", "median s", "peak RSS MiB"], rows))
    ratio = median(times["parity"]) / median(times["polygraphy"])
    print(f"time ratio parity/polygraphy: {ratio:.2f}  | RSS ratio: {median(rss['parity']) / median(rss['polygraphy']):.2f}")
    ok = verdict("sanitize --fold-constants no slower than Polygraphy", ratio <= 1.0, f"{ratio:.2f}x")
    ok &= verdict("same folded result", same and nodes["parity"] == nodes["poly"], f"{nodes}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
