"""``parity run --gen-script FILE``: the Python script that does what the command would (Polygraphy's
``--gen-script``), on Parity's public API: the command's :class:`parity.RunRequest`, written out as Python, given
to :func:`parity.run_comparison`. The script prints each comparison's verdict and exits with the command's code
(0 passed, 1 mismatch, 2 usage, 3 model or backend failure)."""

from __future__ import annotations

import ast
import os
import pprint
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from parity import plugins
from parity.errors import UsageError
from parity.plugins import get_registry
from parity.util.fs import atomic_write, refuse_overwrite

if TYPE_CHECKING:  # pragma: no cover
    from parity.run_engine import RunRequest

_BODY = '''

def main() -> int:
    try:
        outcome = run_comparison(REQUEST)
    except ParityError as exc:  # one line and the exit code, as the command prints them
        print(f"parity: error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}", file=sys.stderr)
        return int(exc.exit_code)
    for pair in outcome.summary.accuracy:
        print(f"{pair.actual} vs {pair.reference}: {'PASSED' if pair.passed else 'FAILED'}")
    for issue in outcome.summary.validation:
        print(f"{issue.runner}: {issue.output} holds {issue.nan} NaN and {issue.inf} Inf (iteration {issue.iteration})")
    print("PASSED" if outcome.passed else "FAILED")
    return int(outcome.code)


if __name__ == "__main__":
    sys.exit(main())
'''


def _named(prefix: str, value: Any, what: str, flag: str) -> str:
    """``prefix`` then ``value`` as Python, its continuation lines aligned under the value's first character."""
    lines = _literal(value, what, flag).splitlines()
    return "\n".join([prefix + lines[0], *(" " * len(prefix) + line for line in lines[1:])])


def _literal(value: Any, what: str, flag: str) -> str:
    """``value`` as Python source that evaluates back to it; anything else is refused (the script must do what
    the command would, so no value is dropped or approximated)."""
    text = pprint.pformat(value, width=100, sort_dicts=False)
    try:
        same = ast.literal_eval(text) == value
    except (ValueError, SyntaxError):
        same = False
    if not same:
        raise UsageError(f"{flag}: cannot write {what} ({type(value).__name__}) as Python; run the command instead")
    return text


def script_for(request: RunRequest, command_line: Sequence[str] = (), flag: str = "--gen-script") -> str:
    """The script's text: ``request`` spelled out (the core's options that differ from their defaults, every
    plugin's options as the command parsed them, the flags messages name) and a ``main`` that runs it."""
    from parity.run_engine import RunRequest  # here: the engine imports this module's caller, not the reverse

    defaults = RunRequest()
    args = [_literal(request.model, "the model path", flag), _literal([(name, dict(settings)) for name, settings in request.runners], "a runner's settings", flag)]
    for f in fields(RunRequest):
        if f.name in ("model", "runners", "plugin_options", "flags"):
            continue
        value = getattr(request, f.name)
        if value != getattr(defaults, f.name):
            args.append(_named(f"{f.name}=", value, request.flag(f.name), flag))
    # every plugin's options as parsed (a plugin reads its own, defaults included), but the backends' that no
    # runner uses: a runner reads only its own backend's (their options given without the backend are refused)
    used = {name for name, _ in request.runners}
    groups = {name: dict(group) for name, group in request.plugin_options.items() if group and (name in used or name not in _backend_names())}
    if groups:
        lines = [_named(f"    {name!r}: ", group, f"an option of {name}", flag) + "," for name, group in groups.items()]
        args.append("plugin_options={\n" + "\n".join(lines) + "\n}")
    # the flags messages name: the core's options and those of the groups written above
    named = {f.name for f in fields(RunRequest)} | {key for group in groups.values() for key in group}
    spelled = {name: text for name, text in request.flags.items() if name in named}
    if spelled:
        args.append(_named("flags=", spelled, "the flags", flag))
    body = ",\n".join(_indent(a) for a in args)
    summary = _summary(request, command_line)
    return f'''#!/usr/bin/env python3
"""{summary}"""

import sys
{_plugin_files()}
from parity import RunRequest, run_comparison
from parity.errors import ParityError

REQUEST = RunRequest(
{body},
)
{_BODY}'''


def _plugin_files() -> str:
    """The lines that load the command's one-off plugin modules (``--plugin``, ``PARITY_PLUGINS``) in the script,
    through the documented ``PARITY_PLUGINS`` (before Parity loads its plugins), or nothing."""
    files = [*(plugins._env_list("PARITY_PLUGINS") or []), *plugins._EXTRA_FILES]
    if not files:
        return ""
    joined = ",".join(dict.fromkeys(os.path.abspath(f) for f in files))
    return f"import os\n\nos.environ[\"PARITY_PLUGINS\"] = {joined!r}  # the command's one-off plugins (--plugin, PARITY_PLUGINS)\n"


def _backend_names() -> set[str]:
    return set(get_registry().backends)


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


def _summary(request: RunRequest, command_line: Sequence[str]) -> str:
    """What the script does, in Polygraphy's words: "This script compares MODEL between A and B."."""
    names = [name for name, _ in request.runners]
    text = ""
    if names:
        joined = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
        text = f"This script {'compares' if len(names) > 1 else 'runs'} {request.model} {'between' if len(names) > 1 else 'using'} {joined}."
    if request.load_outputs:
        text += f"\nIt checks against the outputs stored in {', '.join(request.load_outputs)}."
    if command_line:
        text += f"\nWritten by: {shlex.join(command_line)}"
    return text.strip().replace('"""', "'''").replace("\\", "\\\\")


def write_script(text: str, path: str, flag: str = "--gen-script") -> None:
    """Write the script to ``path`` atomically (``-``: standard output)."""
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    with atomic_write(path, "w") as handle:
        handle.write(text)


def refuse_inputs(path: str, inputs: Mapping[str, Any], flag: str = "--gen-script") -> None:
    """The script never lands on a file the command reads (the model, inputs, golden outputs)."""
    if path != "-":
        refuse_overwrite({k: v for k, v in inputs.items() if v}, **{flag: path})
