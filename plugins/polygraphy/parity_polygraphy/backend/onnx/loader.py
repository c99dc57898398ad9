"""Polygraphy's ONNX loaders: lazy steps that load, edit and save ``onnx.ModelProto`` models.

Reading and writing go through Parity's loaders (parity_onnxrt's ``OnnxFromPath`` and ``modify_onnx_outputs``,
parity_surgeon's ``Fp16Converter``, ``parity.api.save_model``: one-line errors, atomic writes, written models
checked); graph edits (folding, extraction, upper bounds) use onnx-graphsurgeon, as Polygraphy does."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from typing import Any

from parity_onnxrt.api import modify_onnx_outputs
from parity_onnxrt.api import onnx_from_path as _parity_onnx_from_path
from parity_surgeon.api import Fp16Converter

from parity.api import ExternalData, invoke_if_callable, onnx_models, save_model
from parity_polygraphy.backend._funcify import polygraphy_errors, twin
from parity_polygraphy.backend.base import BaseLoader
from parity_polygraphy.backend.onnx import util as onnx_util
from parity_polygraphy.exception import PolygraphyException
from parity_polygraphy.logger import G_LOGGER

__all__ = [
    "BytesFromOnnx", "ConvertToFp16", "ExtractSubgraph", "FoldConstants", "GsFromOnnx", "InferShapes", "ModifyOutputs",
    "OnnxFromBytes", "OnnxFromPath", "OnnxFromTfGraph", "SaveOnnx", "SetUpperBound",
    "bytes_from_onnx", "convert_to_fp16", "extract_subgraph", "fold_constants", "gs_from_onnx", "infer_shapes",
    "modify_outputs", "onnx_from_bytes", "onnx_from_path", "onnx_from_tf_graph", "save_onnx", "set_upper_bound",
]  # fmt: skip

_MARK_ALL = ("mark-all", "mark all")  # Polygraphy's constants.MARK_ALL, and Parity's spelling
_TWO_GIB = 2 << 30


def _critical(message: str) -> Exception:
    return PolygraphyException(message)


def _warn(message: str) -> None:
    G_LOGGER.warning(message)


def _copy_model(model: Any) -> Any:
    import onnx

    out = onnx.ModelProto()
    out.CopyFrom(model)
    return out


class _ModelLoader(BaseLoader):
    """A loader that edits a model (a ModelProto or a loader of one); ``copy``: work on a copy (default False)."""

    def __init__(self, model: Any, copy: bool | None = None) -> None:
        self._model = model
        self.copy = bool(copy)

    def load(self) -> Any:
        model, _ = invoke_if_callable(self._model)
        return _copy_model(model) if self.copy else model


class OnnxFromPath(BaseLoader):
    """Loads an ONNX model from a path, with its external data read into the model (from ``external_data_dir``,
    default the model's folder) unless ``ignore_external_data`` (then only the graph; the model cannot run)."""

    def __init__(self, path: str | os.PathLike[str], external_data_dir: str | os.PathLike[str] | None = None, ignore_external_data: bool | None = None) -> None:
        self.path = path
        self.external_data_dir = external_data_dir
        self.ignore_external_data = bool(ignore_external_data)

    @polygraphy_errors
    def call_impl(self) -> Any:
        from onnx.external_data_helper import load_external_data_for_model, uses_external_data

        path, _ = invoke_if_callable(self.path)
        model = _parity_onnx_from_path(os.fspath(path), self.external_data_dir, self.ignore_external_data)
        if not self.ignore_external_data and any(uses_external_data(t) for t in onnx_util.all_tensors(model)):
            folder = self.external_data_dir if self.external_data_dir is not None else os.path.dirname(os.path.abspath(path))
            load_external_data_for_model(model, os.fspath(folder))
        return model


class OnnxFromBytes(BaseLoader):
    """Parses a serialized ONNX model (bytes or a loader of them)."""

    def __init__(self, serialized_onnx: Any) -> None:
        self._serialized_onnx = serialized_onnx

    def call_impl(self) -> Any:
        import onnx

        data, _ = invoke_if_callable(self._serialized_onnx)
        try:
            return onnx.load_model_from_string(bytes(data))
        except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError and friends: one line
            raise _critical(f"Could not parse the ONNX model from bytes: {exc}") from None


class BytesFromOnnx(BaseLoader):
    """Serializes an ONNX model (a ModelProto or a loader of one)."""

    def __init__(self, model: Any) -> None:
        self._model = model

    def call_impl(self) -> bytes:
        model, _ = invoke_if_callable(self._model)
        return model.SerializeToString()


class GsFromOnnx(BaseLoader):
    """Imports an ONNX model into an ``onnx_graphsurgeon.Graph``."""

    def __init__(self, model: Any) -> None:
        self._model = model

    def call_impl(self) -> Any:
        import onnx_graphsurgeon as gs

        model, _ = invoke_if_callable(self._model)
        return gs.import_onnx(model)


class OnnxFromTfGraph(BaseLoader):
    """Polygraphy converts TensorFlow 1 graphs with tf2onnx; Parity has no TensorFlow backend, so calling this
    raises ``PolygraphyException`` (the name exists so that scripts importing it load)."""

    def __init__(self, graph: Any, opset: int | None = None, optimize: bool | None = None) -> None:
        self._graph, self.opset, self.optimize = graph, opset, optimize

    def call_impl(self) -> Any:
        raise _critical("OnnxFromTfGraph: converting TensorFlow graphs is not supported by parity_polygraphy (no TensorFlow backend)")


class ModifyOutputs(_ModelLoader):
    """Sets the graph outputs: ``outputs`` (names, or ``constants.MARK_ALL`` for every tensor), plus the outputs
    of nodes whose op is in ``mark_types``, minus ``exclude_outputs``. None of them: the model is returned as is."""

    def __init__(
        self,
        model: Any,
        outputs: Sequence[str] | str | None = None,
        exclude_outputs: Sequence[str] | None = None,
        copy: bool | None = None,
        mark_types: Sequence[str] | None = None,
    ) -> None:
        super().__init__(model, copy)
        self.outputs, self.exclude_outputs, self.mark_types = outputs, exclude_outputs, mark_types

    @polygraphy_errors
    def call_impl(self) -> Any:
        model = self.load()
        if self.outputs is None and not self.mark_types and not self.exclude_outputs:
            return model
        if isinstance(self.outputs, str) and self.outputs in _MARK_ALL:
            names: list[str] = ["mark all"]
        else:
            names = list(self.outputs) if self.outputs is not None else [o.name for o in model.graph.output]
            typed = [out for node in model.graph.node if node.op_type in set(self.mark_types or ()) for out in node.output if out]
            names += [n for n in typed if n not in names]
        edited = modify_onnx_outputs(model, names, list(self.exclude_outputs or ()))
        if not self.copy:  # Polygraphy edits the given model in place unless asked for a copy
            model.CopyFrom(edited)
            return model
        return edited


class ConvertToFp16(_ModelLoader):
    """Converts float32 tensors to float16, keeping the model's inputs and outputs float32 (casts at the edges)."""

    def __init__(self, model: Any, copy: bool | None = None) -> None:
        super().__init__(model, copy)

    @polygraphy_errors
    def call_impl(self) -> Any:
        converted, _ = Fp16Converter(self.load(), keep_io_types=True).build()
        return converted


class FoldConstants(_ModelLoader):
    """Folds constants with onnx-graphsurgeon, ``num_passes`` times (default: until the graph stops shrinking),
    running shape inference before each pass when ``do_shape_inference`` (default True)."""

    def __init__(
        self,
        model: Any,
        num_passes: int | None = None,
        do_shape_inference: bool | None = None,
        partitioning: str | None = None,
        fold_shapes: bool | None = None,
        copy: bool | None = None,
        error_ok: bool | None = None,
        size_threshold: int | None = None,
        allow_onnxruntime_shape_inference: bool | None = None,
    ) -> None:
        super().__init__(model, copy)
        if partitioning not in (None, "basic", "recursive"):
            raise _critical(f"FoldConstants: partitioning must be None, 'basic' or 'recursive', got {partitioning!r}")
        self.num_passes = num_passes
        self.do_shape_inference = True if do_shape_inference is None else do_shape_inference
        self.partitioning = partitioning
        self.fold_shapes = True if fold_shapes is None else fold_shapes
        self.error_ok = True if error_ok is None else error_ok
        self.size_threshold = size_threshold
        self.allow_onnxruntime_shape_inference = allow_onnxruntime_shape_inference

    def call_impl(self) -> Any:
        import onnx_graphsurgeon as gs

        model = self.load()
        passes = 0
        while self.num_passes is None or passes < self.num_passes:
            before = onnx_util.get_num_nodes(model)
            if self.do_shape_inference:
                model = infer_shapes(model, allow_onnxruntime=self.allow_onnxruntime_shape_inference)
            graph = gs.import_onnx(model)
            try:
                graph.fold_constants(fold_shapes=self.fold_shapes, partitioning=self.partitioning, error_ok=self.error_ok, size_threshold=self.size_threshold)
            except Exception as exc:  # noqa: BLE001 - error_ok=False: the folder's error, one line
                raise _critical(f"Constant folding failed: {exc}") from None
            model = gs.export_onnx(graph.cleanup(), do_type_check=False)
            passes += 1
            if self.num_passes is None and onnx_util.get_num_nodes(model) == before:
                break
        return model


class SetUpperBound(_ModelLoader):
    """Bounds tensors whose size is data-dependent and unbounded (``onnx_util.get_unbounded_dds_tensors``) by
    inserting ``Min(tensor, bound)``. ``upper_bounds``: one bound for all, or a dict by tensor name where ``""``
    is the default. Expects a folded model with shapes inferred."""

    def __init__(self, model: Any, upper_bounds: int | dict[str, int], copy: bool | None = None) -> None:
        super().__init__(model, copy)
        self.upper_bounds = upper_bounds

    def _bound(self, name: str) -> int | None:
        if isinstance(self.upper_bounds, dict):
            return self.upper_bounds.get(name, self.upper_bounds.get(""))
        return self.upper_bounds

    def call_impl(self) -> Any:
        import numpy as np
        import onnx_graphsurgeon as gs

        graph = gs.import_onnx(self.load())
        tensors = graph.tensors()
        targets = {t.name for t in onnx_util.get_unbounded_dds_tensors(graph)}
        if isinstance(self.upper_bounds, dict):
            named = set(self.upper_bounds) - {""}
            unknown = named - set(tensors)
            if unknown:
                raise _critical(f"The following tensors were not found in the upper bounds dictionary's model: {unknown}")
            if named - targets:
                _warn(f"Tensors {named - targets} do not have unbounded data-dependent shapes; setting their upper bounds anyway")
            targets |= named
        for name in sorted(targets):
            bound, tensor = self._bound(name), tensors[name]
            if bound is None:
                continue
            if len(tensor.inputs) != 1:
                raise _critical(f"SetUpperBound: tensor {name} has no single producer; cannot bound it")
            producer = tensor.inputs[0]
            unbounded = gs.Variable(f"{name}_copy", dtype=tensor.dtype, shape=tensor.shape)
            values = np.array([bound] * len(tensor.shape) if tensor.shape else bound, dtype=np.int64)
            producer.outputs[producer.outputs.index(tensor)] = unbounded
            tensor.inputs.clear()
            graph.nodes.append(gs.Node("Min", inputs=[unbounded, gs.Constant(f"{name}_upper_bound", values)], outputs=[tensor]))
        graph.toposort()
        return gs.export_onnx(graph.cleanup(), do_type_check=False)


class InferShapes(BaseLoader):
    """Runs shape inference on a model (a ModelProto, a path, or a loader of either). ``allow_onnxruntime``:
    try onnxruntime's symbolic shape inference first (it names dynamic dims), falling back to ONNX's. A model
    bigger than ``save_to_disk_threshold_bytes`` (default 2 GiB) is inferred through a temporary file.
    ``error_ok`` (default True): on failure, warn and return the model unchanged."""

    def __init__(
        self,
        model: Any,
        error_ok: bool | None = None,
        external_data_dir: str | os.PathLike[str] | None = None,
        save_to_disk_threshold_bytes: int | None = None,
        allow_onnxruntime: bool | None = None,
    ) -> None:
        self._model = model
        self.error_ok = True if error_ok is None else error_ok
        self.external_data_dir = external_data_dir
        self.save_to_disk_threshold_bytes = _TWO_GIB if save_to_disk_threshold_bytes is None else save_to_disk_threshold_bytes
        self.allow_onnxruntime = bool(allow_onnxruntime)

    def call_impl(self) -> Any:
        import onnx

        source, _ = invoke_if_callable(self._model)
        model = onnx_from_path(source, self.external_data_dir) if isinstance(source, (str, os.PathLike)) else source
        try:
            if self.allow_onnxruntime:
                inferred = _ort_infer(model)
                if inferred is not None:
                    return inferred
            if model.ByteSize() > self.save_to_disk_threshold_bytes:
                return _infer_on_disk(model)
            return onnx.shape_inference.infer_shapes(model, data_prop=True)
        except Exception as exc:  # noqa: BLE001 - onnx's inference errors are many kinds
            if not self.error_ok:
                raise _critical(f"ONNX shape inference failed: {exc}") from None
            _warn(f"ONNX shape inference failed; the model is returned without inferred shapes ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})")
            return model


def _ort_infer(model: Any) -> Any:
    """onnxruntime's symbolic shape inference, or None when it cannot run on this model."""
    try:
        return onnx_models.symbolic_shapes(model)
    except Exception:  # noqa: BLE001 - unsupported ops or opsets: fall back to ONNX's inference
        return None


def _infer_on_disk(model: Any) -> Any:
    """Shape inference through files: protobuf cannot serialize a model past 2 GiB in memory."""
    import onnx

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.onnx")
        onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location="model.onnx.data", size_threshold=1024)
        onnx.shape_inference.infer_shapes_path(path, path, data_prop=True)
        return onnx.load(path)


