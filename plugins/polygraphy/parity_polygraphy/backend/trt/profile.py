"""``Profile``: one TensorRT optimization profile as an ordered mapping of input names (or wildcards) to
min/opt/max shapes (values, for shape tensors)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Sequence
from fnmatch import fnmatch
from typing import Any

from parity_polygraphy.exception import PolygraphyException
from parity_polygraphy.logger import G_LOGGER

DEFAULT_SHAPE_VALUE = 1  # what a dynamic dimension becomes when no shape is given (Polygraphy's constant)


class ShapeTuple:
    """The min, opt and max shapes of one input (iterable as that triple)."""

    def __init__(self, min: Sequence[int], opt: Sequence[int], max: Sequence[int]) -> None:  # noqa: A002 - Polygraphy's names
        self.min, self.opt, self.max = min, opt, max

    def __iter__(self) -> Iterator[Sequence[int]]:
        yield from (self.min, self.opt, self.max)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ShapeTuple) and tuple(self) == tuple(other)

    def __str__(self) -> str:
        return f"(min={self.min}, opt={self.opt}, max={self.max})"

    def __repr__(self) -> str:
        return f"ShapeTuple{self}"


def _key_for(name: str, keys: Sequence[str]) -> str | None:
    """The profile key for input ``name``: the exact name first, else the first wildcard that matches it."""
    if name in keys:
        return name
    return next((key for key in keys if fnmatch(name, key)), None)


class Profile(OrderedDict):
    """``Profile().add("x", min=(1, 3), opt=(4, 3), max=(8, 3))``; keys may be wildcards (``"inp_*"``)."""

    def add(self, name: str, min: Sequence[int], opt: Sequence[int], max: Sequence[int]) -> Profile:  # noqa: A002 - Polygraphy's names
        self[name] = ShapeTuple(min, opt, max)
        return self

    def __getitem__(self, key: str) -> ShapeTuple:
        if key not in self:
            raise PolygraphyException(f"Binding: {key} does not have shapes set in this profile")
        return super().__getitem__(key)

    def fill_defaults(self, network: Any, default_shape_value: int | None = None) -> Profile:
        """Give every network input no key matches one static shape: its dynamic dims set to
        ``default_shape_value`` (default 1); a shape tensor gets that value for each of its elements."""
        value = DEFAULT_SHAPE_VALUE if default_shape_value is None else default_shape_value
        for index in range(network.num_inputs):
            inp = network.get_input(index)
            if _key_for(inp.name, list(self)) is not None:
                continue
            shape = tuple(inp.shape)
            # a shape tensor's profile holds values: one per element (a scalar has one)
            filled = (value,) * (shape[0] if shape else 1) if inp.is_shape_tensor else tuple(value if dim is None or dim < 0 else dim for dim in shape)
            if filled != shape:
                G_LOGGER.warning(f"Input {inp.name}: no shapes given; using {filled} for min, opt and max (a static shape)")
            self.add(inp.name, filled, filled, filled)
        return self

    def to_trt(self, builder: Any, network: Any) -> Any:
        """This profile as a ``trt.IOptimizationProfile`` for ``network``."""
        names = [network.get_input(i).name for i in range(network.num_inputs)]
        keys = list(self)
        unmatched = {key for key in keys if not any(key == n or fnmatch(n, key) for n in names)}
        if unmatched:
            raise PolygraphyException(
                f"Invalid inputs were provided to the optimization profile: {unmatched}\nNote: Inputs available in the TensorRT network are: {set(names)}"
            )
        profile = builder.create_optimization_profile()
        for index in range(network.num_inputs):
            inp = network.get_input(index)
            key = _key_for(inp.name, keys)
            if inp.is_shape_tensor:
                if key is None:
                    G_LOGGER.warning(f"Input shape-tensor {inp.name}: no values given; assuming it is not dynamic")
                    continue
                profile.set_shape_input(inp.name, *self[key])
            else:
                profile.set_shape(inp.name, *self[key if key is not None else inp.name])
        if not profile:
            raise PolygraphyException(f"Profile is not valid, please provide profile data.\nNote: profile was: {self}")
        return profile

    def __repr__(self) -> str:
        return "Profile()" + "".join(f".add('{name}', min={s.min}, opt={s.opt}, max={s.max})" for name, s in self.items())

    def __str__(self) -> str:
        return "{" + ",\n ".join(f"{name} [min={s.min}, opt={s.opt}, max={s.max}]" for name, s in self.items()) + "}"
