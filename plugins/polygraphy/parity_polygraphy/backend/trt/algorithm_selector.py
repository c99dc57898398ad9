"""Polygraphy's tactic replay (``polygraphy.backend.trt.algorithm_selector``): ``TensorInfo`` and ``Algorithm`` (one
tactic TensorRT chose for a layer), ``TacticReplayData`` (layer name -> ``Algorithm``, saved and loaded in
Polygraphy's JSON format, so replay files move between Polygraphy and Parity both ways) and the deprecated
algorithm selectors ``TacticRecorder`` / ``TacticReplayer`` (TensorRT 10's ``IAlgorithmSelector``; TensorRT 11 has
none, and they say so).

TensorRT is imported on first use (``parity_trt.api.import_trt``), never when this module is imported: a
``TensorInfo`` needs it for its ``trt.DataType``, decoding a file needs it to turn ``"DataType.FLOAT"`` back into one.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from parity_trt.api import import_trt

from parity_polygraphy import func
from parity_polygraphy.common.interface import TypedDict
from parity_polygraphy.constants import TAB
from parity_polygraphy.json import Decoder, Encoder, add_json_methods
from parity_polygraphy.logger import G_LOGGER, LogMode

__all__ = ["Algorithm", "TacticRecorder", "TacticReplayData", "TacticReplayer", "TensorInfo"]


def _check_instance(obj: Any, cls: type, name: str) -> None:
    if not isinstance(obj, cls):
        G_LOGGER.critical(f"'{name}' must be an instance of {cls.__name__}, but is: {obj}.")


class _ByKey:
    """Equality and hashing by ``_key()``: two instances are equal when their fields are."""

    def _key(self) -> tuple[Any, ...]:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return self._key() == other._key() if isinstance(other, type(self)) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._key())


class TensorInfo(_ByKey):
    """One input or output of an algorithm: data type, strides and (TensorRT 8.6+) vectorisation."""

    @staticmethod
    def from_trt(io_info: Any) -> TensorInfo:
        """From a TensorRT ``IAlgorithmIOInfo`` (or anything with its attributes)."""
        return TensorInfo(
            io_info.dtype,
            tuple(io_info.strides),
            getattr(io_info, "vectorized_dim", None),  # both from TensorRT 8.6
            getattr(io_info, "components_per_element", None),
        )

    def __init__(self, dtype: Any, strides: Sequence[int], vectorized_dim: int | None, components_per_element: int | None) -> None:
        """``dtype`` a ``trt.DataType``; ``strides`` a sequence of ints; the other two ints or None."""
        _check_instance(dtype, import_trt().DataType, "dtype")
        _check_instance(strides, Sequence, "strides")
        if vectorized_dim is not None:
            _check_instance(vectorized_dim, int, "vectorized_dim")
        if components_per_element is not None:
            _check_instance(components_per_element, int, "components_per_element")
        self.dtype = dtype
        self.strides = tuple(strides)
        self.vectorized_dim = vectorized_dim
        self.components_per_element = components_per_element

    def _key(self) -> tuple[Any, ...]:
        return (self.dtype, self.strides, self.vectorized_dim, self.components_per_element)

    def __repr__(self) -> str:
        return f"TensorInfo({self.dtype}, {self.strides}, {self.vectorized_dim}, {self.components_per_element})"


def _data_type(name: str) -> Any:
    """``"DataType.FLOAT"`` (how a file names a ``trt.DataType``) -> ``trt.DataType.FLOAT`` of the TensorRT installed."""
    trt = import_trt()
    value: Any = trt
    try:
        for part in name.split("."):
            value = getattr(value, part)
    except AttributeError:
        G_LOGGER.critical(f"Unknown TensorRT data type in tactic replay data: {name} (TensorRT {trt.__version__}).")
    return value


@Encoder.register(TensorInfo)
def _encode_tensor_info(info: TensorInfo) -> dict[str, Any]:
    return {"dtype": str(info.dtype), "strides": info.strides, "vectorized_dim": info.vectorized_dim,
            "components_per_element": info.components_per_element}


@Decoder.register(TensorInfo)
def _decode_tensor_info(dct: dict[str, Any]) -> TensorInfo:
    return TensorInfo(_data_type(dct["dtype"]), dct["strides"], dct["vectorized_dim"], dct["components_per_element"])


class Algorithm(_ByKey):
    """A tactic TensorRT may choose for a layer: implementation, tactic and the formats of its inputs and outputs."""

    @staticmethod
    def from_trt(context: Any, algorithm: Any) -> Algorithm:
        """From a TensorRT ``IAlgorithmContext`` (the layer: ``num_inputs``, ``num_outputs``) and ``IAlgorithm``
        (``algorithm_variant``, ``get_algorithm_io_info(i)``: inputs first, then outputs)."""
        variant = algorithm.algorithm_variant
        infos = [TensorInfo.from_trt(algorithm.get_algorithm_io_info(i)) for i in range(context.num_inputs + context.num_outputs)]
        return Algorithm(variant.implementation, variant.tactic, infos[: context.num_inputs], infos[context.num_inputs :])

    def __init__(self, implementation: int, tactic: int, inputs: Sequence[TensorInfo], outputs: Sequence[TensorInfo]) -> None:
        self.implementation = implementation
        self.tactic = tactic
        for name, infos in (("inputs", inputs), ("outputs", outputs)):
            for index, info in enumerate(infos):
                _check_instance(info, TensorInfo, f"{name}[{index}]")
        self.inputs = tuple(inputs)  # tuples: an Algorithm is hashable
        self.outputs = tuple(outputs)

    def _key(self) -> tuple[Any, ...]:
        return (self.implementation, self.tactic, self.inputs, self.outputs)

    def __str__(self) -> str:
        return f"(Implementation: {self.implementation}, Tactic: {self.tactic}) | Inputs: {self.inputs} | Outputs: {self.outputs}"


@Encoder.register(Algorithm)
def _encode_algorithm(algo: Algorithm) -> dict[str, Any]:
    return {"implementation": algo.implementation, "tactic": algo.tactic, "inputs": algo.inputs, "outputs": algo.outputs}


@Decoder.register(Algorithm)
def _decode_algorithm(dct: dict[str, Any]) -> Algorithm:
    return Algorithm(dct["implementation"], dct["tactic"], dct["inputs"], dct["outputs"])


@add_json_methods("tactic replay file")
class TacticReplayData(TypedDict(lambda: str, lambda: Algorithm)):  # type: ignore[misc]
    """Layer name -> :class:`Algorithm`, in insertion order; ``to_json`` / ``from_json`` / ``save`` / ``load``."""

    def add(self, name: str, algorithm: Algorithm) -> TacticReplayData:
        """Set the algorithm of layer ``name``; returns self (for chaining)."""
        self[name] = algorithm
        return self

    def __str__(self) -> str:
        return "\n".join(f"Layer: {name}\n{TAB}Algorithm: {algorithm}" for name, algorithm in self.items())


@Encoder.register(TacticReplayData)
def _encode_replay(replay: TacticReplayData) -> dict[str, Any]:
    return {"replay": replay.dct}


@Decoder.register(TacticReplayData)
def _decode_replay(dct: dict[str, Any]) -> TacticReplayData:
    return TacticReplayData(dct["replay"])


# --- algorithm selectors (TensorRT 10's IAlgorithmSelector) -------------------------------------------------------
def _warn_deprecated(name: str) -> None:
    warnings.warn(f"{name} is deprecated and will be removed in Polygraphy 0.55.0.", DeprecationWarning, stacklevel=3)


def _base_selector_type() -> type:
    """The selector base class, made on first use: it derives from ``trt.IAlgorithmSelector``."""
    trt = import_trt()
    if not hasattr(trt, "IAlgorithmSelector"):  # removed in TensorRT 11
        G_LOGGER.critical(f"Algorithm selectors (TacticRecorder/TacticReplayer) is not available on TensorRT version {trt.__version__}.")

    class BaseSelector(trt.IAlgorithmSelector):
        def __init__(self, data: Any) -> None:
            trt.IAlgorithmSelector.__init__(self)  # a pybind11 trampoline must be initialised explicitly
            self.path = None
            self.data = TacticReplayData()
            if isinstance(data, TacticReplayData):
                self.data = data
            else:
                self.path = data

        def select_algorithms(self, context: Any, choices: Sequence[Any]) -> list[int]:
            return list(range(len(choices)))

    return BaseSelector


def TacticRecorder(record: Any) -> Any:  # noqa: N802 (Polygraphy's name)
    """A TensorRT 10 algorithm selector recording the tactic TensorRT chose for each layer into ``record``: a path
    or file-like object (written after each report) or a ``TacticReplayData``. Deprecated, as in Polygraphy."""
    _warn_deprecated("TacticRecorder")

    class TacticRecorderClass(_base_selector_type()):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(record)
            self.make_func = TacticRecorder

        @G_LOGGER.log_exception
        def report_algorithms(self, contexts: Sequence[Any], choices: Sequence[Any]) -> None:
            for context, choice in zip(contexts, choices):
                self.data.add(context.name, Algorithm.from_trt(context, choice))
            if self.path is not None:
                self.data.save(self.path)

    return TacticRecorderClass()


def TacticReplayer(replay: Any) -> Any:  # noqa: N802 (Polygraphy's name)
    """A TensorRT 10 algorithm selector making TensorRT choose the tactics in ``replay`` (a path or file-like object
    holding a tactic replay file, or a ``TacticReplayData``). A layer missing from it gets TensorRT's default (with a
    warning); a tactic TensorRT does not offer, or does not choose, raises PolygraphyException. Deprecated."""
    _warn_deprecated("TacticReplayer")

    class TacticReplayerClass(_base_selector_type()):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(replay)
            if self.path is not None:
                self.data = TacticReplayData.load(self.path)
            self.make_func = TacticReplayer

        @G_LOGGER.log_exception
        @func.constantmethod
        def select_algorithms(self, context: Any, choices: Sequence[Any]) -> list[int]:
            default = super().select_algorithms(context, choices)
            if not self.data:
                return default
            sep = f"\n{TAB}"
            if context.name not in self.data:
                G_LOGGER.warning(f"Layer: {context.name} was not found in the tactic replay. Falling back to default tactics.")
                G_LOGGER.warning("Has the network changed since the tactic replay file was generated?\n"
                                 f"Note: Layers in the tactic replay are:{sep}{sep.join(self.data.keys())}", mode=LogMode.ONCE)
                return default
            wanted = self.data[context.name]
            offered = [Algorithm.from_trt(context, algo) for algo in choices]
            if wanted not in offered:
                G_LOGGER.critical(
                    f"Layer: {context.name} | Tactic in replay was not provided by TensorRT as a choice for this layer.\n"
                    "Has the network or builder configuration changed since the replay file was generated?\n"
                    f"Note: Tactic in replay was:{sep}{wanted}\nProvided choices were:{sep}{sep.join(map(str, offered))}"
                )
            return [offered.index(wanted)]

        @G_LOGGER.log_exception
        @func.constantmethod
        def report_algorithms(self, contexts: Sequence[Any], choices: Sequence[Any]) -> None:
            for context, choice in zip(contexts, choices):
                if context.name not in self.data:
                    continue
                wanted, selected = self.data[context.name], Algorithm.from_trt(context, choice)
                if wanted != selected:
                    G_LOGGER.critical(
                        f"Layer: {context.name} | TensorRT selected a tactic different than the one specified in the tactic replay."
                        f"\nNote: Tactic in replay was:\n{TAB}{wanted}, but TensorRT selected:\n{TAB}{selected}"
                    )

    return TacticReplayerClass()
