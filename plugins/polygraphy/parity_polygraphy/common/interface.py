"""Polygraphy's typed containers: ``TypedDict(key_type, value_type)`` and ``TypedList(elem_type)`` make classes
whose instances check each key, value or element they are given (PolygraphyException: 'Unsupported ... type')."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from typing import Any

from parity_polygraphy.logger import G_LOGGER

__all__ = ["TypedDict", "TypedList"]


def _refuse(message: str) -> None:
    G_LOGGER.critical(message)


class _Copies:
    """copy.copy / copy.deepcopy of a typed container: the same settings, a copy of the contents."""

    _storage: str

    def _copy_with(self, copy_contents: Any) -> Any:
        new = type(self).__new__(type(self))
        new.__dict__.update(self.__dict__)
        setattr(new, self._storage, copy_contents(getattr(self, self._storage)))
        return new

    def __copy__(self) -> Any:
        return self._copy_with(copy.copy)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return self._copy_with(lambda contents: copy.deepcopy(contents, memo))


def TypedDict(key_type_func: Callable[[], type], value_type_func: Callable[[], type]) -> type:  # noqa: N802 (Polygraphy's name)
    """A dict-like class checking key and value types (the types are given as functions, resolved per instance,
    so a module need not import another library's types at import)."""

    class Interface(_Copies, MutableMapping):
        _storage = "dct"

        def __init__(self, dct: Mapping[Any, Any] | None = None) -> None:
            self.key_type = key_type_func()
            self.value_type = value_type_func()
            self.dct: dict[Any, Any] = {}
            self.update(dct or {})

        def _check_types(self, key: Any, val: Any) -> None:
            if not isinstance(key, self.key_type):
                _refuse(f"Unsupported key type in {self}. Key: {key!r} is type `{type(key).__name__}` but {type(self).__name__} expects type `{self.key_type.__name__}`")
            if not isinstance(val, self.value_type):
                _refuse(f"Unsupported value type in {self}. Value: {val!r} for key: {key!r} is type `{type(val).__name__}` "
                        f"but {type(self).__name__} expects type `{self.value_type.__name__}`")

        def update(self, other: Any = (), **kwargs: Any) -> None:  # checks every pair before adding any
            pairs = list(other.items() if isinstance(other, Mapping) else other) + list(kwargs.items())
            for key, val in pairs:
                self._check_types(key, val)
            self.dct.update(pairs)

        def __getitem__(self, key: Any) -> Any:
            return self.dct[key]

        def __setitem__(self, key: Any, val: Any) -> None:
            self._check_types(key, val)
            self.dct[key] = val

        def __delitem__(self, key: Any) -> None:
            del self.dct[key]

        def __iter__(self) -> Iterator[Any]:
            return iter(self.dct)

        def __len__(self) -> int:
            return len(self.dct)

        def __contains__(self, key: object) -> bool:
            return key in self.dct

        def __eq__(self, other: object) -> bool:
            return self.dct == getattr(other, "dct", other)

        __hash__ = None  # type: ignore[assignment]

        def __str__(self) -> str:
            return str(self.dct)

        def __repr__(self) -> str:
            return repr(self.dct)

    return Interface


def TypedList(elem_type_func: Callable[[], type]) -> type:  # noqa: N802 (Polygraphy's name)
    """A list-like class checking the type of each element it is given."""

    class Interface(_Copies):
        _storage = "lst"

        def __init__(self, lst: Iterable[Any] | None = None) -> None:
            self.elem_type = elem_type_func()
            self.lst: list[Any] = []
            self.extend(lst or [])

        def _check_type(self, elem: Any) -> None:
            if not isinstance(elem, self.elem_type):
                _refuse(f"Unsupported element type in {type(self).__name__}. Element: {elem!r} is type: {type(elem).__name__} "
                        f"but type: {self.elem_type.__name__} was expected")

        def append(self, elem: Any) -> None:
            self._check_type(elem)
            self.lst.append(elem)

        def extend(self, elems: Iterable[Any]) -> None:
            elems = list(elems)
            for elem in elems:
                self._check_type(elem)
            self.lst.extend(elems)

        def __iadd__(self, elems: Iterable[Any]) -> Any:
            self.extend(elems)
            return self

        def __getitem__(self, index: Any) -> Any:
            return self.lst[index]

        def __setitem__(self, index: int, elem: Any) -> None:
            self._check_type(elem)
            self.lst[index] = elem

        def __contains__(self, elem: object) -> bool:
            return elem in self.lst

        def __len__(self) -> int:
            return len(self.lst)

        def __iter__(self) -> Iterator[Any]:
            return iter(self.lst)

        def __eq__(self, other: object) -> bool:
            return self.lst == getattr(other, "lst", other)

        __hash__ = None  # type: ignore[assignment]

        def __str__(self) -> str:
            return str(self.lst)

        def __repr__(self) -> str:
            return repr(self.lst)

    return Interface
