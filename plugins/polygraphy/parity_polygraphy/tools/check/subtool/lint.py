"""``polygraphy.tools.check.subtool.lint.Lint``: the severities, sources and message markers of Polygraphy's
``check lint`` JSON report, for scripts that read such reports.

Only the names: the lint itself is ``parity check lint`` (plugins/surgeon), whose report has its own schema
(``"format": "parity-lint"``; ``issues`` of ``level`` ``"error"``/``"warning"`` and a ``rule`` such as
``checker`` or ``onnxruntime``), not Polygraphy's ``lint_entries`` of these ``Level``/``Source`` values.
"""

from __future__ import annotations

import enum


class Lint:
    """Polygraphy's ``check lint`` tool, as its report's vocabulary: ``Level``, ``Source`` and the message
    substrings Polygraphy uses to classify onnxruntime's and the ONNX checker's errors."""

    name = "lint"

    # onnxruntime's messages for an op from a domain it does not know: Polygraphy reports these as warnings
    # (a custom op), not exceptions.
    CUSTOM_OP_EXCEPTION_SUBSTRS = ["No opset import for domain", "is not a registered function/op"]
    # the ONNX checker's message for a node it cannot check against a schema; Polygraphy does not report it.
    ONNX_CHECKER_IGNORE_SUBSTR = "Bad node spec for node"
    # protobuf's message for a file that is not an ONNX model.
    INVALID_ONNX_EXCEPTION_SUBSTR = "Error parsing message with type 'onnx.ModelProto'"
    MAXIMUM_PROTOBUF = 2e9  # bytes: a model larger than this keeps its weights in external data

    class Level(enum.Enum):
        """A report entry's severity (its ``level``)."""

        EXCEPTION = "exception"
        WARNING = "warning"
        INFO = "info"

    class Source(enum.Enum):
        """The checker that reported an entry (its ``source``)."""

        ONNXRUNTIME = "onnxruntime"
        ONNX_CHECKER = "onnx_checker"
        ONNX_LOADER = "onnx_loader"
        ONNX_GS = "onnx_graphsurgeon"


__all__ = ["Lint"]