class ExtractSubgraph(BaseLoader):
    """The subgraph between ``input_metadata`` and ``output_metadata`` (``TensorMetadata``: names, dtypes and
    shapes; a None dtype or shape keeps the tensor's own). ``model``: a ModelProto (shapes are inferred first,
    so cut points get their types) or an onnx-graphsurgeon Graph (a Graph is returned; the given one is not
    modified). ``check_meta`` (default True): warn when an input ends without a dtype or shape, or an output
    without a dtype. A cut that leaves a tensor with no producer that is not an input raises
    ``PolygraphyException`` (Polygraphy logs it and returns an invalid model)."""

    def __init__(self, model: Any, input_metadata: Any = None, output_metadata: Any = None, check_meta: bool | None = None) -> None:
        self._model = model
        self.input_metadata, self.output_metadata = input_metadata, output_metadata
        self.check_meta = True if check_meta is None else check_meta

    def call_impl(self) -> Any:
        import onnx_graphsurgeon as gs

        model, _ = invoke_if_callable(self._model)
        is_graph = isinstance(model, gs.Graph)
        graph = model.copy() if is_graph else gs.import_onnx(infer_shapes(model))
        tensors = graph.tensors()
        if self.input_metadata is not None:
            graph.inputs = self._boundary(tensors, self.input_metadata, "Input")
        if self.output_metadata is not None:
            graph.outputs = self._boundary(tensors, self.output_metadata, "Output")
        graph.cleanup()
        for tensor in graph.tensors().values():
            if isinstance(tensor, gs.Variable) and not tensor.inputs and tensor not in graph.inputs:
                raise _critical(f"ExtractSubgraph: tensor {tensor.name!r} is used by the subgraph but neither produced in it nor one of its inputs")
        return graph if is_graph else gs.export_onnx(graph, do_type_check=False)

    def _boundary(self, tensors: dict[str, Any], meta: Any, kind: str) -> list[Any]:
        import onnx_graphsurgeon as gs

        out = []
        for name, (dtype, shape) in meta.items():
            if name not in tensors:
                raise _critical(f"Tensor: {name} does not exist in the model.")
            tensor = tensors[name]
            if isinstance(tensor, gs.Variable):  # constants keep what they hold
                if dtype is not None:
                    tensor.dtype = onnx_util.numpy_dtype(dtype)
                if shape is not None:
                    tensor.shape = list(shape)
            if kind == "Input":  # a new input is produced by nothing
                tensor.inputs.clear()
            if self.check_meta and kind == "Input" and tensor.shape is None:
                _warn(f"{kind} metadata should include shape, but no shape was provided for tensor: {name}")
            if self.check_meta and tensor.dtype is None:
                _warn(f"{kind} metadata should include data type, but no data type was provided for tensor: {name}")
            out.append(tensor)
        return out


