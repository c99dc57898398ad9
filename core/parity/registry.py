"""What plugins register: small, cheap descriptions whose factories import heavy libraries lazily.

The descriptions behave as frozen dataclasses (``repr``, ``==``, ``hash``, read-only fields,
``dataclasses.replace``/``fields``/``asdict``) but are :class:`parity.util.record.Record` classes: every
``parity run`` and ``parity run --help`` creates them, and ``@dataclass`` costs ~0.6 ms a class."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from parity.data.parse import parse_shapes, parse_val_ranges
from parity.errors import PluginError, UsageError
from parity.util.record import DICT, Record, fill
from parity.util.text import did_you_mean

if TYPE_CHECKING:  # pragma: no cover
    import click
    import numpy as np

    from parity.backend.base import BaseRunner
    from parity.compare.result import OutputCheck
    from parity.data.meta import TensorMeta


class RunnerRequest(Record, frozen=True):
    """Everything a backend needs to build one runner: the model and every parsed option."""

    model: str | None
    options: Mapping[str, Any]
    index: int
    model_kind: str | None

    def __init__(self, model: str | None, options: Mapping[str, Any], index: int = 0, model_kind: str | None = None) -> None:
        fill(self, locals())

    def get(self, name: str, default: Any = None) -> Any:
        value = self.options.get(name, default)
        return default if value is None else value


class DataRequest(Record, frozen=True):
    """Everything a data loader needs: what a registered loader's factory receives (:class:`DataLoaderSpec`).

    ``val_range`` and ``input_shapes`` are parsed (``{name: (lo, hi)}``, ``{name: shape}``; the empty name is
    the default); :meth:`from_options` builds a request from option values as the CLI spells them."""

    input_metadata: Mapping[str, TensorMeta]
    seed: int
    iterations: int
    val_range: Mapping[str, Any]
    input_shapes: Mapping[str, Any]
    options: Mapping[str, Any]

    def __init__(
        self,
        input_metadata: Mapping[str, TensorMeta],
        seed: int = 1,
        iterations: int = 1,
        val_range: Mapping[str, Any] = DICT,
        input_shapes: Mapping[str, Any] = DICT,
        options: Mapping[str, Any] = DICT,
    ) -> None:
        fill(self, locals())

    @classmethod
    def from_options(cls, input_metadata: Mapping[str, TensorMeta], options: Mapping[str, Any]) -> DataRequest:
        """``options`` as ``parity run`` parses them: ``seed``, ``iterations``, ``val_range`` (``["[0,1]",
        "x:[-1,1]"]``), ``input_shapes`` (``["x:[1,3]"]``); all are kept as :attr:`options` too."""
        return cls(
            input_metadata,
            options.get("seed", 1),
            options.get("iterations", 1),
            parse_val_ranges(options.get("val_range") or ()),
            parse_shapes(options.get("input_shapes") or ()),
            options,
        )

    def get(self, name: str, default: Any = None) -> Any:
        value = self.options.get(name, default)
        return default if value is None else value


class Backend(Record, frozen=True):
    """An inference backend. ``flag`` selects it on the CLI and may be repeated (two runners)."""

    name: str
    make_runner: Callable[[RunnerRequest], BaseRunner]
    help: str
    flag: str | None  # defaults to --<name>
    options: Sequence[click.Option]
    model_kinds: tuple[str, ...]
    requires: tuple[str, ...]  # importable module names, checked with find_spec, never imported
    install_hint: str
    # parameter names (click's, e.g. "trt_outputs") of this backend's options that mark intermediate tensors as
    # outputs: when any is given, `parity run` prints the first-divergence report after its summary
    mark_options: tuple[str, ...]
    # parameter names of options whose value is a file the command reads / writes: `run` and `convert` refuse,
    # before any work, an output that is the model or a file read, and two outputs on one file
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    # the name messages use ("a TensorRT runner (--trt)"); defaults to ``name``
    title: str
    # parameter names of the core's options this backend's runners read besides its own and ``mark_options``
    # (e.g. "input_shapes" for TensorRT profiles): the option rule (docs/cli.md) counts them as used by it
    honours: tuple[str, ...]

    def __init__(
        self,
        name: str,
        make_runner: Callable[[RunnerRequest], BaseRunner],
        help: str = "",
        flag: str | None = None,
        options: Sequence[click.Option] = (),
        model_kinds: tuple[str, ...] = ("onnx",),
        requires: tuple[str, ...] = (),
        install_hint: str = "",
        mark_options: tuple[str, ...] = (),
        reads: tuple[str, ...] = (),
        writes: tuple[str, ...] = (),
        title: str = "",
        honours: tuple[str, ...] = (),
    ) -> None:
        fill(self, locals())

    @property
    def label(self) -> str:
        return self.title or self.name

    def reads_option(self, param: str) -> bool:
        """Whether this backend's runners read the core option ``param`` (a marking option or one it honours)."""
        return param in self.mark_options or param in self.honours

    @property
    def cli_flag(self) -> str:
        return self.flag or f"--{self.name}"


