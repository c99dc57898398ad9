"""A standalone repro bundle: one folder to attach to a bug report.

    <dir>/model.onnx       the minimal failing model
    <dir>/inputs.npz       the inputs that trigger the failure (one entry per sample; Parity's input format)
    <dir>/expected.npz     what its outputs were in the full model (reference run; Parity's results format)
    <dir>/check.sh         the exact check command, pointed at the files above
    <dir>/README.md        what was reduced, the node list, how to run it, every file copied in

Safety: the folder is never replaced and nothing in it is overwritten. An existing non-empty ``<dir>`` is
refused by the command (:func:`check_target`, called before the search so no check is wasted); a new one is
built beside its place and renamed into it (complete or absent); an existing one is filled file by file,
replacing nothing (a clash leaves it as it was).

The bundle copies only what the check needs and the user gave Parity as such: the check's own script
(``check.py`` in ``--check python check.py ...``) and the user's ``--load-inputs`` files named in the check.
The iteration's files (``parity_debug.onnx``, ``parity_debug_inputs.npz``) are the bundle's ``model.onnx`` and
``inputs.npz``. Any other file the check names (a token file, a config, golden outputs of the full model) is
not copied: ``check.sh`` refers to it where it is, and the README lists it.

Weights: a model with external data is written with its own weights inside when they are small (up to
64 MiB: the bundle stands alone). Larger ones are never copied: ``model.onnx`` refers to the original data
file, which the bundle holds as a reflink clone (no byte copied) where the filesystem has them; elsewhere the
README names the original file and how to put it beside the model. Never a hard link: onnx refuses a data
file with two links, and the bundle would keep one on the user's file for good.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import stat
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx

from parity.api import UsageError, onnx_external, part_path, same_file, save_model, write_bytes_atomic, write_text_atomic
from parity_reduce.external import clone_file

MAX_COPY = 64 << 20
SCRIPT_SUFFIXES = {".py", ".sh", ".bash"}
INTERPRETERS = {"python", "python3", "sh", "bash", "dash", "zsh"}
ITERATION_FILES = ("polygraphy_debug.onnx",)  # Polygraphy's name for the iteration's model, as the checks use it


def check_target(directory: str | Path, option: str = "--repro") -> Path:
    """The bundle's folder, refused (exit 2) if something non-empty is there: Parity never replaces a folder."""
    target = Path(directory)
    if target.is_symlink() or target.exists():
        if not target.is_dir():
            raise UsageError(f"{option} {directory}: a file of that name exists; choose a new folder (or --no-repro)")
        if any(target.iterdir()):
            raise UsageError(
                f"{option} {directory}: the folder exists and is not empty; Parity never replaces a folder: "
                "choose a new or empty folder (or --no-repro)"
            )
    return target


class _Copies:
    """Files of the check copied into the bundle: name in the bundle -> (source, why)."""

    def __init__(self, folder: Path, load_inputs: Sequence[str]) -> None:
        self.folder = folder
        self.load_inputs = [p for p in load_inputs if Path(p).is_file()]
        self.copied: dict[str, tuple[Path, str]] = {}
        self.outside: list[tuple[str, str]] = []  # (path as check.sh names it, why it was not copied)

    def _is_load_input(self, path: Path) -> bool:
        return any(same_file(path, p) for p in self.load_inputs)

    def token(self, command: Sequence[str], k: int, value: str) -> str:
        """``value`` (a check argument, or the path in ``--opt=path``) as check.sh should name it."""
        path = Path(value)
        try:
            is_file = path.is_file()
        except OSError:
            return value
        if not is_file:
            return value
        if self._is_load_input(path):
            why = "your --load-inputs data"
        elif path.suffix in SCRIPT_SUFFIXES and k == _script_index(command):
            why = "the check's script"
        else:
            return self._outside(path, "named in the check; not copied")
        size = path.stat().st_size
        if size > MAX_COPY:
            return self._outside(path, f"{why}, {size >> 20} MiB; too large to copy")
        for name, (src, _) in self.copied.items():
            if src.resolve() == path.resolve():
                return name
        name = _free_name(path.name, self.copied)
        shutil.copyfile(path, self.folder / name)  # the content only; the file gets the umask's mode
        if os.access(path, os.X_OK):
            _make_executable(self.folder / name)
        self.copied[name] = (path.resolve(), why)
        return name

    def _outside(self, path: Path, why: str) -> str:
        named = str(path if path.is_absolute() else path.resolve())  # check.sh runs in the bundle's folder
        if (named, why) not in self.outside:
            self.outside.append((named, why))
        return named


def _interpreter(program: str) -> bool:
    return Path(program).name in INTERPRETERS or _python(program)


def _python(program: str) -> bool:
    name = Path(program).name
    return program == sys.executable or name == "python" or (name.startswith("python") and name[6:].replace(".", "").isdigit())


