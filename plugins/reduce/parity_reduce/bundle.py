"""A standalone repro bundle: one folder to attach to a bug report.

    <dir>/model.onnx       the minimal failing model
    <dir>/inputs.npz       the inputs that trigger the failure (one entry per sample; Parity's input format)
    <dir>/expected.npz     what its outputs were in the full model (reference run; Parity's results format)
    <dir>/check.sh         the exact check command, pointed at the files above
    <dir>/README.md        what was reduced, the node list, how to run it

The folder is written beside its final place and renamed into it, so it is complete or absent.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx


def write_bundle(
    directory: str | Path,
    model: onnx.ModelProto,
    nodes: Sequence[str],
    inputs: Sequence[Mapping[str, np.ndarray]],
    expected: Sequence[Mapping[str, np.ndarray]],
    check: Sequence[str] | None,
    substitutions: Mapping[str, str],
    source: str,
    checks: int,
) -> Path:
    from parity.results.files import save_inputs, save_results
    from parity.results.model import IterationResult, RunResults

    target = Path(directory)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        (tmp / "model.onnx").write_bytes(model.SerializeToString())
        if inputs:
            save_inputs(inputs, tmp / "inputs.npz")
        if expected:
            save_results(RunResults([("reference", [IterationResult(dict(e)) for e in expected])]), tmp / "expected.npz")
        command = [substitutions.get(tok, tok) for tok in check] if check else None
        if command:  # copy files the check reads (scripts, golden outputs) so the folder stands alone
            for k, tok in enumerate(command):
                src = Path(tok)
                if k > 0 and tok not in substitutions.values() and src.is_file() and src.stat().st_size < (64 << 20) and not (tmp / src.name).exists():
                    shutil.copy2(src, tmp / src.name)
                    command[k] = src.name
        script = '#!/bin/sh\n# Exit code non-zero (or the --fail-regex output) means the failure reproduces.\ncd "$(dirname "$0")"\n'
        script += (shlex.join(command) if command else "parity run model.onnx --onnxrt" + (" --load-inputs inputs.npz" if inputs else "")) + "\n"
        (tmp / "check.sh").write_text(script)
        os.chmod(tmp / "check.sh", 0o755)
        (tmp / "README.md").write_text(_readme(source, nodes, model, bool(inputs), bool(expected), checks))
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def _readme(source: str, nodes: Sequence[str], model: onnx.ModelProto, inputs: bool, expected: bool, checks: int) -> str:
    ins = ", ".join(i.name for i in model.graph.input) or "(none)"
    outs = ", ".join(o.name for o in model.graph.output)
    lines = [
        "# Minimal failing model",
        "",
        f"Reduced from `{source}` by `parity debug reduce` in {checks} check(s).",
        "",
        f"- nodes ({len(nodes)}): {', '.join(f'`{n}`' for n in nodes)}",
        f"- inputs: {ins}",
        f"- outputs: {outs}",
        "",
        "Files: `model.onnx` (the model)"
        + (", `inputs.npz` (inputs that trigger the failure)" if inputs else "")
        + (", `expected.npz` (the outputs' values in the full model)" if expected else "")
        + ", `check.sh` (the check; run `./check.sh`).",
        "",
        "Compare a backend against the expected values: `parity run model.onnx --onnxrt"
        + (" --load-inputs inputs.npz" if inputs else "")
        + (" --load-outputs expected.npz" if expected else "")
        + "`.",
        "",
    ]
    return "\n".join(lines)
