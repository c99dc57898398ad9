"""The tactic replay format: which tactic TensorRT chose per layer (10.x) or per timing-cache key (10.8+, 11.x).

A replay is plain data and never needs TensorRT. Version 1 of the file (``"format": "parity-tactics"``)::

    {
      "format": "parity-tactics",
      "version": 1,
      "source": "algorithm-selector",          # or "timing-cache"
      "tensorrt": "10.7.0",                     # the TensorRT that recorded it, when known
      "tactics": {
        "/conv1/Conv": {                        # layer name (selector) or timing-cache key "0x<32 hex>"
          "tactic": "0xc0a0c0d3e8f11a10",       # unsigned 64-bit, hex: the form TensorRT's logs print
          "implementation": -2147483642,        # selector only
          "inputs":  [{"dtype": "FLOAT", "strides": [150528, 50176, 224, 1],
                       "vectorized_dim": -1, "components_per_element": 1}],
          "outputs": [...],
          "timing_ms": 0.0123,                  # informational, not part of the tactic's identity
          "name": "conv1",                      # timing-cache only: op name from the build log, if known
          "kernel": "sm80_xmma_gemm_..."        # timing-cache only: TacticName of the op's engine layer, if known
        }
      },
      "timing_cache": {"encoding": "base64", "size": 1234, "data": "..."}   # optional, timing-cache source
    }

The embedded timing cache makes a timing-cache replay self-contained: ``ITimingCache.update`` only edits keys
that already exist, so replaying needs the recorded cache with the chosen tactics written back into it.

Polygraphy's ``TacticReplayData`` files (``{"replay": {layer: Algorithm}, "polygraphy_class": ...}``) are read
too, including the older form whose tensor infos were ``[format, dtype]`` pairs.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from parity.api import UsageError, write_text_atomic

FORMAT = "parity-tactics"
VERSION = 1
SOURCES = ("algorithm-selector", "timing-cache")
_U64 = 1 << 64


class ReplayFormatError(UsageError):
    """A file exists and is JSON but is not a tactic replay (or is malformed)."""


def normalize_tactic(value: Any) -> int:
    """Tactic ids as one unsigned 64-bit int: selector tactics are signed int64, cache hashes uint64."""
    if isinstance(value, bool):
        raise ValueError(f"tactic must be an integer or a hex string, got {value!r}")
    if isinstance(value, str):
        text = value.strip().lower()
        number = int(text, 16) if text.startswith(("0x", "-0x")) else int(text, 10)
    elif isinstance(value, int):
        number = value
    else:
        raise ValueError(f"tactic must be an integer or a hex string, got {value!r}")
    if not -(1 << 63) <= number < _U64:
        raise ValueError(f"tactic {value!r} does not fit in 64 bits")
    return number % _U64


def tactic_hex(value: int) -> str:
    return f"0x{value:016x}"


def _short_dtype(text: str) -> str:
    return text.split(".", 1)[1] if text.startswith("DataType.") else text


@dataclass(frozen=True)
class TensorFormat:
    """One input/output of a layer's algorithm (``IAlgorithmIOInfo``)."""

    dtype: str
    strides: tuple[int, ...] = ()
    vectorized_dim: int = -1
    components_per_element: int = 1
    format: str | None = None  # only in old Polygraphy files (TensorFormat.LINEAR, ...)

    def __str__(self) -> str:
        text = self.dtype
        if self.format:
            text += f"/{self.format.split('.', 1)[-1]}"
        if self.strides:
            text += "[" + ",".join(map(str, self.strides)) + "]"
        if self.vectorized_dim != -1:
            text += f" vec{self.vectorized_dim}x{self.components_per_element}"
        return text

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "dtype": self.dtype,
            "strides": list(self.strides),
            "vectorized_dim": self.vectorized_dim,
            "components_per_element": self.components_per_element,
        }
        if self.format:
            data["format"] = self.format
        return data

    @classmethod
    def from_json(cls, data: Any) -> TensorFormat:
        if isinstance(data, (list, tuple)):  # Polygraphy < 0.42: [TensorFormat.X, DataType.Y]
            texts = [str(item) for item in data]
            dtype = next((t for t in texts if t.startswith("DataType.")), texts[-1] if texts else "?")
            fmt = next((t for t in texts if t.startswith("TensorFormat.")), None)
            return cls(_short_dtype(dtype), format=fmt)
        if not isinstance(data, Mapping) or "dtype" not in data:
            raise ValueError(f"tensor info needs a 'dtype', got {data!r}")
        return cls(
            dtype=_short_dtype(str(data["dtype"])),
            strides=tuple(int(s) for s in data.get("strides") or ()),
            vectorized_dim=int(data.get("vectorized_dim", -1)),
            components_per_element=int(data.get("components_per_element", 1)),
            format=data.get("format"),
        )


