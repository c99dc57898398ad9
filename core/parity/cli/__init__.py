"""The ``parity`` command line.

Built-in commands live in small modules here; plugins add theirs through ``parity_register_commands``.
Nothing heavy is imported while the command tree is built, so ``parity --help`` stays fast: onnx,
onnxruntime and tensorrt are imported by the code that needs them, when it runs.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
from typing import TYPE_CHECKING, Any

from parity import __version__

if TYPE_CHECKING:  # pragma: no cover
    import click

# click, pluggy and the plugins are imported by the functions that need them: a cached ``--help`` (below)
# answers without any of them.

BUILTIN_GROUPS = {
    "inspect": "Show models, saved data and other files.",
    "debug": "Find what makes a model fail: reduce, precision, repeat, build.",
    "surgeon": "Edit ONNX models: sanitize, extract, insert.",
    "check": "Check models for problems.",
    "data": "Work with saved input and output files.",
}
BUILTIN_COMMANDS = ("parity.cli.run", "parity.cli.convert", "parity.cli.inspect", "parity.cli.data", "parity.cli.plugins_cmd", "parity.debug.cli")


def group(cli: click.Group, name: str) -> click.Group:
    """The built-in sub-group ``name`` of ``cli`` (``inspect``, ``debug``, ...), for plugins to add to."""
    import click

    found = cli.commands.get(name)
    if not isinstance(found, click.Group):
        raise KeyError(f"no command group '{name}' (groups: {', '.join(BUILTIN_GROUPS)})")
    return found


def build_cli() -> click.Group:
    """The full command tree: built-ins, then every plugin's commands."""
    import click

    from parity import plugins
    from parity.cli.parsing import ParityGroup

    @click.group(cls=ParityGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
    @click.version_option(__version__, "--version", prog_name="parity")
    @click.option("--plugin", "plugin_files", multiple=True, metavar="FILE.py", help="Load a one-off plugin module (repeatable; also PARITY_PLUGINS).")
    def cli(plugin_files: tuple[str, ...]) -> None:  # noqa: ARG001 - pre-scanned in main()
        """Parity: run, compare and debug deep-learning models across inference backends.

        Exit codes: 0 passed, 1 accuracy mismatch, 2 usage error, 3 model or backend failure.
        """

    for name, help_text in BUILTIN_GROUPS.items():
        cli.add_command(ParityGroup(name=name, help=help_text, short_help=help_text))
    for module in BUILTIN_COMMANDS:
        importlib.import_module(module).add_to(cli)
    plugins.register_commands(cli)
    attach_plugin_options(cli)
    return cli


def attach_plugin_options(cli: Any) -> None:
    """Options registered through ``parity_register_options`` join the commands they name."""
    import click

    from parity import plugins
    from parity.errors import PluginError

    for spec in plugins.get_registry().command_options.values():
        for path in spec.commands:
            command = cli
            for part in path.split():
                command = command.commands.get(part) if isinstance(command, click.Group) else None
            if command is None:
                continue  # the command's plugin is not installed: nothing to extend
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
    from parity import plugins
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
    args = list(sys.argv[1:] if argv is None else argv)
    # Only console runs use the help cache: in-process callers (tests) may patch plugin discovery.
    cache = _HelpCache(args) if argv is None and _HelpCache.eligible(args) else None
    if cache is not None and cache.show():
        sys.exit(0)
    from parity.cli.common import install_warning_printer, run_guarded

    install_warning_printer()

    def invoke() -> Any:
        rest = _prescan(args)  # first: one-off plugins must be loaded before their options and commands are built
        cli = build_cli()
        return cli.main(args=rest, prog_name="parity", standalone_mode=False)

    code = cache.record(lambda: run_guarded(invoke)) if cache is not None else run_guarded(invoke)
    if argv is None:
        sys.exit(code)
    return code


class _HelpCache:
    """``parity [COMMAND...] --help`` and ``--version`` text, cached so that they need no click, plugin
    discovery or plugin imports (measured: ``parity --help`` 0.15 s -> 0.06 s, Python alone 0.05 s).

    An entry is used only if everything that could change the text is unchanged: Parity's version, the
    interpreter, ``sys.path``, the terminal width, every ``PARITY_*`` variable, the modification times of
    the ``sys.path`` folders (installing or removing a distribution touches them) and of every non-stdlib
    module file imported while building the help (core, plugins, click). Runs that warned (a broken plugin)
    are never cached, so the warning is printed every time. ``PARITY_NO_CACHE=1`` turns the cache off.
    """

    def __init__(self, args: list[str]) -> None:
        self.args = args
        root = os.environ.get("PARITY_CACHE_DIR") or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "parity")
        name = "_".join(a.lstrip("-") for a in args)  # eligible() allows only words and --help/-h/--version
        self.path = os.path.join(root, f"parity_{name}_{self.columns()}.bin")
        env = sorted((k, v) for k, v in os.environ.items() if k.startswith("PARITY_") or k in ("TERM", "NO_COLOR", "FORCE_COLOR"))
        self.key = (__version__, sys.prefix, sys.version, tuple(sys.path), tuple(args), self.columns(), env)

    @staticmethod
    def eligible(args: list[str]) -> bool:
        if os.environ.get("PARITY_NO_CACHE", "") not in ("", "0") or os.environ.get("PARITY_PLUGINS"):
            return False
        if args == ["--version"]:
            return True
        return bool(args) and args[-1] in ("--help", "-h") and all(a.replace("-", "").isalnum() and a[:1].isalpha() for a in args[:-1])

    @staticmethod
    def columns() -> int:
        """What click's help formatter sizes itself by (``shutil.get_terminal_size``, without importing shutil)."""
        try:
            if int(os.environ.get("COLUMNS", "0")) > 0:
                return int(os.environ["COLUMNS"])
        except ValueError:
            pass
        try:
            return os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            return 0

    def show(self) -> bool:
        import marshal

        try:
            with open(self.path, "rb") as fh:
                entry = marshal.load(fh)
            if entry["key"] != self.key or any(_stamp(path) != stamp for path, stamp in entry["stamps"]):
                return False
        except Exception:  # missing, unreadable or from another Python: rebuild
            return False
        _write(sys.stdout, entry["out"])
        return True

    def record(self, run: Any) -> int:
        """Run the real command with its output captured; store it if it succeeded without a word on stderr."""
        import contextlib
        import io

        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = run()
        _write(sys.stdout, out.getvalue())
        _write(sys.stderr, err.getvalue())
        if code == 0 and not err.getvalue() and out.getvalue():
            with contextlib.suppress(Exception):
                self._store(out.getvalue())
        return code

    def _store(self, text: str) -> None:
        import marshal

        stdlib = os.path.dirname(os.__file__)
        files = {getattr(m, "__file__", None) for m in list(sys.modules.values())}
        files = {f for f in files if f and not (f.startswith(stdlib) and "-packages" not in f)}
        paths = sorted(files | {p for p in sys.path if p})
        entry = {"key": self.key, "stamps": [(p, _stamp(p)) for p in paths], "out": text}
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        tmp = f"{self.path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as fh:
            marshal.dump(entry, fh)
        os.replace(tmp, self.path)


def _write(stream: Any, text: str) -> None:
    try:
        stream.write(text)
        stream.flush()
    except BrokenPipeError:  # ``parity --help | head``
        pass


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def __getattr__(name: str) -> Any:
    if name == "cli":  # ``from parity.cli import cli`` for click's CliRunner
        return build_cli()
    raise AttributeError(name)
