"""Fixtures for testing Parity plugins, as a pytest plugin (entry point ``pytest11: parity``; docs/plugins/api.md).

Installed with Parity, so a plugin's tests get them without a ``conftest.py``:

* ``parity_invoke``: ``parity_invoke("run", model, "--onnxrt")`` runs ``parity`` in-process (click's ``CliRunner``)
  and returns ``CliResult(exit_code, stdout, stderr)``.
* ``parity_main``: the same through ``parity.cli.main`` and pytest's ``capsys`` (the test's own output capture),
  plugins kept between calls of one test; ``parity_fresh_plugins``: plugins loaded anew and default verbosity
  around a test (a conftest makes it autouse: ``@pytest.fixture(autouse=True) def _fresh(parity_fresh_plugins): ...``).
* ``relu_add_model``, ``mlp_model``: small ONNX models in ``tmp_path`` (ir_version 10, opset 17, so every
  onnxruntime Parity supports loads them); :func:`save_graph`, :func:`save_model`, :func:`relu_add` and
  :func:`mlp` build others.

pytest imports this module in every session of an environment with Parity installed: it imports nothing heavy
(click, numpy and onnx are imported by the functions that use them).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pytest

IR_VERSION = 10  # onnx.helper.make_model writes the newest IR version, which older onnxruntime refuses
OPSET = 17

__all__ = ["CliResult", "IR_VERSION", "OPSET", "invoke", "mlp", "relu_add", "save_graph", "save_model"]


class CliResult(NamedTuple):
    exit_code: int
    stdout: str
    stderr: str


def invoke(*args: str | os.PathLike, env: dict[str, str] | None = None) -> CliResult:
    """``parity ARGS...`` in this process, as the console script runs it (same error boundary and exit codes).

    Plugins are discovered afresh for each call (so ``PARITY_PLUGINS`` and newly installed entry points count),
    and the verbosity a command sets (``-v``/``-q``) does not leak into the next call."""
    from click.testing import CliRunner

    from parity import plugins  # here: pytest loads this module in every session, Parity only when a test invokes it
    from parity.cli import main  # here: likewise
    from parity.cli.common import SETTINGS

    saved = dict(SETTINGS)
    runner = CliRunner()
    plugins.reset()
    try:
        with runner.isolation(env=env) as streams:
            code = main([os.fspath(a) for a in args])
            sys.stdout.flush()  # what print() wrote is buffered in the redirected streams until flushed
            sys.stderr.flush()
            stdout, stderr = streams[0].getvalue(), streams[1].getvalue()
    finally:
        plugins.reset()
        SETTINGS.clear()
        SETTINGS.update(saved)
    charset = runner.charset
    return CliResult(int(code), stdout.decode(charset, "replace"), stderr.decode(charset, "replace"))


def save_graph(graph: Any, path: str | os.PathLike, opset: int = OPSET, check: bool = False) -> Path:
    """``graph`` (an ``onnx.GraphProto``) saved as a model with ``ir_version`` 10; ``check`` runs onnx's full check."""
    import onnx
    from onnx import helper

    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = IR_VERSION
    if check:
        onnx.checker.check_model(model, full_check=True)
    onnx.save(model, os.fspath(path))
    return Path(path)


def save_model(
    path: str | os.PathLike,
    nodes: Sequence[Any],
    inputs: Sequence[Any],
    outputs: Sequence[Any],
    initializers: Sequence[Any] = (),
    opset: int = OPSET,
    check: bool = False,
) -> Path:
    """A model from nodes, input and output value infos and initializers (graph name ``g``), saved at ``path``."""
    from onnx import helper

    return save_graph(helper.make_graph(list(nodes), "g", list(inputs), list(outputs), initializer=list(initializers)), path, opset, check)


def relu_add(path: str | os.PathLike, dims: Sequence[int | str] = ("N", 3)) -> Path:
    """``h = relu(x); y = h + h`` (nodes ``relu`` and ``add``), float32 ``x`` and ``y`` of shape ``dims``."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(dims))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(dims))
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="relu"), helper.make_node("Add", ["h", "h"], ["y"], name="add")]
    return save_model(path, nodes, [x], [y])


def mlp(path: str | os.PathLike, planted: float = 0.0, width: int = 16) -> Path:
    """x [2, width] -> fc1 (MatMul) -> bias1 (Add) -> act1 (Relu) -> fc2 -> bias2 -> act2 (Tanh) -> fc3 -> y [2, 4].

    Seeded weights; ``planted`` is added to fc2's weight, so such a copy differs from the original in node fc2 only."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    def weight(name: str, shape: tuple[int, ...], seed: int, shift: float = 0.0) -> Any:
        values = np.random.RandomState(seed).randn(*shape) * 0.3
        return numpy_helper.from_array((values.astype(np.float32) + np.float32(shift)).astype(np.float32), name)

    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["h1"], name="fc1"),
        helper.make_node("Add", ["h1", "b1"], ["h1b"], name="bias1"),
        helper.make_node("Relu", ["h1b"], ["a1"], name="act1"),
        helper.make_node("MatMul", ["a1", "W2"], ["h2"], name="fc2"),
        helper.make_node("Add", ["h2", "b2"], ["h2b"], name="bias2"),
        helper.make_node("Tanh", ["h2b"], ["a2"], name="act2"),
        helper.make_node("MatMul", ["a2", "W3"], ["y"], name="fc3"),
    ]
    weights = [
        weight("W1", (width, width), 1),
        weight("b1", (width,), 4),
        weight("W2", (width, width), 2, planted),
        weight("b2", (width,), 5),
        weight("W3", (width, 4), 3),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, width])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    return save_graph(helper.make_graph(nodes, "mlp", [x], [y], weights), path)


@pytest.fixture
def parity_invoke():
    """``parity_invoke(*args, env=None) -> CliResult``: ``parity`` run in-process (see :func:`invoke`)."""
    return invoke


@pytest.fixture
def relu_add_model(tmp_path: Path) -> Path:
    """``relu_add.onnx`` in ``tmp_path`` (see :func:`relu_add`)."""
    return relu_add(tmp_path / "relu_add.onnx")


@pytest.fixture
def mlp_model(tmp_path: Path) -> Path:
    """``mlp.onnx`` in ``tmp_path`` (see :func:`mlp`)."""
    return mlp(tmp_path / "mlp.onnx")


@pytest.fixture
def parity_fresh_plugins() -> Iterator[None]:
    """Plugins loaded anew before and after the test (it may change ``PARITY_PLUGINS`` or add one-off plugins),
    and the verbosity a command sets (``-v``/``-q``) back to the defaults. Not autouse: a conftest that wants it
    for every test asks for it from an autouse fixture of its own."""
    from parity import plugins  # here: pytest loads this module in every session, Parity only when a test uses it
    from parity.cli.common import SETTINGS  # here: likewise

    plugins.reset()
    SETTINGS.update(verbose=False, quiet=False, warnings=True)
    yield
    plugins.reset()


@pytest.fixture
def parity_main(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """``parity_main(*args) -> CliResult``: ``parity.cli.main`` in this process, what it printed read through
    ``capsys``. Unlike ``parity_invoke`` it keeps the loaded plugins between calls (pair it with
    ``parity_fresh_plugins``) and leaves the process's streams to pytest."""
    from parity.cli import main  # here: pytest loads this module in every session, Parity only when a test uses it

    def call(*args: str | os.PathLike) -> CliResult:
        code = main([os.fspath(a) if isinstance(a, os.PathLike) else str(a) for a in args])
        out = capsys.readouterr()
        return CliResult(int(code), out.out, out.err)

    return call