@dataclass(frozen=True)
class Tactic:
    """The tactic chosen for one layer or timing-cache key.

    Two tactics are the same tactic when tactic id, implementation and I/O formats match (what TensorRT's
    algorithm selector distinguishes); ``timing_ms`` and ``name`` are informational.
    """

    tactic: int
    implementation: int | None = None
    inputs: tuple[TensorFormat, ...] = ()
    outputs: tuple[TensorFormat, ...] = ()
    timing_ms: float | None = field(default=None, compare=False)
    name: str | None = field(default=None, compare=False)
    kernel: str | None = field(default=None, compare=False)  # timing-cache only: TacticName the engine's layer used

    def __post_init__(self) -> None:
        object.__setattr__(self, "tactic", normalize_tactic(self.tactic))

    @property
    def label(self) -> str:
        """Short readable identity, e.g. ``0x00000000000003e8 impl=-2147483642 FLOAT[..] -> HALF[..]``."""
        text = tactic_hex(self.tactic)
        if self.implementation is not None:
            text += f" impl={self.implementation}"
        if self.inputs or self.outputs:
            text += f" ({', '.join(map(str, self.inputs))} -> {', '.join(map(str, self.outputs))})"
        return text

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"tactic": tactic_hex(self.tactic)}
        if self.implementation is not None:
            data["implementation"] = self.implementation
        if self.inputs or self.outputs:
            data["inputs"] = [t.to_json() for t in self.inputs]
            data["outputs"] = [t.to_json() for t in self.outputs]
        if self.timing_ms is not None:
            data["timing_ms"] = self.timing_ms
        if self.name:
            data["name"] = self.name
        if self.kernel:
            data["kernel"] = self.kernel
        return data

    @classmethod
    def from_json(cls, data: Any) -> Tactic:
        if not isinstance(data, Mapping) or "tactic" not in data:
            raise ValueError(f"entry needs a 'tactic', got {str(data)[:80]}")
        implementation = data.get("implementation")
        timing = data.get("timing_ms")
        return cls(
            tactic=normalize_tactic(data["tactic"]),
            implementation=None if implementation is None else int(implementation),
            inputs=tuple(TensorFormat.from_json(t) for t in data.get("inputs") or ()),
            outputs=tuple(TensorFormat.from_json(t) for t in data.get("outputs") or ()),
            timing_ms=None if timing is None else float(timing),
            name=data.get("name"),
            kernel=data.get("kernel"),
        )


