"""Data loaders: synthetic random feeds, user scripts, and saved input files."""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from parity.data.meta import TensorMeta
from parity.errors import UsageError
from parity.util.scripts import load_user_function, split_script_spec
from parity.util.text import did_you_mean, names_preview

DEFAULT_DIM = 1  # only for the leading (batch) dim: other dynamic dims are never guessed (a 1x1 image crashes many models)

CLI, PYTHON = "cli", "python"


def shape_hint(name: str, shape: Sequence[object], style: str = PYTHON) -> str:
    """How the caller sets an input's shape, in the caller's terms: ``--input-shapes x:[1,3,H,W]`` on the command
    line, ``DataLoader(input_shapes={'x': (1, 3, H, W)})`` from Python."""
    if style == CLI:
        return f"--input-shapes {name}:[{','.join(map(str, shape))}]"
    dims = ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "")
    return f"DataLoader(input_shapes={{{name!r}: ({dims})}})"


def _option(style: str) -> str:
    return "--input-shapes" if style == CLI else "DataLoader(input_shapes=...)"


def resolve_shape(name: str, meta: TensorMeta, override: tuple | None = None, style: str = PYTHON) -> tuple[int, ...]:
    """The concrete shape to generate: a user override, else the model's. A dynamic leading (batch) dim becomes 1
    with a warning; any other dynamic dim is an error naming the input, its dims and how to set them (``style``:
    ``"cli"`` or ``"python"``, the terms of the hint)."""
    option = _option(style)
    if override is not None:
        if any(not isinstance(d, int) for d in override):
            raise UsageError(f"{option}: '{name}' still has named dims {list(override)}; give numbers")
        if meta.shape is not None:
            if len(override) != len(meta.shape):
                raise UsageError(f"{option}: '{name}' has rank {len(meta.shape)} ({meta}), not {len(override)}")
            for want, got in zip(meta.shape, override):
                if isinstance(want, int) and want >= 0 and want != got:
                    raise UsageError(f"{option}: '{name}' must keep its static dims {meta}, got {list(override)}")
        return tuple(override)  # type: ignore[arg-type]
    if meta.shape is None:
        how = f"--input-shapes {name}:[...]" if style == CLI else f"DataLoader(input_shapes={{{name!r}: (...)}})"
        raise UsageError(f"input '{name}' has unknown rank; give its shape with {how}")
    if meta.is_dynamic:
        fixed = [isinstance(d, int) and d >= 0 for d in meta.shape]
        unknown = [axis for axis, ok in enumerate(fixed) if not ok and axis > 0]
        if unknown:
            placeholders = [d if ok else (DEFAULT_DIM if axis == 0 else _placeholder(d, axis)) for axis, (d, ok) in enumerate(zip(meta.shape, fixed))]
            which = f"dim {unknown[0]}" if len(unknown) == 1 else f"dims {', '.join(map(str, unknown))}"
            raise UsageError(
                f"input '{name}' has dynamic {which} ({meta}); Parity guesses only a leading batch dim, as a wrong size "
                f"fails deep inside the model: give its shape with {shape_hint(name, placeholders, style)}"
            )
        shape = tuple(d if ok else DEFAULT_DIM for d, ok in zip(meta.shape, fixed))
        warnings.warn(f"input '{name}' has dynamic shape {meta}; using {list(shape)} (set it with {shape_hint(name, shape, style)})", stacklevel=2)
        return shape
    return tuple(meta.shape)  # type: ignore[arg-type]


def _placeholder(dim: object, axis: int) -> str:
    """A name for a dynamic dim in a hint: the model's own short name, else ``D<axis>``."""
    return dim if isinstance(dim, str) and dim.isidentifier() and len(dim) <= 8 else f"D{axis}"


class DataLoader:
    """Synthetic inputs, reproducible and random-access: iteration ``i`` draws from a generator seeded
    ``seed + i`` (NumPy's legacy ``RandomState``, so the values match Polygraphy's default loader and golden
    files made with it stay usable). A dynamic leading (batch) dim defaults to 1; other dynamic dims need
    ``input_shapes``. ``style="cli"`` words hints as command-line options (``--input-shapes``)."""

    def __init__(
        self,
        input_metadata: Mapping[str, TensorMeta] | None = None,
        seed: int = 1,
        iterations: int = 1,
        val_range: Mapping[str, tuple[float, float]] | tuple[float, float] | None = None,
        input_shapes: Mapping[str, tuple] | None = None,
        style: str = PYTHON,
        backend: str = "numpy",
    ) -> None:
        self.input_metadata = dict(input_metadata or {})
        self.seed = seed
        self.iterations = iterations
        if isinstance(val_range, tuple):
            val_range = {"": val_range}
        self.val_range = {"": (0.0, 1.0), **(val_range or {})}
        self.input_shapes = dict(input_shapes or {})
        self.style = style  # "python" or "cli": the terms error messages use to say how to fix them
        if backend not in ("numpy", "torch"):
            raise UsageError(f"data loader backend '{backend}': choose numpy or torch")
        self.backend = backend  # the module that draws the values (--data-loader-backend-module); numpy arrays either way

    def check_names(self) -> None:
        """Unknown names in ``input_shapes`` / ``val_range``, and inputs whose shape cannot be generated (dynamic
        dims past the first, with no shape given), fail before any work, in the caller's terms."""
        cli = self.style == CLI
        for option, names in ((_option(self.style), self.input_shapes), ("--val-range" if cli else "DataLoader(val_range=...)", self.val_range)):
            for name in names:
                if name and name not in self.input_metadata:
                    hint = did_you_mean(name, self.input_metadata)
                    raise UsageError(f"{option}: the model has no input '{name}'{hint}; inputs: {names_preview(self.input_metadata)}")
        with warnings.catch_warnings():  # the defaulted batch dim is warned about once, when data is made
            warnings.simplefilter("ignore")
            for name, meta in self.input_metadata.items():
                resolve_shape(name, meta, self.input_shapes.get(name), self.style)

    def __len__(self) -> int:
        return self.iterations

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        self.check_names()
        for index in range(self.iterations):
            yield self[index]

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        if not 0 <= index < self.iterations:
            raise IndexError(index)
        rng = np.random.RandomState(self.seed + index) if self.backend == "numpy" else _TorchDraws(self.seed + index)
        feed = {}
        for name, meta in self.input_metadata.items():
            shape = resolve_shape(name, meta, self.input_shapes.get(name), self.style)
            lo, hi = self.val_range.get(name, self.val_range[""])
            feed[name] = generate(rng, shape, meta.dtype or np.dtype(np.float32), lo, hi)
        return feed


