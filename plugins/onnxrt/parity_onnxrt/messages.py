"""onnxruntime's own words, made into one line for Parity's errors, and how loudly its C++ logger may speak."""

from __future__ import annotations

import re

from parity.api import SETTINGS, one_line

# onnxruntime's logger severities: 0 verbose, 1 info, 2 warning, 3 error, 4 fatal.
WARNING, FATAL = 2, 4

# Patterns, compiled (and cached by re) the first time an error needs them rather than at import: every
# `parity run --onnxrt` imports this module, few meet an error (~0.5 ms).
_STATUS = r"^\s*\[ONNXRuntimeError\]\s*:\s*\d+\s*:\s*[A-Z_]+\s*:\s*"
_LOAD = r"(?s)^Load model from .*? failed:\s*"
_NODE_ERROR = r"(?s)In Node, \(\"([^\"]*)\", (\w+),[^)]*\)\s*:.*?,\s*Error\s+(.*)"
_RUNNING = r"running (\w+) node\. Name:'([^']*)' Status Message:\s*"


def default_log_severity() -> int:
    """Warnings (and onnxruntime's duplicate error lines) only with ``-v``; otherwise fatal ones only: every
    error still reaches the user, as the text of the exception Parity turns into its one-line error."""
    return WARNING if SETTINGS["verbose"] else FATAL


def reason(exc: BaseException, limit: int = 300) -> str:
    """The sentence that says what went wrong, without onnxruntime's status prefix, the "Load model from ...
    failed:" wrapper or the chain of "Non-zero status code returned while running If node" layers, on one line."""
    text = re.sub(_LOAD, "", re.sub(_STATUS, "", str(exc).strip()))
    found = re.search(_NODE_ERROR, text)
    if found:  # "This is an invalid model. In Node, ("name", If, "", -1) : (...) -> (...) , Error <the reason>"
        name, op, why = found.groups()
        text = f"{text[: found.start()].strip()} {why.strip()} (in {op} node '{name}')" if name else f"{text[: found.start()].strip()} {why.strip()} (in a {op} node)"
    layers = list(re.finditer(_RUNNING, text))
    if layers:  # nested subgraph failures: the innermost node and its message say it all
        last = layers[-1]
        text = f"{last.group(1)} node '{last.group(2)}': {text[last.end():]}"
    return one_line(text, limit) or type(exc).__name__
