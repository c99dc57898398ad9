"""The ``parity`` command line.

The tree is lazy (click's "lazily loading subcommands"): the root group and its sub-groups know every
command's name and one-line help from :data:`CORE_COMMANDS` and from the plugins' ``parity_describe_commands``
hooks, and import a command's module only when that command runs or shows its own ``--help``. So ``parity
--help`` imports click, pluggy, the plugins' hook modules and nothing else: no command module, no numpy,
onnx, onnxruntime or tensorrt. Plugins that add commands through ``parity_register_commands`` still work;
theirs are built eagerly, with the tree.
"""

from __future__ import annotations

import functools
import sys
from typing import TYPE_CHECKING, Any

from parity import __version__, console, plugins
from parity.errors import PluginError

if TYPE_CHECKING:  # pragma: no cover
    import click

# The groups the core fills itself; a plugin declares its own groups (``surgeon``, ``check``) with their help.
CORE_GROUPS = {
    "inspect": "Show models, saved data and other files.",
    "debug": "Find what makes a model fail: shrink it, search for its cause, repeat a check.",
    "data": "Work with saved input and output files.",
}
# (command path, "module:attr" returning the click command, one-line help), as plugins describe theirs.
CORE_COMMANDS = (
    ("run", "parity.cli.run:make_command", "Run a model on backends and compare the outputs."),
    ("convert", "parity.cli.convert:make_command", "Convert a model (ONNX fp16, TensorRT engine, ...)."),
    ("plugins", "parity.cli.plugins_cmd:make_command", "List installed plugins."),
    ("inspect model", "parity.cli.inspect:make_model_command", "Show a model's inputs, outputs and (with --show) layers, attributes and weights."),
    ("inspect data", "parity.cli.inspect:make_data_command", "Show saved inputs or outputs (Parity or Polygraphy files) with statistics per tensor."),
    ("data concat", "parity.cli.data:make_concat_command", "Append the iterations of several input files, or of several output files (runner by runner), into one file."),
    ("data merge", "parity.cli.data:make_merge_command", "Merge input files and single-runner output files into one inputs file, iteration by iteration "
     "(e.g. to feed a subgraph with the tensors a full run produced: use it with --load-inputs)."),
    ("data to-input", "parity.cli.data:make_to_input_command", "Combine input files (--save-inputs) and single-runner output files "
     "(--save-outputs) into one inputs file, iteration by iteration: 'parity data merge' under Polygraphy's name, writing "
     "Polygraphy's JSON unless -o ends in .npz."),
    ("debug repeat", "parity.cli.debug:make_repeat_command", "Run a check repeatedly; sort artifacts."),
)  # fmt: skip


def group(cli: click.Group, name: str) -> click.Group:
    """The sub-group ``name`` of ``cli`` (``inspect``, ``debug``, or a plugin's), for plugins to add to."""
    import click

    found = cli.commands.get(name)
    if not isinstance(found, click.Group):
        groups = sorted(n for n, c in cli.commands.items() if isinstance(c, click.Group))
        raise KeyError(f"no command group '{name}' (groups: {', '.join(groups)})")
    return found


def build_cli() -> click.Group:
    """The command tree: core and described plugin commands by name (imported when used), then the commands
    of plugins that still add theirs with ``parity_register_commands`` (built now)."""
    import click

    from parity.cli.common import verbosity_options
    from parity.cli.lazy import LazyCommand, LazyGroup

    settings = {"help_option_names": ["-h", "--help"], "max_content_width": 110}

    @click.group(cls=LazyGroup, context_settings=settings, on_load=_extend)
    @click.version_option(__version__, "--version", prog_name="parity")
    @click.option("--plugin", "plugin_files", multiple=True, metavar="FILE.py", help="Load a one-off plugin module (repeatable; also PARITY_PLUGINS).")
    @verbosity_options  # before the command too (parity -v run ...), as Polygraphy's users write it
    def cli(plugin_files: tuple[str, ...]) -> None:  # noqa: ARG001 - pre-scanned in main()
        """Parity: run, compare and debug deep-learning models across inference backends.

        Exit codes: 0 passed, 1 accuracy mismatch, 2 usage error, 3 model or backend failure.
        """

    table = plugins.command_table()
    groups = {**{name: (text, "parity") for name, text in CORE_GROUPS.items()}, **table.groups}
    for name, (text, _owner) in groups.items():
        # Polygraphy's logging flags between a tool and its subtool (parity surgeon -v sanitize), shown by --help
        cli.add_command(verbosity_options(LazyGroup(name=name, help=text, short_help=text, path=name, on_load=_extend)))
    for path, target, text in CORE_COMMANDS:
        _place(cli, LazyCommand(path, target, text))
    for entry in table.commands:
        _place(cli, LazyCommand(*entry))
    plugins.register_commands(cli)
    return cli


