"""Polygraphy's synthetic data loader and its cache (``polygraphy.comparator.data_loader``).

``DataLoader`` draws what Polygraphy's draws, call for call (NumPy's legacy ``RandomState`` seeded
``seed + iteration``; ``randint`` with the input's dtype, ``random_sample`` scaled into the range), so inputs and
golden files made with Polygraphy's default loader are reproduced. Dynamic dims take the input's ``min``/``max``
shape where the metadata has one, else 1 (Polygraphy's ``DEFAULT_SHAPE_VALUE``).
"""

from __future__ import annotations

import fnmatch
import math
import os
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from parity import api as parity_api
from parity_polygraphy.comparator.compare import _try_match_shape, find_str_in_iterable, to_numpy, value_or_from_dict
from parity_polygraphy.comparator.struct import RunResults
from parity_polygraphy.datatype import DataType
from parity_polygraphy.exception import PolygraphyException
from parity_polygraphy.json import save_json
from parity_polygraphy.logger import G_LOGGER

__all__ = ["DataLoader", "DataLoaderCache", "StreamingDataLoader"]

DEFAULT_SEED = 1
DEFAULT_SHAPE_VALUE = 1


def _is_dynamic_dim(dim: Any) -> bool:
    return not isinstance(dim, (int, np.integer)) or dim < 0


def _is_dynamic(shape: Any) -> bool:
    return shape is None or any(_is_dynamic_dim(d) for d in shape)


def _valid_override(new_shape: Any, shape: Any) -> bool:
    """``new_shape`` has ``shape``'s rank and keeps its static dims."""
    if shape is None:
        return new_shape is not None
    return len(new_shape) == len(shape) and all(o == n or _is_dynamic_dim(o) for o, n in zip(shape, new_shape))


def _datatype(dtype: Any) -> Any:
    """Polygraphy's ``DataType`` of a numpy/torch/onnx dtype (or a ``DataType``)."""
    return dtype if isinstance(dtype, DataType) else DataType.from_dtype(dtype)


def _plain_numpy(dtype: Any) -> np.dtype | None:
    """``dtype`` as NumPy's when it is one already (a NumPy dtype, a scalar type, ``bool``, a name); else None."""
    if isinstance(dtype, (np.dtype, type, str)):
        try:
            return np.dtype(dtype)
        except TypeError:
            return None
    return None


def _backend_dtype(dtype: Any, module: str, name: str) -> Any:
    """The dtype ``module`` ("numpy" or "torch") generates ``dtype`` as; a dtype it has none for is refused."""
    if dtype is None:
        return None
    if module == "numpy" and _plain_numpy(dtype) is not None:
        return _plain_numpy(dtype)
    try:
        return DataType.to_dtype(_datatype(dtype), module)
    except Exception:
        raise PolygraphyException(
            f"Could not convert data type: {dtype} to {module}, so the default data loader cannot generate a {module} array for input: {name}. "
            "Please use a custom data loader to provide inputs."
        ) from None


def _is_integral(dtype: Any) -> bool:
    """An integer dtype (not bool), numpy's or torch's."""
    if hasattr(dtype, "is_floating_point"):  # torch
        return not dtype.is_floating_point and not dtype.is_complex and str(dtype) != "torch.bool"
    return bool(np.issubdtype(np.dtype(dtype), np.integer))


def _is_bool(dtype: Any) -> bool:
    return str(dtype) in ("bool", "torch.bool")


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise PolygraphyException("data_loader_backend_module='torch' needs PyTorch: pip install torch") from None
    return torch


class _Sampler:
    """Polygraphy's draws, in the order and with the calls it makes them."""

    def __init__(self, module: str, seed: int) -> None:
        if module not in ("numpy", "torch"):
            raise PolygraphyException(f"Invalid `data_loader_backend_module`. Note: got: {module} but valid modules are: ['numpy', 'torch']")
        self.module = module
        if module == "numpy":
            self.rng = np.random.RandomState(seed)
        else:
            torch = _torch()

            self.rng = torch.Generator()
            self.rng.manual_seed(seed)

    def integers(self, shape: tuple, dtype: Any, low: int, high: int) -> Any:
        if self.module == "numpy":
            return np.array(self.rng.randint(low=low, high=high + 1, size=shape, dtype=dtype))
        import torch

        return torch.randint(low, high + 1, shape, generator=self.rng, dtype=dtype)

    def floats(self, shape: tuple, dtype: Any, fmin: float, fmax: float) -> Any:
        scale, shift = fmax - fmin, fmin
        if math.isinf(fmin):  # an infinite bound: scale by it instead of the (infinite or NaN) width
            scale, shift = fmin, 0
        if math.isinf(fmax):
            scale = fmax
        if self.module == "numpy":
            with np.errstate(invalid="ignore", over="ignore"):
                return np.array((self.rng.random_sample(size=shape) * scale + shift).astype(dtype))
        import torch

        return torch.rand(shape, generator=self.rng, dtype=dtype) * scale + shift

    def constant(self, values: Any, dtype: Any) -> Any:
        if self.module == "numpy":
            return np.array(values, dtype=dtype)
        import torch

        return torch.tensor(values, dtype=dtype)


