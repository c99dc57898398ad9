"""Value classes that behave like dataclasses without ``@dataclass``'s start-up cost.

``@dataclass`` writes a class's ``__init__``, ``__repr__``, ``__eq__`` (frozen: also ``__hash__``,
``__setattr__``, ``__delattr__``) as source text and compiles each with ``exec`` when the class is created,
and ``parity run`` creates 25 of the core's 26 Records before doing any work (``parity --help`` two). Issue 27's
rule is the standard library unless a stand-in saves more than 15 ms of start-up; ``bench/startup.py`` times
these classes both ways (CPU time, in fresh interpreters, after pluggy and click): as Records 2-3 ms, as
dataclasses 25-35 ms with importing :mod:`dataclasses`, so this module saves 23-31 ms of every run (2-core
development machine, Python 3.11, November 2026; wall time on the idle machine: 23-27 ms). A :class:`Record`
writes its ``__init__`` out (it calls :func:`fill`) and inherits the rest, behaving as the dataclass it
replaces (``@dataclass`` or ``@dataclass(frozen=True)``, default options):

- the same ``repr`` (``Name(field=value, ...)``), ``==`` (same class, equal fields) and ``__match_args__``;
- frozen: hashable by its fields, and assigning or deleting a field raises
  :class:`dataclasses.FrozenInstanceError`; otherwise unhashable, as a dataclass with ``eq`` is;
- :func:`dataclasses.fields`, :func:`~dataclasses.replace`, :func:`~dataclasses.asdict` and
  :func:`~dataclasses.is_dataclass` work, and ``@dataclass`` subclasses inherit the fields: they read
  ``__dataclass_fields__``/``__dataclass_params__``, taken from an equivalent dataclass made on first use.

The fields are the class's annotations, in order; ``__init__`` takes them in the same order (checked when
the class is created) and gives defaults; a default made fresh for each instance
(``field(default_factory=dict)``) is :data:`DICT`, :data:`LIST` or :data:`SET`::

    class Point(Record, frozen=True):
        x: int
        y: int
        tags: list[str]

        def __init__(self, x: int, y: int = 0, tags: list[str] = LIST) -> None:
            fill(self, locals())

A plain subclass of a record (no ``frozen=`` in its bases' list) is an ordinary subclass, as it would be of
a dataclass.
"""

from __future__ import annotations

from reprlib import recursive_repr  # already imported by collections: costs nothing
from typing import Any


class Factory:
    """A default made fresh for each instance by ``make()`` (``dataclasses.field(default_factory=make)``)."""

    __slots__ = ("make",)

    def __init__(self, make: Any) -> None:
        self.make = make

    def __repr__(self) -> str:
        return "<factory>"  # as a dataclass's signature shows it


DICT: Any = Factory(dict)
LIST: Any = Factory(list)
SET: Any = Factory(set)


def fill(obj: Any, values: dict[str, Any]) -> None:
    """Set ``obj``'s fields from ``values`` (its ``__init__``'s ``locals()``), calling factory defaults."""
    cls = type(obj)
    setter = object.__setattr__ if cls._frozen else setattr
    for name in cls._fields:
        value = values[name]
        setter(obj, name, value.make() if type(value) is Factory else value)


class _DataclassAttribute:
    """``__dataclass_fields__`` / ``__dataclass_params__`` of a record: those of an equivalent dataclass, made
    (with :mod:`dataclasses`, imported then) the first time anything asks, then stored on the record class."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type) -> Any:
        record = owner.__dict__.get("_record") or getattr(owner, "_record", None)
        if record is None:
            raise AttributeError(self.name)
        twin = _dataclass_twin(record)
        record.__dataclass_fields__ = twin.__dataclass_fields__
        record.__dataclass_params__ = twin.__dataclass_params__
        return getattr(twin, self.name)


def _dataclass_twin(record: type) -> type:
    import dataclasses  # 1.7 ms at start-up: only dataclasses.fields() and friends on a Record need it

    code = record.__init__.__code__
    names = code.co_varnames[1 : code.co_argcount + code.co_kwonlyargcount]
    defaults = dict(zip(reversed(names[: code.co_argcount - 1]), reversed(record.__init__.__defaults__ or ())))
    defaults.update(record.__init__.__kwdefaults__ or {})
    annotations = _annotations(record)
    namespace: dict[str, Any] = {"__annotations__": {n: annotations[n] for n in names}, "__module__": record.__module__, "__qualname__": record.__qualname__}
    for name, default in defaults.items():
        namespace[name] = dataclasses.field(default_factory=default.make) if type(default) is Factory else default
    return dataclasses.dataclass(frozen=record._frozen)(type(record.__name__, (), namespace))


def _annotations(cls: type) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        if klass is not Record and issubclass(klass, Record):
            found.update(klass.__dict__.get("__annotations__", {}))
    return found


class Record:
    """Base of the value classes described in this module's docstring."""

    _fields: tuple[str, ...] = ()
    _frozen = False
    _record: type | None = None  # the record class whose fields an instance has (plain subclasses inherit it)
    __dataclass_fields__ = _DataclassAttribute()
    __dataclass_params__ = _DataclassAttribute()

    def __init_subclass__(cls, frozen: bool | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if frozen is None and Record not in cls.__bases__:
            return  # a plain subclass of a record
        fields = tuple(_annotations(cls))
        code = cls.__dict__["__init__"].__code__ if "__init__" in cls.__dict__ else None
        params = code.co_varnames[1 : code.co_argcount + code.co_kwonlyargcount] if code else ()
        if params != fields:
            raise TypeError(f"record {cls.__qualname__}: __init__ must take its fields {fields} in order, not {params}")
        cls._fields, cls._frozen, cls._record = fields, bool(frozen), cls
        cls.__match_args__ = fields
        if frozen:
            cls.__hash__ = Record._hash  # type: ignore[method-assign]
            cls.__setattr__ = Record._frozen_setattr  # type: ignore[method-assign]
            cls.__delattr__ = Record._frozen_delattr  # type: ignore[method-assign]
        else:
            cls.__hash__ = None  # type: ignore[assignment]

    def _values(self) -> tuple[Any, ...]:
        return tuple([getattr(self, name) for name in self._fields])

    @recursive_repr()
    def __repr__(self) -> str:
        return f"{type(self).__qualname__}({', '.join(f'{name}={getattr(self, name)!r}' for name in self._fields)})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._values() == other._values()  # type: ignore[attr-defined]
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def _hash(self) -> int:
        return hash(self._values())

    def _frozen_setattr(self, name: str, value: Any) -> None:
        record = self._record
        if type(self) is record or name in record._fields:  # type: ignore[union-attr]
            from dataclasses import FrozenInstanceError  # 1.7 ms at start-up: only a bad assignment needs it

            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(record, self).__setattr__(name, value)  # type: ignore[arg-type]

    def _frozen_delattr(self, name: str) -> None:
        record = self._record
        if type(self) is record or name in record._fields:  # type: ignore[union-attr]
            from dataclasses import FrozenInstanceError  # 1.7 ms at start-up: only a bad assignment needs it

            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(record, self).__delattr__(name)  # type: ignore[arg-type]