class ModelKind(Record, frozen=True):
    """A kind of model file: how to recognise it, read its inputs, and describe it."""

    name: str
    suffixes: tuple[str, ...]
    read_inputs: Callable[[str], dict[str, TensorMeta]]
    describe: Callable[..., str] | None  # describe(path, show: set[str], options: Mapping) -> text
    magic: Callable[[bytes], bool] | None  # sniff the first 64 bytes when the suffix is unknown
    options: Sequence[click.Option]  # extra options of `parity inspect model` for this kind
    # summarize(path) -> what `parity inspect model --json` adds to the inputs: "outputs" ({name: TensorMeta})
    # and plain JSON values (docs/formats.md); None: the inputs alone
    summarize: Callable[[str], dict[str, Any]] | None

    def __init__(
        self,
        name: str,
        suffixes: tuple[str, ...],
        read_inputs: Callable[[str], dict[str, TensorMeta]],
        describe: Callable[..., str] | None = None,
        magic: Callable[[bytes], bool] | None = None,
        options: Sequence[click.Option] = (),
        summarize: Callable[[str], dict[str, Any]] | None = None,
    ) -> None:
        fill(self, locals())


class ComparatorSpec(Record, frozen=True):
    """A comparison metric. ``factory(options)`` returns ``compare(name, actual, reference) -> OutputCheck``."""

    name: str
    factory: Callable[[Mapping[str, Any]], Callable[[str, np.ndarray, np.ndarray], OutputCheck]]
    help: str
    options: Sequence[click.Option]

    def __init__(
        self,
        name: str,
        factory: Callable[[Mapping[str, Any]], Callable[[str, np.ndarray, np.ndarray], OutputCheck]],
        help: str = "",
        options: Sequence[click.Option] = (),
    ) -> None:
        fill(self, locals())


class DataLoaderSpec(Record, frozen=True):
    """A source of feed dicts. ``factory(request: DataRequest)`` returns an iterable of ``{input name: array}``."""

    name: str
    factory: Callable[[DataRequest], Iterable[dict[str, np.ndarray]]]
    help: str
    options: Sequence[click.Option]

    def __init__(self, name: str, factory: Callable[[DataRequest], Iterable[dict[str, np.ndarray]]], help: str = "", options: Sequence[click.Option] = ()) -> None:
        fill(self, locals())


class StrategySpec(Record, frozen=True):
    """A debug search strategy: ``factory(options)`` returns a :class:`parity.debug.strategy.Strategy`."""

    name: str
    factory: Callable[[Mapping[str, Any]], Any]
    help: str
    kinds: tuple[str, ...]  # the searches that offer it as a --mode; empty: every search

    def __init__(self, name: str, factory: Callable[[Mapping[str, Any]], Any], help: str = "", kinds: tuple[str, ...] = ()) -> None:
        fill(self, locals())


class ExecutorSpec(Record, frozen=True):
    """Where a debug command's checks run (``--executor NAME``): ``factory(options)`` returns a
    :class:`parity.debug.executor.Executor` for the command's parsed options (``jobs`` and this spec's own
    ``options``, which join every ``debug`` command). The factory imports heavy libraries (ray), never the
    module that registers the spec."""

    name: str
    factory: Callable[[Mapping[str, Any]], Any]
    help: str
    options: Sequence[click.Option]

    def __init__(self, name: str, factory: Callable[[Mapping[str, Any]], Any], help: str = "", options: Sequence[click.Option] = ()) -> None:
        fill(self, locals())


class ConvertRequest(Record, frozen=True):
    """What a converter receives: the model, the output path and every parsed option."""

    model: str
    output: str
    options: Mapping[str, Any]

    def __init__(self, model: str, output: str, options: Mapping[str, Any]) -> None:
        fill(self, locals())

    def get(self, name: str, default: Any = None) -> Any:
        value = self.options.get(name, default)
        return default if value is None else value


class ConverterSpec(Record, frozen=True):
    """Writes a model in another form; chosen by ``--convert-to name`` or the output suffix."""

    name: str
    suffixes: tuple[str, ...]
    convert: Callable[[ConvertRequest], None]
    help: str
    options: Sequence[click.Option]

    def __init__(self, name: str, suffixes: tuple[str, ...], convert: Callable[[ConvertRequest], None], help: str = "", options: Sequence[click.Option] = ()) -> None:
        fill(self, locals())


class OptionSpec(Record, frozen=True):
    """Options a plugin adds to existing commands; ``validate(command, params, ctx)`` may refuse values."""

    name: str
    commands: tuple[str, ...]
    options: Sequence[click.Option]
    validate: Callable[[str, Mapping[str, Any], Any], None] | None
    help: str
    # parameter names of options whose value is a file the command reads / writes: `run` and `convert` refuse,
    # before any work, an output that is the model or a file read, and two outputs on one file
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    # the backends whose runners read these options: a command with backend flags and none of these refuses
    # them (the option rule, docs/cli.md); empty: the command itself reads them
    backends: tuple[str, ...]

    def __init__(
        self,
        name: str,
        commands: tuple[str, ...],
        options: Sequence[click.Option],
        validate: Callable[[str, Mapping[str, Any], Any], None] | None = None,
        help: str = "",
        reads: tuple[str, ...] = (),
        writes: tuple[str, ...] = (),
        backends: tuple[str, ...] = (),
    ) -> None:
        fill(self, locals())


