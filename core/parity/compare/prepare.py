"""What happens to a pair of outputs before the metrics see them, and Polygraphy's compare function scripts:

* ``--postprocess [OUT:]top-K[,axis=N]`` (alias ``--postprocess-func``): each output (or the one named) is replaced
  on both sides by the indices of its K largest values along the axis (the last by default), largest first, as
  Polygraphy's ``TopKPostprocessFunc`` does;
* ``--postprocess-func-script FILE[:FUNC]`` (default ``postprocess_outputs``): Polygraphy's
  ``(IterationResult) -> IterationResult`` function, applied to each side; it replaces ``--postprocess``;
* ``--no-shape-check``: outputs whose shapes differ are compared after the reference is reshaped (same size) or its
  axes permuted (the same dimensions in another order), as Polygraphy's compare functions do; otherwise they fail;
* ``--compare-func-script FILE[:FUNC]`` (default ``compare_outputs``): Polygraphy's compare function,
  ``(IterationResult, IterationResult) -> {output: verdict}``, replaces the metrics (``--compare-func``).

Parity compares output by output, so each function is called with one output at a time in its
``IterationResult`` (``runner_name`` set to the side's runner); a function that looks at each output on its own,
as Polygraphy's ``CompareFunc`` s and ``TopKPostprocessFunc`` do, sees what it sees under Polygraphy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from parity.compare.result import OutputCheck
from parity.errors import UsageError
from parity.results.model import IterationResult

TopK = tuple[int, int]  # (K, axis)


def parse_postprocess(values: Sequence[str] | str | None, flag: str = "--postprocess") -> dict[str, TopK]:
    """``["top-5", "probs:top-3,axis=1"]`` -> ``{"": (5, -1), "probs": (3, 1)}`` (``""``: every other output)."""
    found: dict[str, TopK] = {}
    for value in [values] if isinstance(values, str) else list(values or ()):
        name, sep, func = value.rpartition(":")
        if not sep:
            name, func = "", value
        k_text, _, axis_text = func.partition(",")
        try:
            if not k_text.startswith("top-") or (axis_text and not axis_text.startswith("axis=")):
                raise ValueError
            k, axis = int(k_text[len("top-") :]), int(axis_text[len("axis=") :]) if axis_text else -1
        except ValueError:
            raise UsageError(f"{flag}: cannot read '{value}'; write [OUT:]top-K[,axis=N] (the one function there is: top-K)") from None
        if k < 1:
            raise UsageError(f"{flag}: '{value}': K must be at least 1")
        found[name] = (k, axis)
    return found


def top_k_indices(array: np.ndarray, k: int, axis: int = -1) -> np.ndarray:
    """The indices of the ``k`` largest values along ``axis``, largest first (ties: the lower index first); ``k`` is
    clamped to the axis length."""
    array = np.asarray(array)
    if array.ndim == 0:
        raise UsageError("--postprocess: top-K needs an output with at least one dimension; this one is a scalar")
    if not -array.ndim <= axis < array.ndim:
        raise UsageError(f"--postprocess: axis {axis} is out of range for an output of shape {list(array.shape)}")
    k = min(k, array.shape[axis])
    keys = -array.astype(np.float64) if array.dtype != np.bool_ else -array.astype(np.int8)
    order = np.argsort(keys, axis=axis, kind="stable")
    return np.take(order, np.arange(k), axis=axis)


def match_shape(array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``--no-shape-check``: ``array`` reshaped to ``shape`` when the sizes agree, else its axes permuted when its
    dimensions are those of ``shape`` in another order (the first unused axis of each size); else unchanged."""
    if array.shape == tuple(shape):
        return array
    if array.size == math.prod(shape):
        return array.reshape(shape)
    if sorted(array.shape) == sorted(shape):
        remaining = list(enumerate(array.shape))
        perm = []
        for dim in shape:
            at = next(i for i, (_, d) in enumerate(remaining) if d == dim)
            perm.append(remaining.pop(at)[0])
        return np.transpose(array, perm)
    return array


class Prepared:
    """A metric that sees the outputs after ``--no-shape-check`` and post-processing; everything else about it
    (its name, ``average``, ``better_when_higher``...) is the metric's own."""

    def __init__(self, func: Callable[[str, np.ndarray, np.ndarray], OutputCheck], steps: Steps) -> None:
        self.func, self.steps = func, steps

    def __getattr__(self, name: str) -> Any:
        return getattr(self.func, name)

    def __call__(self, name: str, actual: np.ndarray, reference: np.ndarray) -> OutputCheck:
        return self.func(name, *self.steps(name, actual, reference))