class SaveOnnx(_ModelLoader):
    """Writes the model to ``path`` (folders created) and returns it. ``external_data_path``: keep weights in a
    data file of that name beside the model ("" for the default name); tensors under ``size_threshold`` bytes
    stay inside; ``all_tensors_to_one_file`` (default True). The write is atomic and the written model is
    checked (onnx.checker, a load in onnxruntime)."""

    def __init__(
        self,
        model: Any,
        path: str | os.PathLike[str],
        external_data_path: str | None = None,
        size_threshold: int | None = None,
        all_tensors_to_one_file: bool | None = None,
    ) -> None:
        super().__init__(model)
        self.path = path
        self.external_data_path = external_data_path
        self.size_threshold = size_threshold
        self.all_tensors_to_one_file = True if all_tensors_to_one_file is None else all_tensors_to_one_file

    @polygraphy_errors
    def call_impl(self) -> Any:
        model = self.load()
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        external = ExternalData(
            location=self.external_data_path,
            size_threshold=1024 if self.size_threshold is None else self.size_threshold,
            one_file=self.all_tensors_to_one_file,
        )
        save_model(model, self.path, external=external)
        return model


onnx_from_path = twin(OnnxFromPath)
onnx_from_bytes = twin(OnnxFromBytes)
bytes_from_onnx = twin(BytesFromOnnx)
gs_from_onnx = twin(GsFromOnnx)
onnx_from_tf_graph = twin(OnnxFromTfGraph)
modify_outputs = twin(ModifyOutputs)
convert_to_fp16 = twin(ConvertToFp16)
fold_constants = twin(FoldConstants)
set_upper_bound = twin(SetUpperBound)
infer_shapes = twin(InferShapes)
extract_subgraph = twin(ExtractSubgraph)
save_onnx = twin(SaveOnnx)
