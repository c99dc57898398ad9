"""Debug replays (``--save-debug-replay`` / ``--load-debug-replay``): the verdicts of a run, kept after it ends.

Parity's state file (``--state``) resumes an interrupted run and is deleted when the run completes; a replay is
the same verdicts kept on purpose, to run the command again without re-running the checks it already judged
(Polygraphy's use: skip an iteration that crashed by editing its verdict). A replay file is JSON::

    {"format": "parity-debug-replay", "version": 1, "command": "reduce", "input": "<sha1>",
     "reference": ["exit", 1, null], "verdicts": {"<key>": true | false | "unresolved"}}

``true`` is bad, ``false`` good (as in the state file). ``input`` identifies what the command searched (the model;
for ``debug repeat`` nothing): a replay of another command or model is refused, as its keys mean other candidates.
While a check runs, ``<name>_skip_current<ext>`` holds the replay with the checks in flight marked unresolved
(Polygraphy marks them failed): loading it after a crash skips the check that crashed, taking no step on it.

Polygraphy's replay files (``{"_N0": {"success": true, "iteration_info": {...}, "polygraphy_class":
"IterationContext"}, ...}``) load into ``debug repeat`` and ``debug build``, whose iteration N is Polygraphy's
``_N<N>`` (``success`` false: bad). Polygraphy's ``debug reduce``/``precision`` replays record the steps of
Polygraphy's own search, which Parity's search does not take: they are refused in one line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from parity.debug.check import BAD, GOOD, UNRESOLVED
from parity.errors import UsageError
from parity.util.fs import write_text_atomic

REPLAY_FORMAT = "parity-debug-replay"
# the commands whose iterations are numbered as Polygraphy numbers them (key N<i> is Polygraphy's _N<i>)
NUMBERED = ("repeat", "build")
_POLYGRAPHY_KEY = re.compile(r"_N(\d+)")


@dataclass
class Replay:
    verdicts: dict[str, str]  # key -> good / bad / unresolved
    reference: tuple | None = None  # the original failure's signature, when the run had one


def skip_current_path(path: str | Path) -> Path:
    """Polygraphy's name for the replay written before a check ends: ``replay.json`` -> ``replay_skip_current.json``."""
    p = Path(path)
    return p.with_name(f"{p.stem}_skip_current{p.suffix}")


def _is_polygraphy_replay(data: Any) -> bool:
    return isinstance(data, dict) and all(isinstance(v, dict) and v.get("polygraphy_class") == "IterationContext" for v in data.values())


def is_replay_file(path: Path) -> bool:
    """A replay Parity or Polygraphy wrote (what --save-debug-replay may overwrite)."""
    try:
        if path.stat().st_size > 256 << 20:
            return False
        data = json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    return (isinstance(data, dict) and data.get("format") == REPLAY_FORMAT) or (bool(data) and _is_polygraphy_replay(data))


def _decode(value: Any) -> str:
    return BAD if value is True else GOOD if value is False else UNRESOLVED


def read_replay(path: str, command: str, input_id: str) -> Replay:
    """The verdicts of replay file ``path`` for ``debug <command>`` on the input ``input_id`` identifies; a file
    that is not a replay, or one of another command or input, is refused in one line (:class:`UsageError`)."""
    option = f"--load-debug-replay {path}"
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(f"{option}: no such file") from None
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"{option}: not a debug replay (cannot read it as JSON: {exc})") from None
    if isinstance(data, dict) and data.get("format") == REPLAY_FORMAT:
        if data.get("command") != command:
            raise UsageError(f"{option}: a replay of 'debug {data.get('command')}', not of 'debug {command}'")
        if data.get("input") != input_id:
            raise UsageError(f"{option}: saved for another model or input; its verdicts are of other candidates")
        verdicts = data.get("verdicts")
        if not isinstance(verdicts, dict):
            raise UsageError(f"{option}: malformed replay (no 'verdicts' object)")
        reference = data.get("reference")
        return Replay({str(k): _decode(v) for k, v in verdicts.items()}, tuple(reference) if isinstance(reference, list) else None)
    if isinstance(data, dict) and data and _is_polygraphy_replay(data):
        return _from_polygraphy(data, command, option)
    raise UsageError(f"{option}: not a debug replay (Parity's or Polygraphy's)")


def _from_polygraphy(data: dict[str, Any], command: str, option: str) -> Replay:
    numbers = {key: _POLYGRAPHY_KEY.fullmatch(key) for key in data}
    if command not in NUMBERED or not all(numbers.values()):
        raise UsageError(
            f"{option}: a Polygraphy replay of its own search steps, which 'parity debug {command}' does not take; "
            f"save one with 'parity debug {command} --save-debug-replay' (Polygraphy replays load into debug repeat and debug build)"
        )
    verdicts = {}
    for key, match in numbers.items():
        assert match is not None
        verdicts[f"N{int(match.group(1))}"] = GOOD if data[key].get("success") else BAD
    return Replay(verdicts)


def write_replay(path: str | Path, command: str, input_id: str, verdicts: Mapping[str, str], reference: tuple | None) -> None:
    """Write (atomically) the replay of ``verdicts`` (key -> good / bad / unresolved)."""
    encoded = {k: {BAD: True, GOOD: False}.get(v, UNRESOLVED) for k, v in verdicts.items()}
    replay = {
        "format": REPLAY_FORMAT,
        "version": 1,
        "command": command,
        "input": input_id,
        "reference": list(reference) if reference else None,
        "verdicts": encoded,
    }
    write_text_atomic(path, json.dumps(replay, indent=1) + "\n")


def check_replay_target(path: str) -> None:
    """--save-debug-replay (and its _skip_current file) may replace only a replay: anything else existing there
    (a model, a config) is refused before any work, never overwritten."""
    for target in (Path(path), skip_current_path(path)):
        if target.is_dir() or (target.exists() and not is_replay_file(target)):
            raise UsageError(f"--save-debug-replay {path}: {target} exists and is not a debug replay; choose another path")
