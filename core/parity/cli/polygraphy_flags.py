"""Polygraphy flags Parity does not take, each with one line saying what to use instead (never "No such option").

Read by :func:`parity.cli.common.usage_message` when click meets an option no command defines; the flags Parity
does take under Polygraphy's spelling (``--silent``, ``--verbosity``, ``-v``/``-q`` before the command,
``--execution-providers``, the old ``--input-shapes x:1x3x224x224``) are real options.
"""

from __future__ import annotations

INSTEAD: dict[str, str] = {
    # Polygraphy's debug precision builds TensorRT engines with per-layer precisions; Parity's edits the ONNX model.
    "--layer-precisions": (
        "on debug precision Parity searches the ONNX model itself: it finds the nodes that must stay fp32 and writes them"
        " into the model, which strongly typed TensorRT follows (--layer-precisions is an option of run/convert/debug build --trt)"
    ),
}
