"""TensorRT versions and the names that exist in only some of them (version gates).

``GATES`` is the single declaration of every TensorRT name the plugin uses that is not in every supported
release. The API conformance test (tests/test_conformance.py) checks each gate against the per-release
name manifests, so a gate can neither be missing nor wrong. At run time the plugin asks :func:`has`
(an attribute walk on the imported module) and raises :func:`unavailable` with a message built from the gate.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from parity.api import UsageError, did_you_mean


class Gate:
    """``since`` <= version < ``until`` (either end open). ``why`` is shown when the name is missing.

    Behaves as the frozen ``@dataclass`` it was (``==``, ``hash``, ``repr``, read-only fields), written out
    because every ``parity run`` and ``run --help`` imports this module and the decorator costs ~0.6 ms of
    start-up (with the ``dataclasses`` import, ~2 ms)."""

    _FIELDS = ("since", "until", "why")
    __match_args__ = _FIELDS

    def __init__(self, since: str | None = None, until: str | None = None, why: str = "") -> None:
        object.__setattr__(self, "since", since)
        object.__setattr__(self, "until", until)
        object.__setattr__(self, "why", why)

    def _values(self) -> tuple:
        return (self.since, self.until, self.why)

    def __repr__(self) -> str:
        return f"{type(self).__qualname__}(since={self.since!r}, until={self.until!r}, why={self.why!r})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._values() == other._values()  # type: ignore[attr-defined]
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._values())

    def __setattr__(self, name: str, value: Any) -> None:
        if type(self) is Gate or name in Gate._FIELDS:
            from dataclasses import FrozenInstanceError  # 1.5 ms at start-up: `parity run --help` imports this module

            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        if type(self) is Gate or name in Gate._FIELDS:
            from dataclasses import FrozenInstanceError  # 1.5 ms at start-up: `parity run --help` imports this module

            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super().__delattr__(name)

    def describe(self) -> str:
        if self.since and self.until:
            return f"TensorRT {self.since} to {self.until} (exclusive)"
        if self.since:
            return f"TensorRT {self.since} or newer"
        return f"TensorRT older than {self.until}" if self.until else "every TensorRT"

    def contains(self, version: str) -> bool:
        v = parse_version(version)
        return (self.since is None or v >= parse_version(self.since)) and (self.until is None or v < parse_version(self.until))


STRONG_TYPING = (
    "TensorRT 11 networks are strongly typed: precision comes from the model's tensor types. "
    "Make an fp16/bf16 model (e.g. ModelOpt AutoCast) or add Q/DQ nodes for int8/fp8 instead"
)
_WEAK = Gate(until="11.0", why=STRONG_TYPING)
_CALIB = Gate(until="11.0", why="implicit int8 calibration was removed in TensorRT 11; quantize with Q/DQ nodes (ModelOpt)")

GATES: dict[str, Gate] = {
    # weak typing: builder precision flags (removed in 11.0)
    "BuilderFlag.FP16": _WEAK,
    "BuilderFlag.BF16": _WEAK,
    "BuilderFlag.INT8": _WEAK,
    "BuilderFlag.FP8": _WEAK,
    "BuilderFlag.OBEY_PRECISION_CONSTRAINTS": _WEAK,
    "BuilderFlag.PREFER_PRECISION_CONSTRAINTS": _WEAK,
    # int8 calibration (removed in 11.0)
    "IInt8EntropyCalibrator2": _CALIB,
    "IInt8EntropyCalibrator2.get_batch": _CALIB,
    "IInt8EntropyCalibrator2.get_batch_size": _CALIB,
    "IInt8EntropyCalibrator2.read_calibration_cache": _CALIB,
    "IInt8EntropyCalibrator2.write_calibration_cache": _CALIB,
    "IBuilderConfig.int8_calibrator": _CALIB,
    "IBuilderConfig.set_calibration_profile": _CALIB,
    # device memory query renamed (the _v2 form exists from 10.7 on, the old one until 11.0)
    "ICudaEngine.device_memory_size": Gate(until="11.0", why="use device_memory_size_v2"),
    "ICudaEngine.device_memory_size_v2": Gate(since="10.7"),
    # the ONNX parser's capability query (inspect capability): the tuple-returning form until 11.0, the _v2 one from 10.7
    "OnnxParser.supports_model": Gate(until="11.0", why="use supports_model_v2"),
    "OnnxParser.supports_model_v2": Gate(since="10.7"),
    "OnnxParser.num_subgraphs": Gate(since="10.7"),
    "OnnxParser.is_subgraph_supported": Gate(since="10.7"),
    "OnnxParser.get_subgraph_nodes": Gate(since="10.7"),
    # unfused-tensor debug capture; first seen in the 10.16 manifest (10.9-10.15 were not checked)
    "INetworkDefinition.mark_unfused_tensors_as_debug_tensors": Gate(
        since="10.16", why="capturing unfused tensors needs a newer TensorRT; use --mark-debug NAMES instead"
    ),
    "IExecutionContext.unfused_tensors_debug_state": Gate(since="10.16", why="capturing unfused tensors needs a newer TensorRT"),
    # Polygraphy's builder/network/runtime options (--layer-precisions, --quantization-flags, ...)
    "ILayer.precision": _WEAK,
    "QuantizationFlag": _CALIB,
    "IBuilderConfig.set_quantization_flag": _CALIB,
    "IBuilderConfig.clear_quantization_flag": _CALIB,
    "IInt8MinMaxCalibrator": _CALIB,
    "IInt8EntropyCalibrator": _CALIB,
    "IInt8LegacyCalibrator": _CALIB,
    "RuntimePlatform": Gate(since="10.7"),
    "TilingOptimizationLevel": Gate(since="10.8"),
    # first seen in the 10.16 manifest (10.9-10.15 were not checked)
    "IAttention.decomposable": Gate(since="10.16", why="decomposable attention needs a newer TensorRT"),
    "LayerType.ATTENTION_INPUT": Gate(since="10.16"),
    "IAttentionInputLayer": Gate(since="10.16"),
    "IAttentionInputLayer.attention": Gate(since="10.16"),
    # the _v2 memory and weight-streaming calls (Polygraphy uses them from 10.1 on)
    "ICudaEngine.weight_streaming_budget_v2": Gate(since="10.1"),
    "ICudaEngine.get_weight_streaming_automatic_budget": Gate(since="10.1"),
    "ICudaEngine.get_device_memory_size_for_profile_v2": Gate(since="10.1"),
    "IExecutionContext.set_device_memory": Gate(since="10.1"),
    # Polygraphy: "Requires TensorRT 11.3 or later"; first seen in the 11.4 manifest
    "Runtime.dla_workspace_allocation_strategy": Gate(since="11.3"),
    "DLAWorkspaceAllocationStrategy": Gate(since="11.3"),
}


def trt_name(name: str) -> str:
    """Marks a string as a TensorRT qualified name (``'BuilderFlag.FP16'``) for the conformance walk."""
    return name


def parse_version(text: str) -> tuple[int, ...]:
    """``'10.16.1.11'`` -> ``(10, 16, 1, 11)``; trailing non-numeric parts (``.post1``, ``rc1``) are dropped."""
    parts: list[int] = []
    for piece in str(text).split("."):
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts) or (0,)


def major(trt: ModuleType) -> int:
    return parse_version(trt.__version__)[0]


def lookup(trt: ModuleType, name: str) -> Any:
    """``lookup(trt, 'BuilderFlag.FP16')`` -> the object, or ``None`` when this TensorRT lacks it."""
    obj: Any = trt
    for part in name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def has(trt: ModuleType, name: str) -> bool:
    return lookup(trt, name) is not None


def unavailable(trt: ModuleType, name: str, feature: str) -> UsageError:
    """The one-line error for a feature whose TensorRT name this version lacks."""
    gate = GATES.get(name)
    needs = f" (needs {gate.describe()})" if gate else ""
    why = f": {gate.why}" if gate and gate.why else ""
    return UsageError(f"{feature} is not available on TensorRT {trt.__version__}{needs}{why}")


def require(trt: ModuleType, name: str, feature: str) -> Any:
    """The named object, or a clear :class:`UsageError` saying which versions have it and what to do instead."""
    obj = lookup(trt, name)
    if obj is None:
        raise unavailable(trt, name, feature)
    return obj


def enum_member(trt: ModuleType, enum: str, member: str, option: str) -> Any:
    """A member of a TensorRT enum chosen by the user (case-insensitive), with the valid choices on error."""
    cls = require(trt, enum, option)
    wanted = member.strip().upper()
    value = getattr(cls, wanted, None)
    if value is None or not isinstance(value, cls):
        choices = sorted(k for k, v in vars(cls).items() if isinstance(v, cls))
        raise UsageError(
            f"{option}: TensorRT {trt.__version__} has no {enum} '{member}'{did_you_mean(wanted, choices)}; "
            f"choices: {', '.join(c.lower() for c in choices)}"
        )
    return value
