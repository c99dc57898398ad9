"""The command line's building blocks, for plugins that add commands or options (documented in
docs/plugins/api.md, "Commands: parity.commands").

:mod:`parity.api` is the engine's contract (what runs, compares and debugs); this module is the CLI's: click
groups and command classes, the shared option sets ``parity run`` and the debug commands are built from, how
parsed option values become runner settings and a debug session, and the live progress display. A plugin that
only registers backends, metrics or loaders never needs it. Only the CLI layer defines these names; engine code
(in the core and in plugins) must not import them.

Names resolve lazily, as :mod:`parity.api`'s do: ``import parity.commands`` loads nothing heavy (not even click),
so a plugin's ``hooks`` module stays cheap to import during discovery.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from parity.util.lazy import lazy_attributes

# name -> the module that defines it today (one line to change when a name moves inside the core)
_EXPORTS: dict[str, str] = {
    "group": "parity.cli",
    "ParityCommand": "parity.cli.parsing",
    "verbosity_options": "parity.cli.common",
    "model_options": "parity.cli.options",
    "onnx_options": "parity.cli.options",
    "data_options": "parity.cli.options",
    "data_loader_options": "parity.cli.options",
    "input_shapes_option": "parity.cli.options",
    "onnx_load_options": "parity.cli.options",
    "no_onnxruntime_shape_inference_option": "parity.cli.options",
    "compare_options": "parity.cli.options",
    "backend_params": "parity.cli.options",
    "cast_runner_settings": "parity.cli.run",
    "debug_options": "parity.cli.debug",
    "until_option": "parity.cli.debug",
    "report_option": "parity.cli.debug",
    "make_check": "parity.cli.debug",
    "session_from_options": "parity.cli.debug",
    "LiveProgress": "parity.cli.progress",
    "progress_wanted": "parity.cli.progress",
    "external_data_options": "parity.cli.options",
    "external_data_read_options": "parity.cli.options",
    "external_data_write_options": "parity.cli.options",
    "external_data_from_params": "parity.cli.options",
    "note_external_data": "parity.cli.options",
    "with_params": "parity.cli.options",
}

__all__ = list(_EXPORTS)

__getattr__ = lazy_attributes(__name__, _EXPORTS, " (plugins may use only the names in parity.commands.__all__)", keep=True)

if TYPE_CHECKING:  # what readers and type checkers see; at run time each name loads on first use (above)
    from parity.cli import group
    from parity.cli.common import verbosity_options
    from parity.cli.debug import debug_options, make_check, report_option, session_from_options, until_option
    from parity.cli.options import (
        backend_params,
        compare_options,
        data_loader_options,
        data_options,
        external_data_from_params,
        external_data_options,
        external_data_read_options,
        external_data_write_options,
        input_shapes_option,
        model_options,
        no_onnxruntime_shape_inference_option,
        note_external_data,
        onnx_load_options,
        onnx_options,
        with_params,
    )
    from parity.cli.parsing import ParityCommand
    from parity.cli.progress import LiveProgress, progress_wanted
    from parity.cli.run import cast_runner_settings


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
