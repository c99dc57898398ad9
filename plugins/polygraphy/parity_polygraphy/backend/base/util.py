"""Checking a feed against a runner's input metadata, as Polygraphy's runners do before inference."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from parity_polygraphy.datatype import DataType
from parity_polygraphy.exception import PolygraphyException


def _dynamic(dim: Any) -> bool:
    return dim is None or not isinstance(dim, int) or dim < 0


def check_inputs(feed_dict: Mapping[str, Any], input_metadata: Mapping[str, Any]) -> None:
    """Raise ``PolygraphyException`` for missing or extra inputs, a dtype other than the model's, or a shape
    that differs from the model's in rank or in a static dimension."""
    given, expected = set(feed_dict), set(input_metadata)
    if expected - given:
        raise PolygraphyException(
            f"The following inputs were not found in input data: {expected - given}.\n"
            f"Note: inputs requested were: {expected}, but all inputs are: {given}"
        )
    if given - expected:
        raise PolygraphyException(f"Extra inputs in input data: {given - expected}.\nNote: inputs requested were: {expected}, but all inputs are: {given}")
    for name, value in feed_dict.items():
        if isinstance(value, int):
            continue
        dtype, shape = input_metadata[name]
        got = DataType.from_dtype(value.dtype)
        if dtype is not None and got != DataType.from_dtype(dtype):
            raise PolygraphyException(f"Input tensor: {name} | Received unexpected dtype: {got}.\nNote: Expected type: {dtype}")
        got_shape = tuple(value.shape)
        if shape is not None and (len(got_shape) != len(shape) or any(want != dim and not _dynamic(want) for want, dim in zip(shape, got_shape))):
            raise PolygraphyException(f"Input tensor: {name} | Received incompatible shape: {got_shape}.\nNote: Expected a shape compatible with: {shape}")
