"""Data loaders: synthetic random feeds, user scripts, and saved input files."""

from __future__ import annotations

import importlib.util
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

import numpy as np

from parity.data.meta import TensorMeta
from parity.errors import UsageError
from parity.util.text import did_you_mean

DEFAULT_DIM = 1


def resolve_shape(name: str, meta: TensorMeta, override: tuple | None = None) -> tuple[int, ...]:
    """The concrete shape to generate: a user override, else the model's, with dynamic dims set to 1."""
    if override is not None:
        if any(not isinstance(d, int) for d in override):
            raise UsageError(f"--input-shapes: '{name}' still has named dims {list(override)}; give numbers")
        if meta.shape is not None:
            if len(override) != len(meta.shape):
                raise UsageError(f"--input-shapes: '{name}' has rank {len(meta.shape)} ({meta}), not {len(override)}")
            for want, got in zip(meta.shape, override):
                if isinstance(want, int) and want >= 0 and want != got:
                    raise UsageError(f"--input-shapes: '{name}' must keep its static dims {meta}, got {list(override)}")
        return tuple(override)  # type: ignore[arg-type]
    if meta.shape is None:
        raise UsageError(f"input '{name}' has unknown rank; give its shape with --input-shapes {name}:[...]")
    if meta.is_dynamic:
        shape = tuple(d if isinstance(d, int) and d >= 0 else DEFAULT_DIM for d in meta.shape)
        warnings.warn(
            f"input '{name}' has dynamic shape {meta}; using {list(shape)} "
            f"(set it with --input-shapes {name}:[{','.join(map(str, shape))}])",
            stacklevel=2,
        )
        return shape
    return tuple(meta.shape)  # type: ignore[arg-type]


class DataLoader:
    """Synthetic inputs, reproducible and random-access: iteration ``i`` draws from a generator seeded
    ``seed + i`` (NumPy's legacy ``RandomState``, so the values match Polygraphy's default loader and golden
    files made with it stay usable)."""

    def __init__(
        self,
        input_metadata: Mapping[str, TensorMeta] | None = None,
        seed: int = 1,
        iterations: int = 1,
        val_range: Mapping[str, tuple[float, float]] | tuple[float, float] | None = None,
        input_shapes: Mapping[str, tuple] | None = None,
    ) -> None:
        self.input_metadata = dict(input_metadata or {})
        self.seed = seed
        self.iterations = iterations
        if isinstance(val_range, tuple):
            val_range = {"": val_range}
        self.val_range = {"": (0.0, 1.0), **(val_range or {})}
        self.input_shapes = dict(input_shapes or {})

    def check_names(self) -> None:
        """Unknown names in ``--input-shapes`` / ``--val-range`` fail before any work."""
        for option, names in (("--input-shapes", self.input_shapes), ("--val-range", self.val_range)):
            for name in names:
                if name and name not in self.input_metadata:
                    hint = did_you_mean(name, self.input_metadata)
                    raise UsageError(f"{option}: the model has no input '{name}'{hint}; inputs: {', '.join(self.input_metadata)}")

    def __len__(self) -> int:
        return self.iterations

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        self.check_names()
        for index in range(self.iterations):
            yield self[index]

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        if not 0 <= index < self.iterations:
            raise IndexError(index)
        rng = np.random.RandomState(self.seed + index)
        feed = {}
        for name, meta in self.input_metadata.items():
            shape = resolve_shape(name, meta, self.input_shapes.get(name))
            lo, hi = self.val_range.get(name, self.val_range[""])
            feed[name] = generate(rng, shape, meta.dtype or np.dtype(np.float32), lo, hi)
        return feed


def generate(rng: np.random.RandomState, shape: tuple[int, ...], dtype: np.dtype, lo: float, hi: float) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.randint(int(lo), int(hi) + 1, size=shape).astype(bool)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        lo, hi = max(int(lo), info.min), min(int(hi), info.max)
        return np.asarray(rng.randint(lo, hi + 1, size=shape)).astype(dtype)
    if np.issubdtype(dtype, np.floating):
        return np.asarray(rng.random_sample(size=shape) * (hi - lo) + lo).astype(dtype)
    raise UsageError(f"cannot generate data of dtype {dtype}; use --data-loader-script or --load-inputs")


def load_script_loader(spec: str) -> Iterable[dict[str, np.ndarray]]:
    """``file.py[:func]`` (default ``load_data``): a no-argument callable returning an iterable of feeds."""
    path, _, func = spec.partition(":") if not Path(spec).exists() else (spec, "", "")
    func = func or "load_data"
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"--data-loader-script: no such file '{path}'")
    mod_spec = importlib.util.spec_from_file_location(f"parity_data_{file.stem}", file)
    assert mod_spec and mod_spec.loader
    module = importlib.util.module_from_spec(mod_spec)
    sys.path.insert(0, str(file.parent))
    try:
        mod_spec.loader.exec_module(module)
    except Exception as exc:
        raise UsageError(f"--data-loader-script: {path} failed to import: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.path.remove(str(file.parent))
    loader: Callable | None = getattr(module, func, None)
    if not callable(loader):
        raise UsageError(f"--data-loader-script: {path} has no function '{func}'{did_you_mean(func, dir(module))}")
    data = loader()
    if isinstance(data, Mapping):
        data = [data]
    return data


def as_feed(item: object, index: int) -> dict[str, np.ndarray]:
    if not isinstance(item, Mapping):
        raise UsageError(f"data loader item {index} is a {type(item).__name__}, not a dict of input name -> array")
    return {str(k): np.asarray(v) for k, v in item.items()}
