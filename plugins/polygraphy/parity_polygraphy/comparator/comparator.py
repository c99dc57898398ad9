"""Polygraphy's ``Comparator`` (``polygraphy.comparator.comparator``): run runners over the same inputs, then
post-process, validate and compare what they returned, with Polygraphy's arguments and return types.

Runners are Polygraphy-style (``parity_polygraphy.backend.*``: ``get_input_metadata(use_numpy_dtypes=)``,
``infer(feed_dict)``, ``last_inference_time()``); Parity's own runners (``parity_onnxrt.api.OnnxrtRunner``...) work
too. Inputs saved with ``save_inputs_path`` are written by Parity's engine (atomic; Polygraphy's JSON format for a
``.json`` path).
"""

from __future__ import annotations

import copy
import multiprocessing
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from parity import api as parity_api
from parity_polygraphy.comparator.compare import CompareFunc, to_numpy
from parity_polygraphy.comparator.data_loader import DataLoader, DataLoaderCache
from parity_polygraphy.comparator.struct import AccuracyResult, AccuracyResults, IterationResult, RunResults
from parity_polygraphy.exception import PolygraphyException
from parity_polygraphy.logger import G_LOGGER

__all__ = ["Comparator"]


def _input_metadata(runner: Any) -> Any:
    """The runner's input metadata as ``name -> (dtype, shape)``, from a Polygraphy-style runner or Parity's."""
    try:
        meta = runner.get_input_metadata(use_numpy_dtypes=False)
    except TypeError:  # Parity's runners take no arguments
        meta = runner.get_input_metadata()
    if all(isinstance(value, tuple) for value in meta.values()):
        return meta
    return OrderedDict((name, (value.dtype, value.shape)) for name, value in meta.items())


def _last_inference_time(runner: Any) -> float | None:
    value = runner.last_inference_time
    return value() if callable(value) else value


def _execute_runner(runner: Any, loader_cache: DataLoaderCache, warm_up: int) -> list[IterationResult]:
    with runner as active_runner:
        loader_cache.set_input_metadata(_input_metadata(active_runner))
        if warm_up:
            G_LOGGER.start(f"{active_runner.name:35} | Running {warm_up} warm-up run(s)")
            try:
                feed_dict = loader_cache[0]
            except IndexError:
                G_LOGGER.warning(f"{warm_up} warm-up run(s) were requested, but the data loader did not supply any data. Skipping warm-up run(s)")
            else:
                for _ in range(warm_up):
                    active_runner.infer(feed_dict=feed_dict)
        iteration_results = []
        for index in range(len(loader_cache)):
            outputs = active_runner.infer(feed_dict=loader_cache[index])
            runtime = _last_inference_time(active_runner)
            # a runner may reuse its output buffers: keep a copy of each iteration's
            iteration_results.append(IterationResult(outputs=copy.deepcopy(dict(outputs)), runtime=runtime, runner_name=active_runner.name))
            if runtime is not None:
                G_LOGGER.info(f"{active_runner.name:35} | Completed {index + 1} iteration(s) in {runtime * 1000.0:.4g} ms")
    return iteration_results


def _child(send: Any, runner: Any, loader_cache: DataLoaderCache, warm_up: int) -> None:
    """A runner's subprocess: sends back ``("ok", results, cache)`` or ``("error", message)``."""
    try:
        results = _execute_runner(runner, loader_cache, warm_up)
        plain = [({k: to_numpy(v) for k, v in r.items()}, r.runtime, r.runner_name) for r in results]
        send.send(("ok", plain, loader_cache.cache))
    except BaseException as exc:  # whatever failed in the child is reported to the parent as one line
        send.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        send.close()


def _run_in_subprocess(runner: Any, loader_cache: DataLoaderCache, warm_up: int, timeout: float | None, polling_interval: float) -> list[IterationResult]:
    """Run one runner in a forked process; a crash, an error or a timeout there is a ``PolygraphyException`` here."""
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, runner, loader_cache, warm_up))
    proc.start()
    send.close()  # the child holds the only writer: its death ends our wait with EOFError
    deadline = None if timeout is None else time.monotonic() + timeout
    name = getattr(runner, "name", type(runner).__name__)
    try:
        while True:
            wait = polling_interval or None
            if deadline is not None:
                wait = max(0.0, min(wait or timeout, deadline - time.monotonic()))  # type: ignore[type-var]
            try:
                if recv.poll(wait):
                    payload = recv.recv()
                    break
            except EOFError:
                proc.join()
                raise PolygraphyException(f"Runner: {name} | subprocess exited with code {proc.exitcode} before returning results") from None
            if deadline is not None and time.monotonic() >= deadline:
                raise PolygraphyException(f"Runner: {name} | subprocess timed out after {timeout} second(s)")
            if not proc.is_alive() and not recv.poll(0):
                raise PolygraphyException(f"Runner: {name} | subprocess exited with code {proc.exitcode} before returning results")
    finally:
        if proc.is_alive() and proc.exitcode is None:
            proc.join(timeout=5)
        if proc.is_alive():
            proc.kill()
            proc.join()
        recv.close()
    if payload[0] != "ok":
        raise PolygraphyException(f"Runner: {name} | failed in its subprocess: {payload[1]}")
    _, plain, cache = payload
    if not loader_cache.cache:
        loader_cache.cache = cache
    return [IterationResult(outputs, runtime, runner_name) for outputs, runtime, runner_name in plain]


