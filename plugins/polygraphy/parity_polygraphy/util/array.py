"""Polygraphy's ``util.array``: array functions that take NumPy arrays or PyTorch tensors alike.

NumPy does the work; a torch tensor is converted to NumPy (from the CPU) and array results are converted back to
torch tensors, so these helpers give torch results for torch inputs as Polygraphy's do, without torch being
required. Polygraphy's DeviceView (CUDA memory) is not supported: Parity's TensorRT runner hands out host arrays.
"""

from __future__ import annotations

import builtins
import functools
import numbers
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from parity_polygraphy.datatype import DataType
from parity_polygraphy.logger import G_LOGGER

DEFAULT_RTOL = 1e-5
DEFAULT_ATOL = 1e-8


def is_torch(obj: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def is_numpy(obj: Any) -> bool:
    return isinstance(obj, np.ndarray)


def is_device_view(obj: Any) -> bool:
    return False  # no CUDA device views in Parity's Python API


def _check(obj: Any, name: str) -> None:
    if not (is_numpy(obj) or is_torch(obj) or isinstance(obj, (numbers.Number, np.generic))):
        G_LOGGER.critical(f"Function: {name} is unsupported for objects of type: {type(obj).__name__}")


def to_numpy(obj: Any) -> np.ndarray:
    """A NumPy view or copy of ``obj`` (a torch tensor is moved to the CPU first)."""
    if is_torch(obj):
        return obj.detach().cpu().numpy()
    _check(obj, "to_numpy")
    return np.asarray(obj)


def to_torch(obj: Any) -> Any:
    """A torch tensor of ``obj`` (needs PyTorch)."""
    import torch

    if is_torch(obj):
        return obj
    _check(obj, "to_torch")
    return torch.from_numpy(np.ascontiguousarray(obj))


def _numpy_backed(func: Callable[..., Any], arrays: int = 1) -> Callable[..., Any]:
    """``func`` written for NumPy, accepting torch tensors too: the first ``arrays`` arguments are converted to
    NumPy; array results go back to torch where the first argument was a tensor."""

    @functools.wraps(func)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        _check(args[0], func.__name__)
        torch_in = is_torch(args[0])
        args = tuple(to_numpy(a) if i < arrays and (is_torch(a) or is_numpy(a)) else a for i, a in enumerate(args))
        result = func(*args, **kwargs)
        if not torch_in:
            return result

        def back(value: Any) -> Any:
            return to_torch(value) if isinstance(value, np.ndarray) else value

        return tuple(back(v) for v in result) if isinstance(result, tuple) else back(result)

    return wrapped


def nbytes(obj: Any) -> int:
    return int(to_numpy(obj).nbytes)


def size(obj: Any) -> int:
    return int(to_numpy(obj).size)


def data_ptr(obj: Any) -> int:
    return int(obj.data_ptr()) if is_torch(obj) else int(obj.ctypes.data)


def is_on_cpu(obj: Any) -> bool:
    return obj.device.type == "cpu" if is_torch(obj) else True


def is_on_gpu(obj: Any) -> bool:
    return not is_on_cpu(obj)


def dtype(obj: Any) -> Any:
    """The array's DataType."""
    return DataType.from_dtype(obj.dtype)


def shape(obj: Any) -> tuple[int, ...]:
    return tuple(obj.shape)


def view(obj: Any, dtype: Any, shape: Sequence[int]) -> Any:
    """The same memory seen as ``dtype`` (a DataType) with ``shape``."""
    if is_torch(obj):
        return obj.reshape(-1).view(DataType.to_dtype(dtype, "torch")).reshape(shape)
    return obj.reshape(-1).view(DataType.to_dtype(dtype, "numpy")).reshape(shape)


def is_contiguous(obj: Any) -> bool:
    return bool(obj.is_contiguous()) if is_torch(obj) else bool(obj.flags["C_CONTIGUOUS"])


def make_contiguous(obj: Any) -> Any:
    if is_torch(obj):
        return obj.contiguous()
    return obj if obj.flags["C_CONTIGUOUS"] else np.ascontiguousarray(obj)


def resize_or_reallocate(obj: Any, shape: Sequence[int]) -> Any:
    """``obj`` with ``shape``: resized in place where it can be, else a new empty array of its dtype."""
    if is_torch(obj):
        return obj.resize_(tuple(shape))
    if tuple(obj.shape) != tuple(shape):
        try:
            obj.resize(shape, refcheck=False)
        except ValueError:
            obj = np.empty(shape, dtype=obj.dtype)
    return obj


def cast(obj: Any, dtype: Any) -> Any:
    """``obj`` converted to ``dtype`` (a DataType)."""
    if is_torch(obj):
        return obj.to(DataType.to_dtype(dtype, "torch"))
    return np.array(obj.astype(DataType.to_dtype(dtype, "numpy")))


def unravel_index(index: int, shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(int(index), tuple(shape)))


@functools.partial(_numpy_backed, arrays=1)
def topk(obj: np.ndarray, k: int, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest values along ``axis`` (fewer where the axis is shorter) and their indices, largest first."""
    indices = np.argsort(-obj, axis=axis, kind="stable")
    indices = np.take(indices, np.arange(0, builtins.min(k, obj.shape[axis])), axis=axis)
    return np.take_along_axis(obj, indices, axis=axis), indices


@_numpy_backed
def histogram(obj: np.ndarray, range: tuple[float, float] | None = None) -> tuple[np.ndarray, np.ndarray]:  # noqa: A002 (Polygraphy's name)
    return np.histogram(obj, bins=10, range=range)


@_numpy_backed
def median(obj: np.ndarray) -> Any:
    return np.median(obj)


@_numpy_backed
def quantile(obj: np.ndarray, q: float) -> Any:
    return np.quantile(obj, q)


@_numpy_backed
def mean(obj: np.ndarray, dtype: Any = None) -> Any:
    return np.mean(obj, dtype=DataType.to_dtype(dtype, "numpy") if dtype is not None else None)


@_numpy_backed
def pad(obj: np.ndarray, pad_width: Any, mode: str = "constant", constant_values: Any = 0) -> np.ndarray:
    return np.pad(obj, pad_width, mode=mode, constant_values=constant_values)


def _numpy_function(name: str, numpy_func: Callable[..., Any], arrays: int = 1) -> Callable[..., Any]:
    """Polygraphy's function ``name``: ``numpy_func`` on the first ``arrays`` arguments, converted to the first's kind."""

    def func(*args: Any, **kwargs: Any) -> Any:
        return numpy_func(*args, **kwargs)

    func.__name__ = func.__qualname__ = name
    return _numpy_backed(func, arrays=arrays)


# one-array reductions and element-wise functions: NumPy's, with Python scalars out for reductions to one value
_reduction = _numpy_function


any = _reduction("any", lambda obj: bool(np.any(obj)))  # noqa: A001 (Polygraphy's names shadow builtins in this module)
all = _reduction("all", lambda obj: bool(np.all(obj)))  # noqa: A001
max = _reduction("max", np.amax)  # noqa: A001
min = _reduction("min", np.amin)  # noqa: A001
argmax = _reduction("argmax", lambda obj: int(np.argmax(obj)))
argmin = _reduction("argmin", lambda obj: int(np.argmin(obj)))
std = _reduction("std", np.std)
var = _reduction("var", np.var)
sum = _reduction("sum", np.sum)  # noqa: A001
abs = _reduction("abs", np.abs)  # noqa: A001
isfinite = _reduction("isfinite", np.isfinite)
isinf = _reduction("isinf", np.isinf)
isnan = _reduction("isnan", np.isnan)
argwhere = _reduction("argwhere", np.argwhere)
ravel = _reduction("ravel", np.ravel)
logical_not = _reduction("logical_not", np.logical_not)
sqrt = _reduction("sqrt", np.sqrt)
reshape = _reduction("reshape", np.reshape)
transpose = _reduction("transpose", np.transpose)
power = _reduction("power", np.power)


# two-array functions: the second is converted to the first's kind
_binary = functools.partial(_numpy_function, arrays=2)


equal = _binary("equal", lambda lhs, rhs: bool(np.array_equal(lhs, rhs)))
allclose = _binary("allclose", lambda lhs, rhs, rtol=DEFAULT_RTOL, atol=DEFAULT_ATOL: bool(np.allclose(lhs, rhs, rtol=rtol, atol=atol)))
subtract = _binary("subtract", np.subtract)
divide = _binary("divide", np.divide)
multiply = _binary("multiply", np.multiply)
logical_xor = _binary("logical_xor", np.logical_xor)
logical_and = _binary("logical_and", np.logical_and)
greater = _binary("greater", np.greater)


def where(cond: Any, lhs: Any, rhs: Any) -> Any:
    """``lhs`` where ``cond`` holds, else ``rhs`` (torch out where ``cond`` is a tensor)."""
    return _numpy_backed(lambda c, a, b: np.where(c, a, b), arrays=3)(cond, lhs, rhs)