class _TorchDraws:
    """``--data-loader-backend-module torch``: the values drawn by a ``torch.Generator`` seeded as NumPy's would be
    (Polygraphy's torch loader draws with torch.randint and torch.rand), with RandomState's two methods."""

    def __init__(self, seed: int) -> None:
        try:
            import torch  # here: only this backend needs it (torch takes seconds to import)
        except ImportError:
            raise UsageError("--data-loader-backend-module torch: torch is not installed (pip install torch)") from None

        self.torch = torch
        self.generator = torch.Generator().manual_seed(seed)

    def randint(self, lo: int, hi: int, size: tuple[int, ...], dtype: Any) -> np.ndarray:
        drawn = self.torch.randint(lo, hi, tuple(size), generator=self.generator, dtype=self.torch.int64)
        return drawn.numpy().astype(dtype)

    def random_sample(self, size: tuple[int, ...]) -> np.ndarray:
        return self.torch.rand(tuple(size), generator=self.generator, dtype=self.torch.float64).numpy()


def generate(rng: np.random.RandomState, shape: tuple[int, ...], dtype: np.dtype, lo: float, hi: float) -> np.ndarray:
    dtype = np.dtype(dtype)
    # integers and booleans drawn in their own dtype, as Polygraphy's loader draws them: NumPy's randint takes a
    # different stream for 8- and 16-bit types and bool than for int64, so a draw in int64 then cast gave other values
    if dtype == np.bool_:
        return np.asarray(rng.randint(max(int(lo), 0), min(int(hi), 1) + 1, size=shape, dtype=np.bool_))
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        lo, hi = max(int(lo), info.min), min(int(hi), info.max)
        return np.asarray(rng.randint(lo, hi + 1, size=shape, dtype=dtype))
    if np.issubdtype(dtype, np.floating):
        return np.asarray(rng.random_sample(size=shape) * (hi - lo) + lo).astype(dtype)
    raise UsageError(f"cannot generate data of dtype {dtype}; use --data-loader-script or --load-inputs")


def load_script_loader(spec: str) -> Iterable[dict[str, np.ndarray]]:
    """``file.py[:func]`` (default ``load_data``): a no-argument callable returning an iterable of feeds."""
    loader = load_user_function(spec, "load_data", "--data-loader-script")
    path, func = split_script_spec(spec, "load_data", "--data-loader-script")
    where = f"--data-loader-script: {path}: {func}()"
    try:
        data = loader()
    except Exception as exc:  # the user's code: its failure is bad input, named with the script
        raise UsageError(f"{where} raised {_exc_line(exc)}") from exc
    if isinstance(data, Mapping):
        data = [data]
    if isinstance(data, (str, bytes)) or not isinstance(data, Iterable):
        raise UsageError(f"{where} returned {_kind(data)}, not an iterable of feed dicts (input name -> array)")
    return ScriptData(data, where)


def _kind(value: object) -> str:
    name = type(value).__name__
    return "None" if value is None else f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _exc_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300]}" if text else type(exc).__name__


class ScriptData:
    """The feeds a data loader script returned; an exception while iterating them (a generator's own failure) is a
    one-line usage error naming the script and the iteration."""

    def __init__(self, data: Iterable, where: str) -> None:
        self.data = data
        self.where = where

    def __iter__(self) -> Iterator:
        index = 0
        try:
            iterator = iter(self.data)
        except Exception as exc:
            raise UsageError(f"{self.where}: iterating its result raised {_exc_line(exc)}") from exc
        while True:
            try:
                item = next(iterator)
            except StopIteration:
                return
            except Exception as exc:
                raise UsageError(f"{self.where} raised {_exc_line(exc)} while producing iteration {index}") from exc
            yield item
            index += 1


def as_feed(item: object, index: int) -> dict[str, np.ndarray]:
    if not isinstance(item, Mapping):
        raise UsageError(f"data loader item {index} is a {type(item).__name__}, not a dict of input name -> array")
    feed = {}
    for key, value in item.items():
        try:
            feed[str(key)] = np.asarray(value)
        except Exception as exc:  # a ragged list, an object numpy cannot convert
            raise UsageError(f"data loader item {index}: '{key}' is not an array ({_exc_line(exc)})") from None
    return feed