# interpreter options whose value is the next argument (unless attached, as in -Xdev): Python's -W and -X, a shell's -o
# and -O; and those after which a command or module follows instead of a script (-c, Python's -m)
_PYTHON_VALUE_LETTERS, _SHELL_VALUE_LETTERS = "WX", "oO"
_VALUE_LONG = {"--check-hash-based-pycs"}


def _script_index(command: Sequence[str]) -> int | None:
    """Where the check's script is: 0 for a program run directly, else the first argument after the interpreter and
    its options (``python -S -X dev check.py``: 4); None where there is none (``python -c CODE``, ``sh -ec CODE``)."""
    if not command or not _interpreter(command[0]):
        return 0 if command else None
    python = _python(command[0])
    value_letters = _PYTHON_VALUE_LETTERS if python else _SHELL_VALUE_LETTERS
    k = 1
    while k < len(command):
        arg = command[k]
        if arg == "--":
            return k + 1 if k + 1 < len(command) else None
        if arg in ("-", "+") or not arg.startswith(("-", "+")):
            return k
        if arg.startswith("--"):
            k += 2 if arg in _VALUE_LONG else 1
            continue
        for i, letter in enumerate(arg[1:]):
            if letter == "c" or (python and letter == "m"):
                return None
            if letter in value_letters:
                k += i == len(arg) - 2  # the value is the next argument, not the rest of this one
                break
        k += 1
    return None


def _free_name(name: str, taken: Mapping[str, object]) -> str:
    reserved = {"model.onnx", "inputs.npz", "expected.npz", "check.sh", "README.md"}
    stem, suffix = Path(name).stem, Path(name).suffix
    candidate, n = name, 1
    while candidate in taken or candidate in reserved:
        n += 1
        candidate = f"{stem}-{n}{suffix}"
    return candidate


def _make_executable(path: Path) -> None:
    """``chmod +x`` as the umask allows: execute bits where the file is readable."""
    mode = stat.S_IMODE(path.stat().st_mode)
    os.chmod(path, mode | ((mode & 0o444) >> 2))


def write_bundle(
    directory: str | Path,
    model: onnx.ModelProto,
    nodes: Sequence[str],
    inputs: Sequence[Mapping[str, np.ndarray]],
    expected: Sequence[Mapping[str, np.ndarray]],
    check: Sequence[str] | None,
    substitutions: Mapping[str, str],
    source: str,
    checks: int,
    load_inputs: Sequence[str] = (),
    base_dir: str | Path | None = None,
) -> Path:
    """Write the bundle (see the module docstring); ``base_dir``: where ``model``'s external tensors resolve."""
    target = Path(directory)
    if (target.exists() or target.is_symlink()) and not target.is_dir():
        raise UsageError(f"--repro {directory}: a file of that name exists; the bundle was not written")
    existing = target.is_dir()  # the command refused it before the search if it was not empty then
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = part_path(target if existing else target.parent)
    os.mkdir(tmp)  # mode 0777 less the umask, as mkdir(1)
    try:
        _fill(tmp, model, nodes, inputs, expected, check, substitutions, source, checks, load_inputs, base_dir)
        if existing:
            _move_into(tmp, target)
        else:
            os.rename(tmp, target)  # fails rather than replace a folder that appeared meanwhile with files in it
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def _move_into(tmp: Path, target: Path) -> None:
    """Each file of ``tmp`` into the existing folder ``target``, replacing nothing (link, then unlink)."""
    moved: list[Path] = []
    made: list[Path] = []
    try:
        for entry in sorted(p for p in tmp.rglob("*") if not p.is_dir()):
            name = entry.relative_to(tmp)
            if not (target / name).parent.is_dir():
                for folder in reversed((target / name).relative_to(target).parents[:-1]):
                    if not (target / folder).is_dir():
                        os.mkdir(target / folder)
                        made.append(target / folder)
            try:
                os.link(entry, target / name)
            except FileExistsError:
                raise UsageError(f"--repro {target}: {name} appeared there during the search; the bundle was not written") from None
            moved.append(target / name)
    except BaseException:
        for path in moved:
            with contextlib.suppress(OSError):
                os.unlink(path)
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                os.rmdir(folder)
        raise
    shutil.rmtree(tmp)


