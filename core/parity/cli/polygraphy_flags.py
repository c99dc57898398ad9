"""Polygraphy flags Parity does not take, each with one line saying what to use instead (never "No such option").

Read by :func:`parity.cli.common.usage_message` when click meets an option no command defines; the flags Parity
does take under Polygraphy's spelling (``--silent``, ``--verbosity``, ``-v``/``-q`` before the command,
``--execution-providers``, the old ``--input-shapes x:1x3x224x224``) are real options.
"""

from __future__ import annotations

INSTEAD: dict[str, str] = {
    "--gen": "Parity writes no scripts: the Python API runs the same comparison (parity.RunRequest and parity.run_comparison; docs/architecture.md)",
    "--gen-script": "Parity writes no scripts: the Python API runs the same comparison (parity.RunRequest and parity.run_comparison; docs/architecture.md)",
    "--log-file": "Parity does not copy its output to a file: redirect it, e.g. 'parity run ... 2>&1 | tee run.log'",
    "--compare-func-script": "register the function as a metric in a one-off plugin file (--plugin metric.py, docs/plugins/) and choose it with --compare-func NAME",
    "--no-shape-check": "Parity always checks shapes: outputs whose shapes differ fail the comparison",
    "--warm-up": "Parity has no warm-up runs: run --iterations N; the timings it prints are medians",
    "--use-subprocess": "Parity runs each backend in its own process only for debug checks (--check-timeout); 'parity run' needs no subprocess",
    "--postprocess": "Parity does not post-process outputs: compare top-k classes with --compare-func indices --top-k K",
    "--layer-precisions": (
        "Parity sets no per-layer TensorRT precision: 'parity debug precision' finds the nodes that must stay fp32"
        " and writes them into the ONNX model, which strongly typed TensorRT follows"
    ),
    "--onnx-outputs-by-type": "mark every tensor (--onnx-outputs mark all) and read the first-divergence report, or name the tensors: --onnx-outputs NAME ...",
}
