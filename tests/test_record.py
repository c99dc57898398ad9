"""parity.util.record: a Record behaves as the dataclass it stands for (the registry's contract types are Records)."""

from __future__ import annotations

import dataclasses
import inspect
import math

import pytest

from parity.util.record import DICT, LIST, Record, fill


class Frozen(Record, frozen=True):
    """A frozen record."""

    name: str
    size: int
    tags: list[str]

    def __init__(self, name: str, size: int = 1, tags: list[str] = LIST) -> None:
        fill(self, locals())


class Mutable(Record):
    """A mutable record."""

    name: str
    values: dict[str, float]
    ratio: float

    def __init__(self, name: str, values: dict[str, float] = DICT, ratio: float = math.nan) -> None:
        fill(self, locals())


@dataclasses.dataclass(frozen=True)
class FrozenDC:
    """A frozen record."""

    name: str
    size: int = 1
    tags: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class MutableDC:
    """A mutable record."""

    name: str
    values: dict[str, float] = dataclasses.field(default_factory=dict)
    ratio: float = math.nan


def as_dc(text: str) -> str:
    return text.replace("FrozenDC", "Frozen").replace("MutableDC", "Mutable")


@pytest.mark.parametrize(("record", "twin"), [(Frozen, FrozenDC), (Mutable, MutableDC)])
def test_repr_eq_and_fields_match_the_dataclass(record, twin):
    a, b = record("x"), twin("x")
    assert repr(a) == as_dc(repr(b))
    assert a == record("x") and a != record("y") and a != b  # another class is never equal, as for dataclasses
    assert record.__match_args__ == twin.__match_args__
    assert [(f.name, f.type, f.default, f.default_factory) for f in dataclasses.fields(a)] == [
        (f.name, f.type, f.default, f.default_factory) for f in dataclasses.fields(b)
    ]
    assert dataclasses.asdict(a) == dataclasses.asdict(b)
    assert dataclasses.is_dataclass(a) and dataclasses.is_dataclass(record) and not dataclasses.is_dataclass(Record)
    assert record.__dataclass_params__.frozen == twin.__dataclass_params__.frozen
    assert str(inspect.signature(record)).replace("'None'", "None") == str(inspect.signature(twin))
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'name'"):
        record()


def test_factory_defaults_are_fresh():
    assert Frozen("a").tags is not Frozen("a").tags
    assert Mutable("a").values == {} and Mutable("a").values is not Mutable("a").values
    assert Mutable("a", None).values is None  # an explicit value is kept, None included


def test_frozen_record_is_read_only_and_hashable():
    a = Frozen("x", 2, ("t",))
    assert hash(a) == hash(FrozenDC("x", 2, ("t",))) == hash(Frozen("x", 2, ("t",)))
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'size'"):
        a.size = 3
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete field 'size'"):
        del a.size
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.other = 1
    assert dataclasses.replace(a, size=5) == Frozen("x", 5, ("t",))


def test_mutable_record_is_unhashable_and_assignable():
    a = Mutable("x")
    a.ratio = 2.0
    assert a.ratio == 2.0 and vars(a) == {"name": "x", "values": {}, "ratio": 2.0}
    with pytest.raises(TypeError, match="unhashable"):
        hash(a)


def test_subclasses():
    @dataclasses.dataclass(frozen=True)
    class Sized(Frozen):
        extra: int = 0

    s = Sized("x", extra=3)
    assert repr(s) == "test_subclasses.<locals>.Sized(name='x', size=1, tags=[], extra=3)"
    assert [f.name for f in dataclasses.fields(s)] == ["name", "size", "tags", "extra"]

    class Plain(Frozen):  # a plain subclass may add attributes, fields stay read-only
        pass

    p = Plain("y")
    p.note = "ok"
    assert p.note == "ok" and [f.name for f in dataclasses.fields(p)] == ["name", "size", "tags"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.name = "z"


def test_init_must_take_the_fields_in_order():
    with pytest.raises(TypeError, match="must take its fields"):

        class Wrong(Record):
            a: int
            b: int

            def __init__(self, b: int, a: int) -> None:
                fill(self, locals())


def test_registry_types_are_equivalent_to_their_dataclasses():
    from parity.registry import Backend, DataRequest, Registry

    backend = Backend("toy", print, writes=("out",))
    assert dataclasses.replace(backend, name="toy2").name == "toy2" and backend.cli_flag == "--toy"
    assert {backend: 1}[Backend("toy", print, writes=("out",))] == 1
    assert DataRequest({}).val_range == {} and DataRequest({}).options is not DataRequest({}).options
    assert repr(Registry()).startswith("Registry(backends={}, model_kinds={}")


def test_bench_times_dataclasses_equivalent_to_every_record(tmp_path, monkeypatch):
    """bench/startup.py's stand-in figure (what Records save over @dataclass, issue 27's 15 ms rule) times a generated
    dataclass per Record of the core: each must have the Record's fields, defaults and frozenness."""
    import importlib
    import sys
    from pathlib import Path

    bench = Path(__file__).resolve().parents[1] / "bench"
    monkeypatch.syspath_prepend(str(bench))
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("startup", "bench_records", "bench_dataclasses"):
        monkeypatch.setitem(sys.modules, name, None)  # forgotten again after the test (None: not imported yet)
        del sys.modules[name]
    count = importlib.import_module("startup").record_twins(tmp_path)
    records = importlib.import_module("bench_records")
    twins = importlib.import_module("bench_dataclasses")
    real = {cls.__name__: cls for cls in _all_records() if cls.__module__.startswith("parity.")}
    assert count == len(real) >= 25  # every Record the core has (RunRequest became a dataclass, issue 27)

    def shape(cls: type) -> tuple:
        fields = [(f.name, repr(f.default), f.default_factory) for f in dataclasses.fields(cls)]  # repr: nan == nan
        return fields, cls.__dataclass_params__.frozen

    for name, cls in real.items():
        assert not isinstance(getattr(twins, name), Record) and dataclasses.is_dataclass(getattr(twins, name))
        assert shape(getattr(twins, name)) == shape(cls) == shape(getattr(records, name)), name


def _all_records() -> list[type]:
    found, todo = [], list(Record.__subclasses__())
    while todo:
        cls = todo.pop(0)
        todo += cls.__subclasses__()
        if cls.__dict__.get("_record") is cls:
            found.append(cls)
    return found