def _default_tuple(tup: Any, default: tuple) -> tuple:
    if not isinstance(tup, (tuple, list)):
        return default
    return tuple(default_elem if elem is None else elem for elem, default_elem in zip(tup, default))


class DataLoader:
    """Random inputs for ``Comparator.run``: ``iterations`` feed dicts (default 1), values in ``val_range``
    (default ``(0.0, 1.0)``; a per-input dict with ``""`` as the default), drawn with ``seed`` (default 1).
    ``input_metadata`` (a ``TensorMetadata``, names may be wildcards) overrides the model's dtypes and shapes;
    for a 1-D integer shape tensor its shape gives the values instead. The comparator sets the model's
    metadata as the ``input_metadata`` attribute before iterating."""

    def __init__(
        self,
        seed: int | None = None,
        iterations: int | None = None,
        input_metadata: Any = None,
        int_range: tuple[int, int] | None = None,
        float_range: tuple[float, float] | None = None,
        val_range: tuple[float, float] | Mapping[str, tuple[float, float]] | None = None,
        data_loader_backend_module: str | None = None,
    ) -> None:
        self.seed = DEFAULT_SEED if seed is None else seed
        self.iterations = 1 if iterations is None else iterations
        self.user_input_metadata = input_metadata if input_metadata is not None else {}
        self.data_loader_backend_module = data_loader_backend_module or "numpy"
        # Polygraphy's deprecated per-kind ranges: kept, they win over val_range for their kind when given
        self._int_range = _default_tuple(int_range, (1, 25)) if int_range is not None else None
        self._float_range = _default_tuple(float_range, (-1.0, 1.0)) if float_range is not None else None
        self.input_metadata = None
        self.default_val_range = _default_tuple(val_range, (0.0, 1.0))
        self.val_range = self.default_val_range if val_range is None else val_range

    def __repr__(self) -> str:
        return (
            f"DataLoader(seed={self.seed}, iterations={self.iterations}, input_metadata={self.user_input_metadata or None}, "
            f"val_range={self.val_range}, data_loader_backend_module={self.data_loader_backend_module!r})"
        )

    def __len__(self) -> int:
        return self.iterations

    def _range(self, name: str, cast: type) -> tuple:
        if cast is int and self._int_range is not None:
            return self._int_range
        if cast is float and self._float_range is not None:
            return self._float_range
        tup = value_or_from_dict(self.val_range, name, self.default_val_range)
        return tuple(cast(v) for v in tup)

    def _is_shape_tensor(self, name: str, dtype: Any, shape: Any) -> bool:
        """A 1-D integer input whose user-given "shape" has as many dims as the input has elements holds a shape."""
        if name not in self.user_input_metadata:
            return False
        if dtype is not None and not _is_integral(dtype):
            return False
        if _is_dynamic(shape) or len(shape) != 1:
            return False
        _, user_shape = self.user_input_metadata[name]
        return not _is_dynamic(user_shape) and len(user_shape) == shape[0]

    def __getitem__(self, index: int) -> OrderedDict:
        """The feed dict of iteration ``index``: the same for the same index."""
        if index >= self.iterations:
            raise IndexError()
        sampler = _Sampler(self.data_loader_backend_module, self.seed + index)
        if self.input_metadata is None:
            self.input_metadata = self.user_input_metadata
        user_for_input: dict[str, str] = {}
        matched: set[str] = set()
        for pattern in self.user_input_metadata:
            for name in self.input_metadata:
                if fnmatch.fnmatchcase(name, pattern):
                    user_for_input[name] = pattern
                    matched.add(pattern)
        for pattern in self.user_input_metadata:
            if pattern not in matched:
                G_LOGGER.warning(f"Input tensor: {pattern} | Metadata was provided, but the input does not exist in one or more runners.")

        buffers = OrderedDict()
        for name, (dtype, shape) in self.input_metadata.items():
            module = self.data_loader_backend_module
            dtype = _backend_dtype(dtype, module, name)
            shape_owner = name
            if name in user_for_input:
                user_dtype, user_shape = self.user_input_metadata[user_for_input[name]]
                dtype = _backend_dtype(user_dtype, module, name) if user_dtype is not None else dtype
                shape_owner = user_for_input[name]
                if user_shape is None:
                    pass
                elif _is_dynamic(user_shape):
                    G_LOGGER.warning(f"Input tensor: {name} [shape={shape}] | Provided input shape: {user_shape} is dynamic; will use the default shape instead.")
                elif not _valid_override(user_shape, shape) and not self._is_shape_tensor(shape_owner, dtype, shape):
                    G_LOGGER.warning(f"Input tensor: {name} [shape={shape}] | Cannot use provided custom shape: {user_shape} to override tensor shape; using the default")
                else:
                    shape = user_shape if not self._is_shape_tensor(shape_owner, dtype, shape) else shape
            buffers[name] = self._generate(sampler, name, shape_owner, dtype, self._static_shape(name, shape))
        return buffers

    @staticmethod
    def _static_shape(name: str, shape: Any) -> tuple:
        if shape is None:
            raise PolygraphyException(f"Input tensor: {name} | has unknown rank; provide its shape in input_metadata")
        if not _is_dynamic(shape):
            return tuple(int(d) for d in shape)
        for bound in (getattr(shape, "min", None), getattr(shape, "max", None)):
            if bound is not None:
                static = tuple(bound)
                break
        else:
            static = tuple(DEFAULT_SHAPE_VALUE if _is_dynamic_dim(d) else int(d) for d in shape)
        if not _valid_override(static, shape):
            raise PolygraphyException(f"Input tensor: {name} | Cannot override original shape: {shape} to {static}")
        G_LOGGER.warning(f"Input tensor: {name} [shape={shape}] | Will generate data of shape: {list(static)}.\nIf this is incorrect, provide a custom data loader.")
        return static

    def _generate(self, sampler: _Sampler, name: str, owner: str, dtype: Any, shape: tuple) -> Any:
        if self._is_shape_tensor(owner, dtype, shape):
            _, values = self.user_input_metadata[owner]
            G_LOGGER.info(f"Assuming {name} is a shape tensor. Setting input values to: {list(values)}.")
            return sampler.constant(list(values), dtype)
        if dtype is not None and (_is_integral(dtype) or _is_bool(dtype)):
            low, high = self._range(name, int if not _is_bool(dtype) else bool)
            return sampler.integers(shape, dtype, int(low), int(high))
        low, high = self._range(name, float)
        return sampler.floats(shape, dtype, low, high)  # unknown dtype: NumPy's default, float64, as Polygraphy