class Steps:
    """The preparation one run asks for: ``topk`` (``--postprocess``), ``script`` (``--postprocess-func-script``,
    which replaces it) and ``check_shapes``."""

    def __init__(self, topk: Mapping[str, TopK] | None = None, script: Callable[[Any], Any] | None = None, check_shapes: bool = True, where: str = "") -> None:
        self.topk, self.script, self.check_shapes, self.where = dict(topk or {}), script, check_shapes, where

    def __bool__(self) -> bool:
        return bool(self.topk or self.script or not self.check_shapes)

    def _post(self, name: str, array: np.ndarray) -> np.ndarray:
        if self.script is not None:
            result = _call(self.script, self.where, IterationResult({name: array}))
            if not isinstance(result, Mapping) or name not in result:
                raise UsageError(f"{self.where} returned {type(result).__name__}, not an IterationResult holding output '{name}'")
            return np.asarray(result[name])
        if name in self.topk or "" in self.topk:
            k, axis = self.topk.get(name, self.topk.get("", (0, -1)))
            return top_k_indices(array, k, axis)
        return array

    def __call__(self, name: str, actual: np.ndarray, reference: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        actual, reference = self._post(name, actual), self._post(name, reference)
        if not self.check_shapes and actual.shape != reference.shape:
            reference = match_shape(reference, actual.shape)
            if reference.shape != actual.shape and reference.size == actual.size:
                actual = actual.reshape(reference.shape)
        return actual, reference


def _call(func: Callable[..., Any], where: str, *args: Any) -> Any:
    try:
        return func(*args)
    except UsageError:
        raise
    except Exception as exc:  # the user's code: its failure is bad input, named with the script
        text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        raise UsageError(f"{where} raised {type(exc).__name__}{': ' + text if text else ''}") from exc


class ScriptCompare:
    """``--compare-func-script``: a Polygraphy compare function as a metric. An output passes when its verdict is
    truthy; a verdict that carries metric values (Polygraphy's ``L2Result``... ``metric_values()``) reports them."""

    name = "compare-func-script"

    def __init__(self, func: Callable[[Any, Any], Any], where: str) -> None:
        self.func, self.where = func, where

    def __call__(self, name: str, actual: np.ndarray, reference: np.ndarray) -> OutputCheck:
        got = _call(self.func, self.where, IterationResult({name: actual}), IterationResult({name: reference}))
        if not isinstance(got, Mapping):
            raise UsageError(f"{self.where} returned {type(got).__name__}, not a mapping of output name -> verdict")
        if name not in got:
            return OutputCheck(name, False, self.name, message=f"{self.where} gave no verdict for output '{name}'")
        verdict = got[name]
        values: dict[str, float] = {}
        measured = getattr(verdict, "metric_values", None)
        if callable(measured):
            values = {k: float(v) for k, v in measured().items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        passed = bool(verdict)
        return OutputCheck(name, passed, self.name, values, message="" if passed else f"{self.where}: {verdict!r}"[:300])


SCRIPT_FLAGS = {"compare_func_script": "--compare-func-script", "postprocess_func_script": "--postprocess-func-script"}


def prepare_compare_funcs(funcs: list, params: Mapping[str, Any], metric_options: Mapping[str, str]) -> list:
    """The compare functions ``parity run`` uses: ``--compare-func-script``'s function instead of the metrics, and
    each wrapped in the preparation the run asks for. ``metric_options``: ``{parameter: flag}`` of every
    metric's options, refused beside ``--compare-func-script`` (they would configure metrics that do not run)."""
    from parity.util.scripts import load_user_function, split_script_spec  # here: only a run that names a script imports it

    script = params.get("compare_func_script")
    if script:
        if params.get("compare_func"):
            raise UsageError("--compare-func-script replaces the metrics: give it or --compare-func, not both")
        given = [flag for param, flag in metric_options.items() if params.get(param) not in (None, (), False, [])]
        if given:
            raise UsageError(f"{given[0]}: --compare-func-script replaces the metrics, so their options do not apply")
        path, func = split_script_spec(script, "compare_outputs", "--compare-func-script")
        funcs = [ScriptCompare(load_user_function(script, "compare_outputs", "--compare-func-script"), f"--compare-func-script: {path}: {func}()")]
    post_script = params.get("postprocess_func_script")
    topk = parse_postprocess(params.get("postprocess"), "--postprocess")
    if post_script and topk:
        raise UsageError("--postprocess-func-script replaces --postprocess: give one of them")
    post = None
    where = ""
    if post_script:
        path, func = split_script_spec(post_script, "postprocess_outputs", "--postprocess-func-script")
        post = load_user_function(post_script, "postprocess_outputs", "--postprocess-func-script")
        where = f"--postprocess-func-script: {path}: {func}()"
    steps = Steps(topk, post, not params.get("no_shape_check"), where)
    return [Prepared(f, steps) for f in funcs] if steps else funcs
