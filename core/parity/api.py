"""Everything a plugin may use from Parity's core, in one module (documented in docs/plugins/api.md).

This is the engine's contract: what a plugin needs to run, compare and debug models, and nothing of the
command line (a plugin that adds commands takes click groups, option sets and the like from
:mod:`parity.commands`). Plugins import from here, from :mod:`parity.commands`, :mod:`parity` and
:mod:`parity.hookspecs` only; every other ``parity.*`` module is internal and may change in any release. ``tests/test_import_surface.py`` enforces this for the
first-party plugins and the contrib packages.

Names resolve lazily: ``from parity.api import DataLoader`` imports only the module that defines
``DataLoader``, so ``import parity.api`` costs no more than ``import parity`` (no numpy, onnx, onnxruntime,
tensorrt or click), and a plugin's ``hooks`` module stays cheap to import during discovery.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from parity.util.lazy import lazy_attributes

# name -> the module that defines it today. When a name moves inside the core, change its module here (and
# nowhere else: plugins keep importing it from parity.api). A module path ending in ".<name>" exports that
# module itself (``onnx_models``), for helpers plugins call as ``onnx_models.load(...)``.
_EXPORTS: dict[str, str] = {
    # hooks and what they register
    "hookimpl": "parity.hookspecs",
    "Backend": "parity.registry",
    "RunnerRequest": "parity.registry",
    "ModelKind": "parity.registry",
    "ComparatorSpec": "parity.registry",
    "DataLoaderSpec": "parity.registry",
    "StrategySpec": "parity.registry",
    "ExecutorSpec": "parity.registry",
    "ConverterSpec": "parity.registry",
    "ConvertRequest": "parity.registry",
    "OptionSpec": "parity.registry",
    "get_registry": "parity.plugins",
    "call_hook": "parity.plugins",
    "module_available": "parity.plugins",
    # errors
    "ExitCode": "parity.errors",
    "ParityError": "parity.errors",
    "UsageError": "parity.errors",
    "ModelError": "parity.errors",
    "BackendError": "parity.errors",
    "PluginError": "parity.errors",
    "missing_dependency": "parity.errors",
    # runners, loaders and tensors
    "BaseRunner": "parity.backend.base",
    "BaseLoader": "parity.backend.base",
    "invoke_if_callable": "parity.backend.base",
    "TensorMeta": "parity.data.meta",
    # input data
    "DataLoader": "parity.data.loader",
    "as_feed": "parity.data.loader",
    "load_script_loader": "parity.data.loader",
    "parse_shape": "parity.data.parse",
    "parse_shapes": "parity.data.parse",
    "parse_per_name": "parity.data.parse",
    "parse_val_ranges": "parity.data.parse",
    # comparison
    "OutputCheck": "parity.compare.result",
    "STATISTICS": "parity.compare.simple",
    "statistics_level": "parity.compare.simple",
    "resolve_compare_funcs": "parity.compare.comparator",
    "DivergenceReport": "parity.compare.divergence",
    "GraphInfo": "parity.compare.divergence",
    "TensorError": "parity.compare.divergence",
    "first_divergent": "parity.compare.divergence",
    "tensor_error": "parity.compare.divergence",
    "FiniteRow": "parity.compare.nonfinite",
    "NonFiniteReport": "parity.compare.nonfinite",
    "finite_row": "parity.compare.nonfinite",
    "first_nonfinite": "parity.compare.nonfinite",
    "describe_first": "parity.compare.nonfinite",
    "is_scanned": "parity.compare.nonfinite",
    "constant_values": "parity.compare.nonfinite",
    # results files
    "RunResults": "parity.results.model",
    "IterationResult": "parity.results.model",
    "save_inputs": "parity.results.files",
    "load_inputs": "parity.results.files",
    "save_results": "parity.results.files",
    "load_results": "parity.results.files",
    "check_output_path": "parity.results.files",
    "load_json": "parity.results.polygraphy",
    # declaring options (commands' click building blocks are parity.commands'), and output
    "GreedyOption": "parity.cli.parsing",
    "SETTINGS": "parity.console",
    "echo": "parity.console",
    "command_line": "parity.console",
    "json_default": "parity.reporting",
    "logger": "parity.logger",
    # options -> data loader and compare functions, as `parity run` builds them
    "make_data_loader": "parity.from_options",
    "make_compare_funcs": "parity.from_options",
    "loaded_onnx": "parity.from_options",
    "OutputNames": "parity.compare.names",
    # the debug engine
    # composing loaders (Polygraphy's func.extend), for every backend
    "extend": "parity.func",
    "BytesFromPath": "parity.backend.common",
    "DebugSession": "parity.debug.session",
    "Iteration": "parity.debug.session",
    "Candidate": "parity.debug.session",
    "Summary": "parity.debug.session",
    "OriginalNotFailing": "parity.debug.session",
    "file_fingerprint": "parity.debug.session",
    "write_debug_report": "parity.debug.report",
    "Outcome": "parity.debug.check",
    "CommandCheck": "parity.debug.check",
    "PredicateCheck": "parity.debug.check",
    "CheckJob": "parity.debug.check",
    "CheckRun": "parity.debug.check",
    "run_check_job": "parity.debug.check",
    "Executor": "parity.debug.executor",
    "ThreadExecutor": "parity.debug.executor",
    "Strategy": "parity.debug.strategy",
    "Oracle": "parity.debug.strategy",
    "subset_key": "parity.debug.strategy",
    # watching a run (hook parity_watch_run): reports as plugins
    "RunWatcher": "parity.reporting",
    "FinishedRun": "parity.reporting",
    "RunReporter": "parity.reporting",
    "DebugReporter": "parity.reporting",
    "first_divergence": "parity.compare.divergence",
    "decade_labels": "parity.compare.stats",
    # ONNX models (the module; its public functions are listed in docs/plugins/api.md)
    "onnx_models": "parity.onnx_models",
    "onnx_external": "parity.onnx_external",
    "ExternalData": "parity.onnx_external",
    "SavedModel": "parity.onnx_external",
    "WeightReader": "parity.onnx_external",
    "save_model": "parity.onnx_external",
    "runtime_bytes": "parity.onnx_external",
    "remove_stale_parts": "parity.util.fs",
    "kernel_copy": "parity.util.fs",
    # files and text
    "write_bytes_atomic": "parity.util.fs",
    "write_text_atomic": "parity.util.fs",
    "atomic_write": "parity.util.fs",
    "part_path": "parity.util.fs",
    "check_model_path": "parity.util.fs",
    "refuse_overwrite": "parity.util.fs",
    "same_file": "parity.util.fs",
    "did_you_mean": "parity.util.text",
    "first_line": "parity.util.text",
    "one_line": "parity.util.text",
    "names_preview": "parity.util.text",
    "counted": "parity.util.text",
    "warn": "parity.util.text",
    "load_user_function": "parity.util.scripts",
    "split_script_spec": "parity.util.scripts",
    "lazy_attributes": "parity.util.lazy",
    "parse_size": "parity.util.units",
    "frozen_heap": "parity.util.memory",
}


if TYPE_CHECKING:  # what readers and type checkers see; at run time each name loads on first use (below)
    from parity import logger, onnx_external, onnx_models
    from parity.backend.base import BaseLoader, BaseRunner, invoke_if_callable
    from parity.backend.common import BytesFromPath
    from parity.cli.parsing import GreedyOption
    from parity.compare.comparator import resolve_compare_funcs
    from parity.compare.divergence import DivergenceReport, GraphInfo, TensorError, first_divergence, first_divergent, tensor_error
    from parity.compare.names import OutputNames
    from parity.compare.nonfinite import FiniteRow, NonFiniteReport, constant_values, describe_first, finite_row, first_nonfinite, is_scanned
    from parity.compare.result import OutputCheck
    from parity.compare.simple import STATISTICS, statistics_level
    from parity.compare.stats import decade_labels
    from parity.console import SETTINGS, command_line, echo
    from parity.data.loader import DataLoader, as_feed, load_script_loader
    from parity.data.meta import TensorMeta
    from parity.data.parse import parse_per_name, parse_shape, parse_shapes, parse_val_ranges
    from parity.debug.check import CheckJob, CheckRun, CommandCheck, Outcome, PredicateCheck, run_check_job
    from parity.debug.executor import Executor, ThreadExecutor
    from parity.debug.report import write_debug_report
    from parity.debug.session import Candidate, DebugSession, Iteration, OriginalNotFailing, Summary, file_fingerprint
    from parity.debug.strategy import Oracle, Strategy, subset_key
    from parity.errors import BackendError, ExitCode, ModelError, ParityError, PluginError, UsageError, missing_dependency
    from parity.from_options import loaded_onnx, make_compare_funcs, make_data_loader
    from parity.func import extend
    from parity.hookspecs import hookimpl
    from parity.onnx_external import ExternalData, SavedModel, WeightReader, runtime_bytes, save_model
    from parity.plugins import call_hook, get_registry, module_available
    from parity.registry import Backend, ComparatorSpec, ConverterSpec, ConvertRequest, DataLoaderSpec, ExecutorSpec, ModelKind, OptionSpec, RunnerRequest, StrategySpec
    from parity.reporting import DebugReporter, FinishedRun, RunReporter, RunWatcher, json_default
    from parity.results.files import check_output_path, load_inputs, load_results, save_inputs, save_results
    from parity.results.model import IterationResult, RunResults
    from parity.results.polygraphy import load_json
    from parity.util.fs import (
        atomic_write,
        check_model_path,
        kernel_copy,
        part_path,
        refuse_overwrite,
        remove_stale_parts,
        same_file,
        write_bytes_atomic,
        write_text_atomic,
    )
    from parity.util.lazy import lazy_attributes
    from parity.util.memory import frozen_heap
    from parity.util.scripts import load_user_function, split_script_spec
    from parity.util.text import counted, did_you_mean, first_line, names_preview, one_line, warn
    from parity.util.units import parse_size

__all__ = list(_EXPORTS)


__getattr__ = lazy_attributes(__name__, _EXPORTS, " (plugins may use only the names in parity.api.__all__)", keep=True)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