class DataLoaderCache:
    """Loads a data loader's feed dicts once and gives each runner the inputs its metadata asks for: cast to
    the runner's dtypes, reshaped or transposed to its shapes where that is possible, extra entries dropped;
    an input the cache cannot coerce is loaded again from the data loader (which then needs random access)."""

    def __init__(self, data_loader: Iterable[Mapping[str, Any]], save_inputs_path: str | None = None) -> None:
        self.data_loader = data_loader
        self.cache: list = []
        self.save_inputs_path = save_inputs_path
        self.input_metadata: Any = None

    def __len__(self) -> int:
        return len(self.cache)

    def _coerce(self, iteration: int, index: int, name: str, dtype: Any, shape: Any) -> Any:
        cached = self.cache[iteration]
        cached_name = find_str_in_iterable(name, cached.keys(), index)
        if cached_name is None:
            raise PolygraphyException(f"Input tensor: {name} | Does not exist in the data loader cache.")
        buffer = cached[cached_name]
        if dtype is not None:
            buffer = _cast(buffer, dtype)
        arr_shape = tuple(buffer.shape)
        if shape is not None and not _valid_override(arr_shape, shape):
            if not _is_dynamic(shape):
                buffer = _like(buffer, _try_match_shape(to_numpy(buffer), tuple(shape)))
            if not _valid_override(tuple(buffer.shape), shape):
                raise PolygraphyException(
                    f"Input tensor: {name} | Cannot reuse input data due to mismatch in shape or data type.\n"
                    f"Note: Cached input: [shape={arr_shape}], Requested input: [dtype={dtype}, shape={shape}]"
                )
        return buffer

    def __getitem__(self, iteration: int) -> OrderedDict:
        """The inputs of ``iteration`` as the metadata set last asks for them."""
        if iteration >= len(self.cache):
            raise IndexError()
        feed = OrderedDict()
        reloaded = None
        for index, (name, (dtype, shape)) in enumerate(self.input_metadata.items()):
            try:
                feed[name] = self._coerce(iteration, index, name, dtype, shape)
            except PolygraphyException:
                G_LOGGER.warning(f"Could not use buffer previously cached from data loader for input: {name}. Attempting to reload inputs from the data loader.")
                try:
                    if reloaded is None:
                        reloaded = self.data_loader[iteration]  # type: ignore[index]
                    feed[name] = reloaded[name]
                except Exception:
                    raise PolygraphyException(
                        "Could not reload inputs from data loader. Are the runners running the same model? "
                        "If not, please rewrite the data loader to support random access."
                    ) from None
        return feed

    def set_input_metadata(self, input_metadata: Any) -> None:
        """Use ``input_metadata`` (the runner's) from now on; the first call loads the data loader's feeds."""
        self.input_metadata = input_metadata
        try:
            self.data_loader.input_metadata = input_metadata  # type: ignore[attr-defined]
        except AttributeError:  # a list or a generator: nothing to tell it
            pass
        if self.cache:
            return
        self.cache = list(self.data_loader)
        if not self.cache:
            G_LOGGER.warning("Data loader did not yield any input data.")
        elif isinstance(self.cache[0], RunResults) or not _is_feed_dict(self.cache[0]):
            raise PolygraphyException(
                "Data loader returned an object that cannot be recognized as a feed_dict (Dict[str, Union[np.ndarray, torch.Tensor]]):"
                f"\nNote: The object was:\n{self.cache[0]!r:.500}"
            )
        if self.save_inputs_path is not None:
            _save_inputs(self.cache, self.save_inputs_path)


