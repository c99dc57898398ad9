"""``polygraphy.tools.sparse``: ``SparsityPruner``, 2:4 structured sparsity of an ONNX model's weights.

A weight is a candidate when it feeds (directly, or through QuantizeLinear/DequantizeLinear/Cast, or a Transpose
whose ``perm`` moves the axis) the reduction axis of a MatMul (A: axis 1, B: axis 0), a Gemm (by ``transA``/
``transB``) or a Conv (the weight's input-channel axis 1), is float32, float16 or bfloat16, and that axis has a
multiple of 4 elements. Along that axis each run of 4 values is a group: ``check()`` puts the weights whose every
group has at least 2 zeros in ``sparse_tensors``; ``prune()`` returns a copy of the model where the 2 smallest
magnitudes of each group (the first ones, on a tie) are zero. The model given is never modified.
The walk and the arithmetic are ``parity_surgeon.api.sparsity``'s (``parity surgeon prune``); through a
Transpose the weight's axis is ``perm[axis]`` (Polygraphy 0.53.6 takes ``perm.index(axis)``: the same for a swap).
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

from parity_surgeon.api import sparsity  # the pruning of ``parity surgeon prune``: one implementation for both

from parity_polygraphy.logger import G_LOGGER

PruneInfo = namedtuple("PruneInfo", ["name", "axis"])


class SparsityPruner:
    """``SparsityPruner(model)``: ``check()`` fills ``sparse_tensors`` (the names of the candidate weights that
    are already 2:4 sparse); ``prune(weights_skip=...)`` returns the pruned model (a new ``onnx.ModelProto``)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.g = model.graph
        self.w_name2obj = {t.name: t for t in self.g.initializer}
        self.tname2producer = {out: node for node in self.g.node for out in node.output}
        self.prune_infos: dict[str, PruneInfo] = {}
        self.sparse_tensors: set[str] = set()
        self.weights_skip: set[str] = set()

    def _walk_nodes(self) -> list[PruneInfo]:
        import onnx

        self.prune_infos = {name: PruneInfo(name, axis) for name, axis in sparsity.candidates(self.model).items()}
        G_LOGGER.verbose(f"Collected {len(self.prune_infos)} weights candidates.")
        eligible = []
        for info in self.prune_infos.values():
            tensor = self.w_name2obj[info.name]
            if tensor.name in self.weights_skip:
                G_LOGGER.warning(f"Skipping tensor: {tensor.name} since it was marked to skip pruning")
            elif tensor.data_type not in (sparsity.FLOAT, sparsity.FLOAT16, sparsity.BFLOAT16):
                G_LOGGER.warning(f"Skipping tensor: {tensor.name} due to unsupported type: {onnx.helper.tensor_dtype_to_string(tensor.data_type)}")
            elif tensor.data_location == onnx.TensorProto.EXTERNAL:
                G_LOGGER.warning(f"Skipping tensor: {tensor.name}: its data is in an external file that was not loaded")
            elif not sparsity.holds_data(tensor):
                G_LOGGER.warning(f"Skipping tensor: {tensor.name}: it holds no data for its {list(tensor.dims)} (weights stripped?)")
            elif info.axis >= len(tensor.dims) or tensor.dims[info.axis] % 4:
                G_LOGGER.verbose(f"Skipping {tensor.name}: axis {info.axis} of {list(tensor.dims)} is not a multiple of 4")
            else:
                eligible.append(info)
        G_LOGGER.info(f"Found: {len(eligible)} weight tensor(s) eligible for pruning.")
        return eligible

    def process(self, check: bool) -> Any:
        """``check``: fill ``sparse_tensors`` and return None; else return the pruned model."""
        infos = self._walk_nodes()
        if check:
            G_LOGGER.start(f"Checking the sparsity pattern of {len(infos)} tensors.")
            for info in infos:
                tensor = self.w_name2obj[info.name]
                if sparsity.is_sparse(sparsity.values(tensor), tensor.dims, info.axis, tensor.data_type):
                    G_LOGGER.info(f"Found sparse tensor: {info.name}")
                    self.sparse_tensors.add(info.name)
                else:
                    G_LOGGER.warning(f"Found non-sparse tensor: {info.name}")
            G_LOGGER.finish(f"Finished checking {len(infos)} tensors.")
            return None

        import onnx

        G_LOGGER.start(f"Pruning {len(infos)} tensors.")
        pruned = {info.name: sparsity.pruned_tensor(self.w_name2obj[info.name], info.axis) for info in infos}
        G_LOGGER.finish(f"Finished pruning {len(infos)} tensors.")
        model = onnx.ModelProto()
        model.CopyFrom(self.model)
        for index, tensor in enumerate(model.graph.initializer):
            if tensor.name in pruned:
                model.graph.initializer[index].CopyFrom(pruned[tensor.name])
        return model

    def prune(self, weights_skip: set[str] | None = None) -> Any:
        """The model with each eligible weight (not named in ``weights_skip``) pruned to 2:4 sparsity."""
        self.weights_skip = set(weights_skip or ())
        return self.process(False)

    def check(self) -> None:
        """Fill ``sparse_tensors`` with the eligible weights that are already 2:4 sparse."""
        self.process(True)


__all__ = ["PruneInfo", "SparsityPruner"]