# what the option rule (parity.cli.owners) calls the owner of a registered item's options
OWNER_KINDS = {
    "backends": "backend",
    "comparators": "metric",
    "executors": "executor",
    "converters": "converter",
    "data_loaders": "data",
    "model_kinds": "model kind",
}

_KINDS = {
    "backends": Backend,
    "model_kinds": ModelKind,
    "comparators": ComparatorSpec,
    "data_loaders": DataLoaderSpec,
    "strategies": StrategySpec,
    "executors": ExecutorSpec,
    "converters": ConverterSpec,
    "command_options": OptionSpec,
}


class Registry(Record):
    """Everything registered, keyed by name, remembering which plugin registered each item."""

    backends: dict[str, Backend]
    model_kinds: dict[str, ModelKind]
    comparators: dict[str, ComparatorSpec]
    data_loaders: dict[str, DataLoaderSpec]
    strategies: dict[str, StrategySpec]
    executors: dict[str, ExecutorSpec]
    converters: dict[str, ConverterSpec]
    command_options: dict[str, OptionSpec]
    owners: dict[tuple[str, str], str]  # (kind, name) -> plugin
    option_owners: dict[str, str]  # --option -> plugin

    def __init__(
        self,
        backends: dict[str, Backend] = DICT,
        model_kinds: dict[str, ModelKind] = DICT,
        comparators: dict[str, ComparatorSpec] = DICT,
        data_loaders: dict[str, DataLoaderSpec] = DICT,
        strategies: dict[str, StrategySpec] = DICT,
        executors: dict[str, ExecutorSpec] = DICT,
        converters: dict[str, ConverterSpec] = DICT,
        command_options: dict[str, OptionSpec] = DICT,
        owners: dict[tuple[str, str], str] = DICT,
        option_owners: dict[str, str] = DICT,
    ) -> None:
        fill(self, locals())

    def add(self, kind: str, item: Any, owner: str) -> None:
        expected = _KINDS[kind]
        if not isinstance(item, expected):
            raise PluginError(f"plugin {owner} registered {item!r} as {kind}, expected a {expected.__name__}")
        table: dict[str, Any] = getattr(self, kind)
        previous = self.owners.get((kind, item.name))
        if previous is not None:
            raise PluginError(
                f"{kind[:-1].replace('_', ' ')} '{item.name}' is registered by both {previous} and {owner}; uninstall one or block it with PARITY_DISABLE_PLUGINS"
            )
        names = [*(getattr(o, "opts", []) for o in getattr(item, "options", ()))]
        if kind == "backends":
            names.append([item.cli_flag])
        flat = [n for group in names for n in group]
        for opt in flat:
            other = self.option_owners.get(opt)
            if other is not None and other != owner:
                raise PluginError(f"option {opt} is registered by both {other} and {owner}")
        for opt in flat:
            self.option_owners[opt] = owner
        _tag_owner(kind, item)
        table[item.name] = item
        self.owners[(kind, item.name)] = owner

    def items_of(self, owner: str) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for (kind, name), who in self.owners.items():
            if who == owner:
                found.setdefault(kind, []).append(name)
        return found

    def backend(self, name: str) -> Backend:
        return _lookup(self.backends, name, "backend")

    def comparator(self, name: str) -> ComparatorSpec:
        return _lookup(self.comparators, name, "comparison function")

    def strategy(self, name: str) -> StrategySpec:
        return _lookup(self.strategies, name, "debug strategy")

    def executor(self, name: str) -> ExecutorSpec:
        return _lookup(self.executors, name, "executor")


OWNER_ATTR = "parity_owners"  # on a click.Option: the (kind, name) pairs whose use makes it take effect


def _tag_owner(kind: str, item: Any) -> None:
    """Each option a backend, metric, executor, converter or data loader declares knows its owner, so that a
    command refuses it when that owner is not in use (:mod:`parity.cli.owners`)."""
    owners: tuple[tuple[str, str], ...] = ()
    if kind in OWNER_KINDS:
        owners = ((OWNER_KINDS[kind], item.name),)
    elif kind == "command_options" and item.backends:
        owners = tuple(("backend", name) for name in item.backends)
    for option in getattr(item, "options", ()):
        if owners:
            setattr(option, OWNER_ATTR, owners)


def _lookup(table: Mapping[str, Any], name: str, what: str) -> Any:
    if name not in table:
        raise UsageError(f"unknown {what} '{name}'{did_you_mean(name, table)}; known: {', '.join(sorted(table))}")
    return table[name]
