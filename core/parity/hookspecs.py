"""The plugin contract: every hook Parity calls, in one file.

Plugins implement hooks with ``@parity.hookimpl`` on functions named exactly like the specs below and
register through the ``parity`` entry-point group (or ``--plugin file.py`` for one-off modules).

Rules that keep plugins working across Parity versions:

* Every hook but :func:`parity_divergence_hint`, :func:`parity_node_origins` and :func:`parity_watch_run` is a *registration* hook: Parity passes a ``register``
  callable (or the click group) and the plugin hands over cheap descriptions (dataclasses from :mod:`parity.registry`). Heavy libraries
  (tensorrt, onnxruntime, onnx, torch) are imported only inside the factories those descriptions point
  to, never at module import time, so ``parity --help`` stays fast.
* Hooks only ever gain *optional* arguments. pluggy passes an implementation only the arguments it names,
  so a plugin written against an older signature keeps working. Never give a hookimpl argument a default:
  pluggy does not pass arguments with defaults.
* When: the registration hooks (``parity_register_*`` but ``parity_register_commands``) are called plugin by
  plugin the first time the registry is needed (:func:`parity.plugins.get_registry`), and again only if the
  set of loaded plugins changes (a ``--plugin`` file added later, :func:`parity.plugins.reset`).
  ``parity_describe_commands`` is called the same way when a command tree is first built
  (:func:`parity.plugins.command_table`). ``parity_register_commands`` is called each time a command tree is
  built (:func:`parity.cli.build_cli`: once per ``parity`` invocation; callers that build several trees, such
  as tests, call it once per tree). Order between plugins is not guaranteed: results never depend on it, and
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
def parity_register_executors(register):
    """Register executors: where ``debug`` commands run their checks (``--executor NAME``; the core registers
    ``local``: one at a time, or ``--jobs N`` threads here).

    Called by: :func:`parity.plugins.get_registry`, when a ``debug`` command builds its options. The
    executor's ``options`` join every command built with :func:`parity.commands.debug_options`; when the user
    picks it, ``factory(options)`` (the command's parsed options: ``jobs`` and the executor's own) returns a
    :class:`parity.debug.executor.Executor`. Verdicts are judged by the session, never by the executor, so
    results are the same whatever executor ran the checks.

    :param register: ``register(executor: parity.registry.ExecutorSpec)``.
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

    Called by: :func:`parity.plugins.get_registry`. Each option joins the named commands (space-separated
    paths such as ``"debug build"``) when that command is loaded (it runs or shows its ``--help``: commands
    load lazily); its value reaches the command, and backends see it in ``RunnerRequest.options``. An option
    claimed by two plugins is an error naming both.

    :param register: ``register(options: parity.registry.OptionSpec)``. ``OptionSpec.validate(command,
        params, ctx)``, if given, runs before the command with its parsed values: raise
        :class:`parity.errors.UsageError` to refuse a combination (e.g. ``--save-tactics`` without ``--trt``).
    """


@hookspec
def parity_describe_commands(register):
    """Describe CLI commands and command groups cheaply: name, one-line help and where the command lives.

    Called by: :func:`parity.plugins.command_table`, when the command tree is first built (every ``parity``
    invocation, ``--help`` included). Nothing is imported: ``parity --help`` and ``parity GROUP --help`` list
    the described help, and the command's module is imported only when the command runs or shows its own
    ``--help``. The preferred way to add commands.

    :param register: ``register(path, target, help, hidden=False)``:

        * ``path``: the command path, ``"lint"`` (top level) or ``"GROUP NAME"`` (``"debug reduce"``).
          Groups: the core's ``inspect``, ``debug``, ``data``, and those plugins declare.
        * ``target``: ``"module:attr"``; ``attr`` is a :class:`click.Command` named like the path's last
          word, or a function without arguments that returns one (it may read the registry). ``None``
          declares the top-level group ``path`` instead (a plugin's own group, e.g. ``surgeon``); several
          plugins may declare one group, the first declaration's help is shown.
        * ``help``: the one-line help the group's listing shows (the command's ``short_help``).
        * ``hidden``: leave the command out of the listing (old spellings kept working).

        Two plugins describing the same command path is an error naming both.
    """


@hookspec
def parity_register_commands(cli):
    """Add CLI commands by building them (eager: prefer :func:`parity_describe_commands`).

    Called by: :func:`parity.cli.build_cli`, each time it builds a command tree (once per ``parity``
    invocation, ``--help`` included), after the described commands are in place and before argument parsing.
    Add top-level commands with ``@cli.command()``; add sub-commands to a group with
    :func:`parity.commands.group(cli, "inspect")` (the core's ``inspect``, ``debug``, ``data``, and groups plugins
    declare with ``parity_describe_commands``, e.g. ``surgeon``, ``check``). Everything this imports is
    imported on every start: import heavy libraries inside the command function. A command added here
    replaces a described one of the same name.

    :param cli: the root :class:`click.Group`.
    """


@hookspec
def parity_divergence_hint(report, output):
    """A command line that cuts the first divergent node of a layerwise comparison out as a model of its own,
    so the user can reproduce the divergence on that node alone (the surgeon plugin returns its
    ``parity surgeon extract ...`` line). Return ``None`` when you cannot.

    Called by: :meth:`parity.api.DivergenceReport.extract_command`, when a layerwise report is printed
    (``Extract it: ...``) or written (``extract_command`` in ``--report``), and only when its first divergent
    tensor has a producing node in an ONNX model. The first implementation that returns a line wins.

    :param report: the :class:`parity.api.DivergenceReport`: ``report.model`` (the ONNX path),
        ``report.first`` (the first divergent :class:`parity.api.TensorError`: ``name``, ``node``, ``op_type``)
        and ``report.outside_inputs()`` (the node's inputs that are not weights or constants).
    :param output: the path to write the cut-out model to, or ``None`` for a name of your choosing.
    """


@hookspec
def parity_node_origins(nodes):
    """Where the nodes of an ONNX model came from, in the words of the tool that made it: a layerwise report shows
    the first divergent node's origin beside its name (the torch plugin reads the PyTorch module that
    torch.onnx's exporter records in each node's ``metadata_props``). Return ``{node name: origin}`` for the
    nodes you recognise (``"PyTorch module 'layer1.0.conv2' (Conv2d)"``), or ``None``.

    Called by: :meth:`parity.api.GraphInfo.from_onnx`, once per model it reads, and only when some node of the
    main graph carries ``metadata_props``. Every implementation is called; for a node several name, the first
    answer wins.

    :param nodes: ``{node name: {metadata key: value}}`` of the main graph's nodes that carry ``metadata_props``
        (a node without a name is keyed ``<op_type>_<index>``, as the report names it).
    """


@hookspec
def parity_watch_run(options, reporter):
    """Watch a comparison run (``parity run``, :func:`parity.run_comparison`): return a
    :class:`parity.api.RunWatcher` when the run's options ask for you, else ``None``. This is how a report is
    added to runs: the parity-reports plugin draws the heatmaps and writes the HTML report and Model Explorer's
    node data through it, any other plugin may do the same. The options a watcher reads are the plugin's own,
    added to ``run`` with :func:`parity_register_options` (an option with no owner: it takes effect whenever
    the run runs).

    Called by: :func:`parity.run_engine.run_comparison`, once per run, through :func:`parity.api.call_hook` (a
    failing implementation is reported and skipped), before any work: after the core has refused the run's
    files that would overwrite its inputs and checked its own output paths. Check your output paths here
    (:func:`parity.api.check_output_path`); raise :class:`parity.api.UsageError` to refuse. The watcher is
    then told, in order, ``check()``, ``check_model(model, kind)``, ``on_compared(index, pair, actual,
    reference)`` after each iteration of each compared pair, ``on_finished(run)`` before the summary is shown
    and ``on_reported(run)`` after it and the ``--report`` file (:class:`parity.api.RunWatcher`).

    :param options: the run's option values keyed by parameter name (``save_report_html``, ``atol``...), as
        the CLI parses them or as :class:`parity.RunRequest` gives them; options not given are ``None``,
        absent or empty.
    :param reporter: the run's reporter (:class:`parity.api.RunReporter`): ``warning(message)``,
        ``note(message)``, ``progress(task, done, total, status)``.
    """


@hookspec(historic=True)
def parity_add_hookspecs(add):
    """Declare hooks of your own, for other plugins to implement (the TensorRT plugin declares
    ``parity_trt_build_extension`` this way).

    Called by: pluggy, as your plugin is registered (a historic hook: a plugin loaded later gets the call too),
    before any hook is called, so the hooks exist for every plugin, whichever loads first. Call the hooks you
    declare with :func:`parity.api.call_hook`: each implementation is called on its own and isolated like
    every other hook's (a failing one is reported, one line, and skipped; ``parity plugins`` lists it).

    :param add: ``add(specs)``, pluggy's ``PluginManager.add_hookspecs``: ``specs`` is a module or class whose
        functions are marked with :data:`parity.hookspecs.hookspec`; name them after your plugin
        (``parity_<plugin>_<what>``). Implementations of a hook from a plugin that may be absent use
        ``@hookimpl(optionalhook=True)``.
    """
