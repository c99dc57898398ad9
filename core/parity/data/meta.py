"""What a model says about a tensor: dtype and shape, where dims may be dynamic (``None`` or a name)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from parity.util.record import Record, fill

if TYPE_CHECKING:  # pragma: no cover - numpy is imported lazily to keep the CLI start fast
    import numpy as np

Dim = int | str | None


class TensorMeta(Record, frozen=True):
    """A tensor's dtype (``None``: unknown) and shape (``None``: unknown rank; a dim ``None`` or a name: dynamic)."""

    dtype: np.dtype | None
    shape: tuple[Dim, ...] | None

    def __init__(self, dtype: np.dtype | None, shape: tuple[Dim, ...] | None) -> None:
        fill(self, locals())

    @property
    def is_dynamic(self) -> bool:
        return self.shape is None or any(not isinstance(d, int) or d < 0 for d in self.shape)

    def __str__(self) -> str:
        dtype = self.dtype.name if self.dtype is not None else "?"
        shape = "?" if self.shape is None else "[" + ",".join("?" if d is None else str(d) for d in self.shape) + "]"
        return f"{dtype}{shape}"

    def mismatch(self, array: np.ndarray) -> str | None:
        """Why ``array`` cannot feed this tensor, or ``None``."""
        if self.dtype is not None and array.dtype != self.dtype:
            return f"has dtype {array.dtype.name} but the model expects {self.dtype.name}"
        if self.shape is not None:
            if len(self.shape) != array.ndim:
                return f"has shape {list(array.shape)} but the model expects rank {len(self.shape)}: {self}"
            for want, got in zip(self.shape, array.shape):
                if isinstance(want, int) and want >= 0 and want != got:
                    return f"has shape {list(array.shape)} but the model expects {self}"
        return None
