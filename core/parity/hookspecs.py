"""The plugin contract: every hook Parity calls, in one file.

Plugins implement hooks with ``@parity.hookimpl`` on functions named exactly like the specs below and
register through the ``parity`` entry-point group (or ``--plugin file.py`` for one-off modules).

Rules that keep plugins working across Parity versions:

* Every hook is a *registration* hook: Parity passes a ``register`` callable (or the click group) and the
  plugin hands over cheap descriptions (dataclasses from :mod:`parity.registry`). Heavy libraries
  (tensorrt, onnxruntime, onnx, torch) are imported only inside the factories those descriptions point
  to, never at module import time, so ``parity --help`` stays fast.
* Hooks only ever gain *optional* arguments. pluggy passes an implementation only the arguments it names,
  so a plugin written against an older signature keeps working. Never give a hookimpl argument a default:
  pluggy does not pass arguments with defaults.
* All hooks are called once per process, right after plugins are loaded
  (:func:`parity.plugins.get_registry`), in no guaranteed order: results never depend on plugin order, and
  two plugins claiming the same name is an error naming both distributions.
"""

from __future__ import annotations

import pluggy

PROJECT = "parity"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def parity_register_backends(register):
    """Register inference backends (runners).

    Called by: :func:`parity.plugins.get_registry`, once, when the registry is first needed (building
    ``parity run``/``convert`` options, or ``parity plugins``).

    :param register: ``register(backend: parity.registry.Backend)``. Each backend gets a CLI flag
        (``Backend.flag``, e.g. ``--onnxrt``) on every command that runs models, its own ``options``
        (click options, prefixed with the backend name by convention), and a ``make_runner`` factory that
        Parity calls with a :class:`parity.registry.RunnerRequest` once the user has selected it.
    """


@hookspec
def parity_register_model_kinds(register):
    """Register model file kinds (ONNX, TensorRT engine, ...).

    Called by: :func:`parity.plugins.get_registry`. Parity uses kinds to detect what a model path is
    (by suffix, then by sniffing its first bytes), to read its input metadata before any work so that bad
    input names and shapes are rejected early, and to print it in ``parity inspect model``.

    :param register: ``register(kind: parity.registry.ModelKind)``.
    """


@hookspec
def parity_register_comparators(register):
    """Register comparison metrics, selectable with ``--compare-func NAME`` (repeatable: all must pass).

    Called by: :func:`parity.plugins.get_registry`. The comparator's ``options`` are added to ``parity
    run`` (e.g. ``--cosine-min``); its ``factory(options)`` is called by the comparison engine
    (:meth:`parity.compare.Comparator.compare_accuracy`) to build the per-output compare function.

    :param register: ``register(comparator: parity.registry.ComparatorSpec)``.
    """


@hookspec
def parity_register_data_loaders(register):
    """Register sources of input data, selectable with ``--data-loader NAME``.

    Called by: :func:`parity.plugins.get_registry`. The default ``random`` loader and the
    ``--data-loader-script``/``--load-inputs`` sources are registered by the core the same way.

    :param register: ``register(loader: parity.registry.DataLoaderSpec)``.
    """


@hookspec
def parity_register_debug_strategies(register):
    """Register debug search strategies (``--mode NAME`` of ``parity debug reduce`` / ``precision``).

    Called by: :func:`parity.plugins.get_registry`, when a ``debug`` command builds its options.
    A strategy searches a list of candidate items (graph nodes, layers) for a minimal failing subset,
    asking an oracle through a :class:`parity.debug.executor.Executor`.

    :param register: ``register(strategy: parity.registry.StrategySpec)``.
    """


@hookspec
def parity_register_converters(register):
    """Register model converters for ``parity convert MODEL -o OUT``.

    Called by: :func:`parity.plugins.get_registry`, when ``parity convert`` builds its options. The
    converter is chosen by ``--convert-to NAME`` or by the output path's suffix; its ``options`` are added
    to ``parity convert``; ``convert(request)`` writes ``request.output`` atomically.

    :param register: ``register(converter: parity.registry.ConverterSpec)``.
    """


@hookspec
def parity_register_options(register):
    """Add options to commands other plugins or the core own (``run``, ``convert``, ``debug build``, ...).

    Called by: :func:`parity.cli.build_cli`, after every command exists. Each option joins the named
    commands (space-separated paths such as ``"debug build"``); its value reaches the command, and
    backends see it in ``RunnerRequest.options``. An option claimed by two plugins is an error naming both.

    :param register: ``register(options: parity.registry.OptionSpec)``. ``OptionSpec.validate(command,
        params, ctx)``, if given, runs before the command with its parsed values: raise
        :class:`parity.errors.UsageError` to refuse a combination (e.g. ``--save-tactics`` without ``--trt``).
    """


@hookspec
def parity_register_commands(cli):
    """Add CLI commands.

    Called by: :func:`parity.cli.main` while building the click group, before argument parsing.
    Add top-level commands with ``@cli.command()``; add sub-commands to the built-in groups with
    :func:`parity.cli.group(cli, "inspect")` (groups: ``inspect``, ``debug``, ``surgeon``, ``check``,
    ``data``). Keep command modules thin: import heavy libraries inside the command function.

    :param cli: the root :class:`click.Group`.
    """