def _place(cli: Any, spec: Any) -> None:
    *parents, _name = spec.path.split()
    target = cli
    for part in parents:
        target = target.commands.get(part)
        if target is None or not hasattr(target, "add_lazy"):
            raise PluginError(f"{spec.owner} describes 'parity {spec.path}', but no plugin declares the group '{part}'")
    target.add_lazy(spec)


def _extend(path: str, command: Any) -> None:
    """Options registered through ``parity_register_options`` for ``path`` join ``command`` (when it loads)."""
    for spec in plugins.get_registry().command_options.values():
        if path not in spec.commands:
            continue
        taken = {o for p in command.params for o in getattr(p, "opts", [])}
        clash = taken & {o for option in spec.options for o in option.opts}
        if clash:
            raise PluginError(f"options {sorted(clash)} of '{spec.name}' already exist on 'parity {path}'")
        command.params.extend(spec.options)
        if spec.validate is not None:
            command.callback = _validated(command.callback, spec.validate, path)


def _validated(callback: Any, validate: Any, path: str) -> Any:
    """``callback``, preceded by a plugin's ``validate(command path, params, ctx)``."""

    @functools.wraps(callback)
    def wrapped(*args: Any, **params: Any) -> Any:
        import click

        validate(path, params, click.get_current_context())
        return callback(*args, **params)

    return wrapped


def _prescan(argv: list[str]) -> list[str]:
    """``--plugin`` must load before the command tree is built (a plugin may add commands or options)."""
    from parity.cli.common import SETTINGS

    files, rest, i = [], [], 0
    while i < len(argv):
        token = argv[i]
        if token == "--plugin" and i + 1 < len(argv):
            files.append(argv[i + 1])
            i += 2
            continue
        if token.startswith("--plugin="):
            files.append(token.split("=", 1)[1])
        elif token in ("-v", "--verbose"):
            SETTINGS["verbose"] = True
            rest.append(token)
        elif token in ("--check",):
            rest.extend(argv[i:])  # the check command's own flags are not ours
            break
        else:
            rest.append(token)
        i += 1
    if files:
        plugins.add_plugin_files(files)
    return rest


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns the exit code (and exits with it when run as ``parity``)."""
    from parity.cli.common import install_warning_printer, run_guarded

    args = list(sys.argv[1:] if argv is None else argv)
    install_warning_printer()
    _print_any_path()

    def invoke() -> Any:
        rest = _prescan(args)  # first: one-off plugins must be loaded before their options and commands are built
        cli = build_cli()
        return cli.main(args=rest, prog_name="parity", standalone_mode=False)

    console._command.append(["parity", *args])
    mark = console.log_mark()
    try:
        code = run_guarded(invoke)
    finally:
        console.close_logs(mark)  # --log-file/--log-format end with the command, also when parsing failed
        console._command.pop()  # an in-process `parity run` (a debug check) gives the outer command back
    if argv is None:
        sys.exit(code)
    return code


def _print_any_path() -> None:
    """A path that is not UTF-8 (a file name with byte \\xff) reaches Python surrogate-escaped: a strict stdout
    would fail to print it (UnicodeEncodeError, exit 3, after the work was done), so it prints the name's own
    bytes, as ls does."""
    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="surrogateescape")
            except (ValueError, OSError, AttributeError):  # a stream that cannot change (closed, wrapped): printed as it is
                pass


def __getattr__(name: str) -> Any:
    if name == "cli":  # ``from parity.cli import cli`` for click's CliRunner
        return build_cli()
    raise AttributeError(name)
