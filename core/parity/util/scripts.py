"""Users' Python files named on the command line (``file.py[:function]``): one loader for every option that takes
one (``--data-loader-script``, TensorRT's ``--trt-network-func`` and post-process scripts, ...)."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from parity.errors import UsageError, missing_dependency
from parity.util.text import did_you_mean


def split_script_spec(spec: str, default_func: str, option: str) -> tuple[str, str]:
    """``'file.py:func'`` -> ``('file.py', 'func')``; a bare path (a Windows drive's colon included) takes
    ``default_func``."""
    path, sep, func = spec.rpartition(":")
    if not sep or "/" in func or "\\" in func or func.endswith(".py"):
        return spec, default_func
    if not path:
        raise UsageError(f"{option}: cannot read '{spec}'; write file.py[:function]")
    return path, func or default_func


@contextlib.contextmanager
def no_bytecode() -> Iterator[None]:
    """Importing the user's files writes no ``__pycache__`` beside them (nor beside the helper modules they import):
    Parity leaves nothing in folders it was not asked to write to."""
    before = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        yield
    finally:
        sys.dont_write_bytecode = before


def load_user_function(
    spec: str, default_func: str, option: str, missing: Mapping[str, str] | None = None
) -> Callable[..., Any]:
    """Import the file of ``spec`` (``file.py[:func]``) and return its function: ``func``, else ``default_func``.

    Every failure is one line naming ``option`` and the file: no such file or function is a usage error (exit 2),
    and so is an exception while the file runs. An import of a module named in ``missing`` (module -> install
    hint) that is not installed is that module's missing-dependency error (exit 3), as the backend itself would
    report it: a script written for TensorRT on a machine without TensorRT says so, not that the script is bad."""
    path, func = split_script_spec(spec, default_func, option)
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"{option}: no such file '{path}'")
    mod_spec = importlib.util.spec_from_file_location(f"parity_user_{file.stem}", file)
    if mod_spec is None or mod_spec.loader is None:
        raise UsageError(f"{option}: {path} is not a Python file")
    module = importlib.util.module_from_spec(mod_spec)
    folder = str(file.parent.resolve())
    sys.path.insert(0, folder)  # the script's own helper modules import as they would when it runs as a script
    try:
        with no_bytecode():
            mod_spec.loader.exec_module(module)
    except ModuleNotFoundError as exc:
        root = (exc.name or "").partition(".")[0]
        if missing and root in missing:
            raise missing_dependency(root, missing[root]) from exc
        raise UsageError(f"{option}: {path} failed to import: {type(exc).__name__}: {exc}") from exc
    except Exception as exc:
        raise UsageError(f"{option}: {path} failed to import: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.path.remove(folder)
    obj = getattr(module, func, None)
    if not callable(obj):
        names = [n for n in dir(module) if not n.startswith("_")]
        raise UsageError(f"{option}: {path} has no function '{func}'{did_you_mean(func, names)}")
    return obj
