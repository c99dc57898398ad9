"""Where onnxruntime's time goes on a big model: session creation and one inference under session-option variants.

    python bench/ort_session_probe.py model.onnx [--variants default,noprepack,...]

Each variant runs in a fresh child process; prints create / first-run seconds and the child's peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

VARIANTS = ["default", "noprepack", "basic", "basic_noprepack", "disable_noprepack", "extended"]


def child(model: str, variant: str) -> None:
    import numpy as np
    import onnxruntime as ort

    t0 = time.perf_counter()
    opts = ort.SessionOptions()
    if "noprepack" in variant:
        opts.add_session_config_entry("session.disable_prepacking", "1")
    if variant.startswith("basic"):
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    if variant.startswith("disable"):
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if variant == "extended":
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    source = model
    t1 = time.perf_counter()
    sess = ort.InferenceSession(source, sess_options=opts, providers=["CPUExecutionProvider"])
    t2 = time.perf_counter()
    feeds = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in i.shape]
        if "int" in i.type:
            feeds[i.name] = np.random.default_rng(0).integers(0, 31999, size=shape).astype(np.int64)
        else:
            feeds[i.name] = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    outs = sess.run(None, feeds)
    t3 = time.perf_counter()
    import hashlib

    digest = hashlib.sha256(b"".join(np.ascontiguousarray(o).tobytes() for o in outs)).hexdigest()[:16]
    sess.run(None, feeds)
    t4 = time.perf_counter()
    print(json.dumps({"prep": t1 - t0, "create": t2 - t1, "run1": t3 - t2, "run2": t4 - t3, "outputs": digest}))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--child", default=None)
    args = parser.parse_args()
    if args.child:
        child(args.model, args.child)
        return 0
    gib = os.path.getsize(args.model + ".data") / 2**30 if os.path.exists(args.model + ".data") else 0
    print(f"model {args.model}, data {gib:.2f} GiB")
    for variant in args.variants.split(","):
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, __file__, args.model, "--child", variant], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        out, err = proc.stdout.read().decode(), proc.stderr.read().decode()
        wall = time.perf_counter() - start
        rss = usage.ru_maxrss / 2**20
        line = out.strip().splitlines()[-1] if out.strip() else err.strip().splitlines()[-1:]
        print(f"{variant:20s} wall {wall:6.2f} s  rss {rss:6.2f} GiB  {line}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