def _save_input_blobs(feeds: list, path: str) -> None:
    """Each iteration's inputs as raw bytes (``ndarray.tofile``): ``path/<index, 10 digits>/<name>.bin``."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise PolygraphyException(f"Cannot save raw inputs to '{path}': a file already exists there, but this path is a directory of per-iteration folders")
    for index, feed in enumerate(feeds):
        folder = os.path.join(path, f"{index:010d}")  # Polygraphy's per-iteration names
        os.makedirs(folder, exist_ok=True)
        for name, arr in feed.items():
            dest = os.path.realpath(os.path.join(folder, f"{name}.bin"))
            if os.path.commonpath([dest, os.path.realpath(folder)]) != os.path.realpath(folder):
                raise PolygraphyException(f"Cannot save raw input tensor named '{name}': the name resolves to a path outside of '{folder}'")
            parity_api.write_bytes_atomic(dest, np.ascontiguousarray(to_numpy(arr)).tobytes())


class Comparator:
    """Runs runners, then compares, validates or post-processes their results."""

    @staticmethod
    def run(
        runners: Sequence[Any],
        data_loader: Iterable[Mapping[str, Any]] | None = None,
        warm_up: int | None = None,
        use_subprocess: bool | None = None,
        subprocess_timeout: float | None = None,
        subprocess_polling_interval: float | None = None,
        save_inputs_path: str | None = None,
        save_outputs_path: str | None = None,
        save_input_blob_path: str | None = None,
        streaming: bool | None = None,
    ) -> RunResults:
        """Run each runner over the data loader's feed dicts (default: ``DataLoader()``, one iteration of random
        inputs), after ``warm_up`` untimed runs on the first feed dict. ``use_subprocess``: each runner in a
        process of its own (an error or a crash there raises ``PolygraphyException``; ``subprocess_timeout``
        seconds at most; ``subprocess_polling_interval`` default 30). ``save_inputs_path``/``save_outputs_path``:
        write the inputs used / the results (Polygraphy's JSON); ``save_input_blob_path``: a folder with each
        iteration's inputs as raw ``0000000001/<name>.bin`` files. ``streaming=True`` is refused (run over a data
        loader of fewer iterations, or use ``parity run``, which streams). Returns ``RunResults``: one
        ``(runner.name, [IterationResult, ...])`` per runner."""
        if streaming:
            raise PolygraphyException("Comparator.run(streaming=True) is not supported by parity_polygraphy; `parity run` streams iterations with bounded memory")
        paths = [os.path.realpath(p) for p in (save_inputs_path, save_outputs_path, save_input_blob_path) if p is not None and not hasattr(p, "write")]
        if len(set(paths)) != len(paths):
            raise PolygraphyException("Two of save_inputs_path, save_outputs_path, and save_input_blob_path resolve to the same path. Use distinct paths.")
        warm_up = warm_up or 0
        data_loader = DataLoader() if data_loader is None else data_loader
        polling_interval = 30 if subprocess_polling_interval is None else subprocess_polling_interval
        loader_cache = DataLoaderCache(data_loader, save_inputs_path=save_inputs_path)
        run_results = RunResults()
        if not runners:
            G_LOGGER.warning("No runners were provided to Comparator.run(). Inference will not be run.")
        for runner in runners:
            G_LOGGER.start(f"{getattr(runner, 'name', runner)!s:35} | Activating and starting inference")
            if use_subprocess:
                iteration_results = _run_in_subprocess(runner, loader_cache, warm_up, subprocess_timeout, polling_interval)
            else:
                iteration_results = _execute_runner(runner, loader_cache, warm_up)
            run_results.append((runner.name, iteration_results))
        if save_input_blob_path is not None:
            _save_input_blobs(loader_cache.cache, save_input_blob_path)
        if save_outputs_path is not None:
            run_results.save(save_outputs_path)
        return run_results

    @staticmethod
    def postprocess(run_results: RunResults, postprocess_func: Callable[[IterationResult], IterationResult]) -> RunResults:
        """Apply ``postprocess_func`` (e.g. ``PostprocessFunc.top_k(k=5)``) to every iteration, in place; returns
        ``run_results``."""
        for _, iteration_results in run_results.items():
            for index, iter_result in enumerate(iteration_results):
                iteration_results[index] = postprocess_func(iter_result)
        return run_results

    @staticmethod
    def default_comparisons(run_results: RunResults) -> list[tuple[int, int]]:
        """Each run against the next, by index: ``[(0, 1), (1, 2), ...]``."""
        return list(zip(range(len(run_results) - 1), range(1, len(run_results))))

    @staticmethod
    def compare_accuracy(
        run_results: RunResults,
        fail_fast: bool | None = None,
        comparisons: Sequence[tuple[int, int]] | None = None,
        compare_func: Callable[[IterationResult, IterationResult], Mapping[str, Any]] | Sequence[Callable] | None = None,
        check_average: bool = False,
    ) -> AccuracyResult | AccuracyResults:
        """Compare the runs of each pair in ``comparisons`` (indices into ``run_results``; default: each with the
        next), iteration by iteration (the shorter run's count), with ``compare_func`` (default
        ``CompareFunc.simple()``). ``fail_fast``: stop at the first iteration with a mismatch. ``check_average``: each
        output passes when its error statistic averaged over the iterations does (``simple`` with a
        ``check_error_stat`` other than elemwise; not with ``fail_fast``). Returns an ``AccuracyResult``:
        ``{(runner0, runner1): [per-output results of each iteration]}``; with a list of compare functions, an
        ``AccuracyResults`` holding one per function (Polygraphy 0.53 returns that list even for one function;
        a single function gets its ``AccuracyResult`` here, as in Polygraphy 0.49, so ``result[pair]`` works)."""
        if isinstance(compare_func, (list, tuple)):
            return AccuracyResults(Comparator.compare_accuracy(run_results, fail_fast, comparisons, func, check_average) for func in compare_func)
        if check_average and fail_fast:
            raise PolygraphyException("check_average and fail_fast cannot be used together.")
        compare_func = CompareFunc.simple() if compare_func is None else compare_func
        comparisons = Comparator.default_comparisons(run_results) if comparisons is None else comparisons
        accuracy_result = AccuracyResult(aggregation="average" if check_average else "per_sample")
        for index0, index1 in comparisons:
            (runner0_name, results0), (runner1_name, results1) = run_results[index0], run_results[index1]
            G_LOGGER.start(f"Accuracy Comparison | {runner0_name} vs. {runner1_name}")
            runner_pair = (runner0_name, runner1_name)
            accuracy_result[runner_pair] = []
            num_iters = min(len(results0), len(results1))
            for iteration, (result0, result1) in enumerate(zip(results0, results1)):
                if num_iters > 1:
                    G_LOGGER.info(f"Iteration: {iteration}")
                match = compare_func(result0, result1)
                accuracy_result[runner_pair].append(match)
                if fail_fast and any(not bool(matched) for matched in match.values()):
                    return accuracy_result
            passed, _, total = accuracy_result.stats(runner_pair)
            rate = accuracy_result.percentage(runner_pair) * 100.0
            msg = f"Accuracy Summary | {runner0_name} vs. {runner1_name} | Passed: {passed}/{total} iterations | Pass Rate: {rate}%"
            if check_average:
                averaged = accuracy_result.average_results(runner_pair)  # refuses what has no statistic to average
                failing = [name for name, result in averaged.items() if not result]
                msg = f"Average Accuracy | {runner0_name} vs. {runner1_name} | {'FAILED: ' + str(failing) if failing else 'PASSED'} over {total} iteration(s)"
                passed = total if not failing else -1
            if passed == total:
                G_LOGGER.finish(msg)
            else:
                G_LOGGER.error(msg)
        return accuracy_result

    @staticmethod
    def validate(run_results: RunResults, check_inf: bool | None = None, check_nan: bool | None = None, fail_fast: bool | None = None) -> bool:
        """Whether every output is free of NaN (``check_nan``, default on) and of Inf (``check_inf``, default off);
        ``fail_fast`` stops at the first invalid output."""
        check_nan = True if check_nan is None else check_nan
        all_valid = True
        for runner_name, results in run_results.items():
            for result in results:
                for output_name, output in result.items():
                    arr = to_numpy(output)
                    valid = True
                    if check_nan and np.issubdtype(arr.dtype, np.inexact) and np.isnan(arr).any():
                        G_LOGGER.error(f"{runner_name:35} | NaN Detected | One or more NaNs were encountered in output: {output_name}")
                        valid = False
                    if check_inf and np.issubdtype(arr.dtype, np.inexact) and not np.isfinite(arr).all():
                        G_LOGGER.error(f"{runner_name:35} | Inf Detected | One or more non-finite values were encountered in output: {output_name}")
                        valid = False
                    all_valid &= valid
                    if fail_fast and not all_valid:
                        return False
        if all_valid:
            G_LOGGER.finish("PASSED | Output Validation")
        else:
            G_LOGGER.error("FAILED | Output Validation")
        return all_valid