def _fill(tmp, model, nodes, inputs, expected, check, substitutions, source, checks, load_inputs, base_dir=None) -> None:
    from parity.api import IterationResult, RunResults, save_inputs, save_results

    weights = _write_model(tmp, model, base_dir)
    if inputs:
        save_inputs(inputs, tmp / "inputs.npz")
    if expected:
        save_results(RunResults([("reference", [IterationResult(dict(e)) for e in expected])]), tmp / "expected.npz")
    subs = {name: "model.onnx" for name in ITERATION_FILES} | dict(substitutions)
    copies = _Copies(tmp, load_inputs)
    command = None
    if check:
        command = []
        for k, tok in enumerate(check):
            if tok in subs:  # the iteration's files are the bundle's model.onnx and inputs.npz
                command.append(subs[tok])
            elif tok.startswith("-") and "=" in tok and tok.split("=", 1)[1]:
                opt, value = tok.split("=", 1)
                command.append(f"{opt}={subs.get(value) or copies.token(check, k, value)}")
            elif any(name in tok for name in subs):  # named inside a token, e.g. python -c "...load('parity_debug.onnx')"
                for name, replacement in subs.items():
                    tok = tok.replace(name, replacement)
                command.append(tok)
            else:
                command.append(copies.token(check, k, tok))
    script = '#!/bin/sh\n# Exit code non-zero (or the --fail-regex output) means the failure reproduces.\ncd "$(dirname "$0")"\n'
    script += (shlex.join(command) if command else "parity run model.onnx --onnxrt" + (" --load-inputs inputs.npz" if inputs else "")) + "\n"
    write_text_atomic(tmp / "check.sh", script)
    _make_executable(tmp / "check.sh")
    write_text_atomic(tmp / "README.md", _readme(source, nodes, model, bool(inputs), bool(expected), checks, copies, weights))


def _write_model(folder: Path, model: onnx.ModelProto, base_dir: str | Path | None) -> list[tuple[str, Path, bool]]:
    """Write ``model.onnx``; returns ``(location, original file, cloned)`` for each data file it refers to.

    Without external tensors, or with up to :data:`MAX_COPY` bytes of them, the model is written with its
    weights inside (``save_model``: validated on the path). Otherwise the graph is written as it is and each
    data file it reads is cloned beside it under its own name (no byte copied), or, where the filesystem
    cannot, left out and named in the README."""

    external = [t for t in onnx_external.tensors(model) if onnx_external.is_external(t)]
    if not external or sum(onnx_external.nbytes(t) for t in external) <= MAX_COPY:
        save_model(model, folder / "model.onnx", base_dir=base_dir, what="the minimal model", missing_kernels_ok=True)
        return []
    base = Path(base_dir) if base_dir is not None else Path(".")
    write_bytes_atomic(folder / "model.onnx", onnx_external.serialize(model, "the minimal model"))
    weights = []
    for location in dict.fromkeys(onnx_external.external_info(t)[0] for t in external):
        original = (base / location).resolve()
        target = folder / location
        target.parent.mkdir(parents=True, exist_ok=True)
        cloned = clone_file(original, target)
        if not cloned:
            with contextlib.suppress(FileNotFoundError):
                target.unlink()
        weights.append((location, original, cloned))
    return weights


def _readme(
    source: str, nodes: Sequence[str], model: onnx.ModelProto, inputs: bool, expected: bool, checks: int, copies: _Copies, weights: Sequence[tuple[str, Path, bool]] = ()
) -> str:
    ins = ", ".join(i.name for i in model.graph.input) or "(none)"
    outs = ", ".join(o.name for o in model.graph.output)
    lines = [
        "# Minimal failing model",
        "",
        f"Reduced from `{source}` by `parity debug reduce` in {checks} check(s).",
        "",
        f"- nodes ({len(nodes)}): {', '.join(f'`{n}`' for n in nodes)}",
        f"- inputs: {ins}",
        f"- outputs: {outs}",
        "",
        "Files: `model.onnx` (the model)"
        + (", `inputs.npz` (inputs that trigger the failure)" if inputs else "")
        + (", `expected.npz` (the outputs' values in the full model)" if expected else "")
        + ", `check.sh` (the check; run `./check.sh`).",
        "",
    ]
    if weights:
        lines += ["The model's weights are in external data files, not copied into this folder:", ""]
        for location, original, cloned in weights:
            if cloned:
                lines.append(f"- `{location}`: a reflink clone of `{original}` (the full model's weights; its blocks are shared, no byte was copied)")
            else:
                lines.append(
                    f"- `{location}`: **not here** (too large to copy); it is `{original}`, the full model's weights. "
                    "Copy it beside `model.onnx` under this name before running `check.sh` (not a hard link or symlink: onnx refuses those)"
                )
        lines.append("")
    if copies.copied:
        lines += ["Copied from the check (nothing else was copied):", ""]
        lines += [f"- `{name}`: {why} (`{src}`)" for name, (src, why) in copies.copied.items()]
        lines.append("")
    if copies.outside:
        lines += ["The check also names these files, which are **not** in this folder (`check.sh` refers to them where they were):", ""]
        lines += [f"- `{path}`: {why}" for path, why in copies.outside]
        lines.append("")
    lines += [
        "Compare a backend against the expected values: `parity run model.onnx --onnxrt"
        + (" --load-inputs inputs.npz" if inputs else "")
        + (" --load-outputs expected.npz" if expected else "")
        + "`.",
        "",
    ]
    return "\n".join(lines)