def _save_inputs(feeds: list, path: Any) -> None:
    """Polygraphy's JSON list of feed dicts, atomically: a ``.json`` path through Parity's streaming writer, any
    other path or an open file through :func:`parity_polygraphy.json.save_json`."""
    if not hasattr(path, "write") and str(path).endswith(".json"):
        parity_api.save_inputs([{k: to_numpy(v) for k, v in feed.items()} for feed in feeds], str(path))
        return
    save_json(feeds, path, description="inference input data")


def _is_feed_dict(item: Any) -> bool:
    try:
        return all(isinstance(name, str) for name, _ in item.items())
    except Exception:
        return False


def _like(original: Any, arr: np.ndarray) -> Any:
    """``arr`` as the kind of array ``original`` is (a torch tensor stays one)."""
    if isinstance(original, np.ndarray):
        return arr
    import torch

    return torch.from_numpy(np.ascontiguousarray(arr))


def _cast(buffer: Any, dtype: Any) -> Any:
    """``buffer`` in the dtype the runner expects (``dtype``: a ``DataType``, numpy or torch dtype)."""
    module = "numpy" if isinstance(buffer, np.ndarray) else "torch"
    target = _backend_dtype(dtype, module, "")
    if buffer.dtype == target:
        return buffer
    return buffer.astype(target) if module == "numpy" else buffer.to(target)


class StreamingDataLoader:
    """Feed dicts saved earlier (``save_inputs_path``, ``parity run --save-inputs``, Polygraphy's files), read one
    file at a time: a file holding a list gives each element, a file holding one feed dict gives it, a directory
    gives its ``*.json`` files in name (index) order. Files are read by Parity's engine, which never unpickles."""

    def __init__(self, paths: Any, allow_dirs: bool = True) -> None:
        self.paths = paths
        self.allow_dirs = allow_dirs

    def __repr__(self) -> str:
        return f"StreamingDataLoader({self.paths!r}, allow_dirs={self.allow_dirs})"

    def __iter__(self) -> Iterator[OrderedDict]:
        paths = [self.paths] if isinstance(self.paths, (str, os.PathLike)) else list(self.paths)
        for path in map(Path, paths):
            if path.is_dir():
                if not self.allow_dirs:
                    raise PolygraphyException(f"{path} is a directory; pass files (allow_dirs=False)")
                files = sorted(path.glob("*.json"))
            else:
                files = [path]
            for file in files:
                try:
                    feeds = parity_api.load_inputs(file)
                except (parity_api.ParityError, OSError) as exc:
                    raise PolygraphyException(str(exc)) from None
                yield from (OrderedDict(feed) for feed in feeds)