@dataclass
class TacticReplay:
    """Chosen tactics of one engine build, keyed by layer name or timing-cache key, in build order."""

    tactics: dict[str, Tactic] = field(default_factory=dict)
    source: str = "algorithm-selector"
    tensorrt: str | None = None
    timing_cache: bytes | None = None
    origin: str = FORMAT  # "polygraphy" when read from a Polygraphy file
    path: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"unknown replay source '{self.source}'; known: {', '.join(SOURCES)}")

    def __len__(self) -> int:
        return len(self.tactics)

    def __iter__(self) -> Iterator[str]:
        return iter(self.tactics)

    def items(self) -> Iterable[tuple[str, Tactic]]:
        return self.tactics.items()

    def add(self, key: str, tactic: Tactic) -> TacticReplay:
        self.tactics[key] = tactic
        return self

    @property
    def key_kind(self) -> str:
        return "layer" if self.source == "algorithm-selector" else "timing-cache key"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"format": FORMAT, "version": VERSION, "source": self.source}
        if self.tensorrt:
            data["tensorrt"] = self.tensorrt
        data["tactics"] = {key: tactic.to_json() for key, tactic in self.tactics.items()}
        if self.timing_cache is not None:
            data["timing_cache"] = {
                "encoding": "base64",
                "size": len(self.timing_cache),
                "data": base64.b64encode(self.timing_cache).decode("ascii"),
            }
        return data

    def dumps(self) -> str:
        return compact_json(self.to_json()) + "\n"

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write atomically: the recorder rewrites the file during a build, readers never see half a file."""
        write_text_atomic(path, self.dumps())

    @classmethod
    def from_json(cls, data: Any, path: str | None = None) -> TacticReplay:
        where = path or "<data>"
        if not isinstance(data, Mapping):
            raise ReplayFormatError(f"{where} is not a tactic replay (expected a JSON object)")
        try:
            if data.get("format") == FORMAT:
                return cls._from_parity(data, path)
            if data.get("polygraphy_class") == "TacticReplayData" or isinstance(data.get("replay"), Mapping):
                return cls._from_polygraphy(data, path)
        except (ValueError, TypeError, KeyError) as exc:
            raise ReplayFormatError(f"{where} is a malformed tactic replay: {exc}") from None
        raise ReplayFormatError(
            f"{where} is not a tactic replay (no \"format\": \"{FORMAT}\" and no Polygraphy \"replay\" table)"
        )

    @classmethod
    def _from_parity(cls, data: Mapping[str, Any], path: str | None) -> TacticReplay:
        version = data.get("version")
        if not isinstance(version, int) or version < 1:
            raise ValueError(f"bad version {version!r}")
        if version > VERSION:
            raise ReplayFormatError(
                f"{path or '<data>'} is tactic replay version {version}; this parity-tactics reads up to {VERSION}"
            )
        tactics = data.get("tactics")
        if not isinstance(tactics, Mapping):
            raise ValueError("'tactics' must be an object mapping layer names or keys to tactics")
        cache = None
        blob = data.get("timing_cache")
        if blob is not None:
            if not isinstance(blob, Mapping) or blob.get("encoding") != "base64":
                raise ValueError("'timing_cache' must be {\"encoding\": \"base64\", \"data\": ...}")
            try:
                cache = base64.b64decode(blob.get("data", ""), validate=True)
            except binascii.Error as exc:
                raise ValueError(f"timing_cache data is not base64 ({exc})") from None
        return cls(
            tactics={str(key): Tactic.from_json(value) for key, value in tactics.items()},
            source=data.get("source", "algorithm-selector"),
            tensorrt=data.get("tensorrt"),
            timing_cache=cache,
            path=path,
        )

    @classmethod
    def _from_polygraphy(cls, data: Mapping[str, Any], path: str | None) -> TacticReplay:
        table = data.get("replay")
        if not isinstance(table, Mapping):
            raise ValueError("Polygraphy replay has no 'replay' object")
        return cls(
            tactics={str(key): Tactic.from_json(value) for key, value in table.items()},
            source="algorithm-selector",
            origin="polygraphy",
            path=path,
        )


def compact_json(value: Any, indent: int = 0, width: int = 110) -> str:
    """JSON indented by 2, but any object or list that fits in ``width`` columns stays on one line.

    Keeps a replay readable and diff-friendly: one line per tensor format instead of one per stride.
    """
    flat = json.dumps(value)
    if not isinstance(value, (dict, list)) or not value or (indent and indent + len(flat) <= width):
        return flat
    pad, inner = " " * indent, " " * (indent + 2)
    if isinstance(value, dict):
        items = [f"{inner}{json.dumps(k)}: {compact_json(v, indent + 2, width)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    items = [f"{inner}{compact_json(v, indent + 2, width)}" for v in value]
    return "[\n" + ",\n".join(items) + f"\n{pad}]"


def load_replay(path: str | os.PathLike[str]) -> TacticReplay:
    """Read one replay file (Parity or Polygraphy format); bad input raises a one-line :class:`UsageError`."""
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"tactic replay file not found: {file}")
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read tactic replay {file}: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReplayFormatError(f"{file} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    return TacticReplay.from_json(data, str(file))


def save_replay(replay: TacticReplay, path: str | os.PathLike[str]) -> None:
    replay.save(path)


@dataclass
class LoadedSet:
    """Replays found under one path, and the files skipped because they are not replays."""

    replays: list[TacticReplay] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)


def load_replays(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> LoadedSet:
    """Load replay files; a directory is searched recursively for ``*.json`` (engines and timing caches
    sorted beside the replays are never read) and JSON files that are not replays are skipped.

    A file named explicitly must be a replay (error otherwise); a missing path is an error.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    found = LoadedSet()
    for raw in paths:
        root = Path(raw)
        if root.is_dir():
            for file in sorted(p for p in root.rglob("*.json") if p.is_file()):
                try:
                    found.replays.append(load_replay(file))
                except UsageError as exc:
                    found.skipped.append((str(file), str(exc)))
        elif root.is_file():
            found.replays.append(load_replay(root))
        else:
            raise UsageError(f"no such file or directory: {root}")
    return found
