"""Console output and the error boundary shared by every command."""

from __future__ import annotations

import os
import re
import traceback
import warnings
from collections.abc import Callable
from typing import Any

import click

from parity import console
from parity.console import SETTINGS, echo
from parity.errors import ExitCode, ParityError, UsageError
from parity.util.text import first_line, warn

__all__ = ["SETTINGS", "echo", "install_warning_printer", "run_guarded", "verbosity_options", "warn"]


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ARG001
    warn(str(message))


def install_warning_printer() -> None:
    warnings.showwarning = _show_warning
    warnings.simplefilter("default")


def verbosity_options(func: Callable) -> Callable:
    """``-v/--verbose`` (tracebacks, more detail), ``-q/--quiet`` and Polygraphy's other logging flags
    (``--silent``, ``--verbosity``, ``--log-file``, ``--log-format``) on every command and group."""

    def set_verbose(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
        if value:
            SETTINGS[param.name] = True  # type: ignore[index]
        return value

    func = click.option("-q", "--quiet", is_flag=True, expose_value=False, callback=set_verbose, help="Print only the verdict.")(func)
    func = click.option("-v", "--verbose", is_flag=True, expose_value=False, callback=set_verbose, help="More detail; tracebacks on errors.")(func)
    func = click.option("--silent", is_flag=True, expose_value=False, callback=set_silent, help="Polygraphy's spelling of -q.")(func)
    loudness = "Polygraphy's levels: verbose and above are -v; warning, error and critical are -q."
    func = click.option("--verbosity", metavar="LEVEL", expose_value=False, callback=set_verbosity, help=loudness)(func)
    log_format = click.Option(
        ["--log-format"], multiple=True, type=click.Choice(console.LOG_FORMATS), expose_value=False, callback=set_log_format,
        help="Prefix each printed line with the time (timestamp) or the file and line that printed it (line-info); no-colors: no colours.",
    )  # fmt: skip
    log_format.greedy = True  # type: ignore[attr-defined] # values space-separated after one flag, as parsing.GreedyOption's
    func = click.option(
        "--log-file", metavar="FILE", type=click.Path(dir_okay=False), expose_value=False, callback=set_log_file,
        help="Also write every line printed (stdout and stderr) to FILE, as it is printed.",
    )(func)  # fmt: skip
    if isinstance(func, click.Command):
        func.params.append(log_format)
    else:  # as click.option does: click reverses the decorators' list when it builds the command
        func.__dict__.setdefault("__click_params__", []).append(log_format)
    return func


def set_log_format(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    if value:
        mark = console.log_mark()
        console.set_log_format(value)
        ctx.call_on_close(lambda: console.close_logs(mark))
    return value


def set_log_file(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--log-file FILE``: refused when FILE is also a file the command reads or writes (it would be truncated)."""
    if value:
        _refuse_log_on_argument(value)
        mark = console.log_mark()
        try:
            console.open_log_file(value)
        except OSError as exc:
            raise click.BadParameter(f"cannot write '{value}': {exc.strerror or exc}", ctx, param) from None
        ctx.call_on_close(lambda: console.close_logs(mark))
    return value


def _refuse_log_on_argument(path: str) -> None:
    if not os.path.exists(path):
        return
    seen = 0
    for token in console.command_line()[1:]:
        candidate = token.partition("=")[2] if token.startswith("-") and "=" in token else token
        try:
            seen += bool(candidate) and os.path.exists(candidate) and os.path.samefile(candidate, path)
        except OSError:
            continue
    if seen > 1:  # once as the --log-file value itself
        raise UsageError(f"--log-file {path}: that file is also an argument of this command; write the log elsewhere")


def set_silent(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    if value:
        SETTINGS["quiet"] = True
    return value


# Polygraphy's --verbosity levels, most to least verbose, and Parity's two switches
_LOUD = ("ultra_verbose", "super_verbose", "extra_verbose", "verbose")
_QUIET = ("warning", "error", "critical")


def set_verbosity(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--verbosity LEVEL`` (or Polygraphy's per-path ``path:LEVEL``; the last level given counts)."""
    if value:
        level = value.rpartition(":")[2].strip().lower()
        if level in _LOUD:
            SETTINGS["verbose"] = True
        elif level in _QUIET:
            SETTINGS["quiet"] = True
        elif level != "info":
            raise click.BadParameter(f"'{value}': levels are {', '.join([*_LOUD, 'info', *_QUIET])}", ctx, param)
    return value


def usage_message(exc: click.UsageError) -> str:
    """click's complaint on one line. An option or command that a first-party plugin adds, in an install
    without that plugin, names the distribution to install instead (``--trt is provided by parity-trt: ...``)."""
    from parity import distributions  # here: only this error path reads the catalogue

    message = " ".join(exc.format_message().split())
    command = exc.ctx.command_path if exc.ctx else "parity"
    if isinstance(exc, click.MissingParameter) and exc.param is not None:  # what is missing, and where to read about it
        what = (exc.param.name or "argument").upper() if exc.param.param_type_name == "argument" else "/".join(exc.param.opts)
        return f"missing {what}; see '{command} --help'"
    if isinstance(exc, click.NoSuchOption):
        member, what = distributions.provider(option=exc.option_name), exc.option_name
    else:
        unknown = re.match(r"No such command '([^']+)'", message)
        path = " ".join([*command.split()[1:], unknown.group(1)]) if unknown else ""
        member, what = (distributions.provider(command=path) if path else None), f"'parity {path}'"
    if member is not None:
        return f"{what} is provided by {member.distribution}: {member.remedy()}"
    return f"{message} (see '{command} --help')"


def run_guarded(func: Callable[[], Any]) -> int:
    """Turn every failure into one line and an exit code (tracebacks with --verbose)."""
    try:
        result = func()
        return int(result or 0)
    except ParityError as exc:
        if SETTINGS["verbose"]:
            traceback.print_exc()
        click.echo(f"parity: error: {first_line(exc)}", err=True)
        return int(exc.exit_code)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.UsageError as exc:  # a bad option, value or command: one line (not click's usage block), exit 2
        click.echo(f"parity: error: {usage_message(exc)}", err=True)
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.Abort:
        click.echo("parity: aborted", err=True)
        return int(ExitCode.INTERRUPTED)
    except KeyboardInterrupt:
        click.echo("parity: interrupted", err=True)
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        return 0
    except Exception as exc:  # an unexpected failure still gets one line
        if SETTINGS["verbose"]:
            traceback.print_exc()
        click.echo(f"parity: error: {type(exc).__name__}: {first_line(exc)} (run with --verbose for the traceback)", err=True)
        return int(ExitCode.FAILURE)
