"""Parity's default data loader draws what Polygraphy's draws, for every dtype it generates (its docstring's promise:
golden files made with Polygraphy's default loader stay usable). Integers and booleans must be drawn in their own
dtype: NumPy's randint takes another stream for 8- and 16-bit types and bool than for int64."""

from __future__ import annotations

import numpy as np
import pytest

from parity.api import DataLoader, TensorMeta

polygraphy = pytest.importorskip("polygraphy.comparator")
from polygraphy.common import TensorMetadata  # noqa: E402

DTYPES = [np.bool_, np.uint8, np.int8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.float16, np.float32, np.float64]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("seed", [1, 7])
def test_values_match_polygraphys_default_loader(dtype, seed):
    value_range = (0, 1) if dtype is np.bool_ else (-3, 100)
    lo = 0 if np.issubdtype(dtype, np.unsignedinteger) else value_range[0]
    ours = DataLoader({"x": TensorMeta(np.dtype(dtype), (4, 6)), "y": TensorMeta(np.dtype(np.float32), (2,))}, seed=seed, iterations=2, val_range=(lo, value_range[1]))
    meta = TensorMetadata()
    meta.add("x", dtype, (4, 6))
    meta.add("y", np.float32, (2,))
    theirs = polygraphy.DataLoader(seed=seed, iterations=2, val_range=(lo, value_range[1]), input_metadata=meta)
    for index in range(2):
        for name in ("x", "y"):
            mine, polys = ours[index][name], theirs[index][name]
            assert mine.dtype == polys.dtype and np.array_equal(mine, polys), (index, name, mine.ravel()[:6], polys.ravel()[:6])
