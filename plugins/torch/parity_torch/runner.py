"""``TorchRunner``: a torch.export program or a TorchScript module behind Parity's runner interface.

Final outputs are named as the program's graph signature names them (``ep.graph_signature.user_outputs``: the
names torch.onnx's dynamo exporter gives the ONNX outputs); a TorchScript module's as ``output_0``, ``output_1``...
(a dict's by its keys), or as the ONNX model's outputs when the runner is matched with one and the counts agree
(an exporter keeps the order forward returns them in).

Intermediate tensors (``outputs``: names or ``mark all``) are recorded by a ``torch.fx.Interpreter`` walking the
program's graph: every ``call_function`` node whose value is a tensor. Against an ONNX model exported from the
program (``onnx_model``), the graph is first decomposed as torch.onnx decomposes it before translating, whose fx
node names the ONNX values carry, and only the tensors :func:`parity_torch.origins.match_values` matches through
the exporter's node metadata are returned, under their ONNX names; those on either side without a counterpart are
listed in one warning, never guessed.
"""

from __future__ import annotations

import contextlib
import functools
import operator
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from parity.api import BackendError, BaseRunner, TensorMeta, UsageError, did_you_mean, invoke_if_callable, names_preview, one_line, onnx_models, warn
from parity_torch.options import MARK_ALL
from parity_torch.origins import FxNode, has_torch_metadata, match_values, target_of
from parity_torch.programs import Program, import_torch, load_program, quiet

_AUTOCAST = {"fp16": "float16", "bf16": "bfloat16"}


class ProgramFromPath:
    """Lazy loader of a :class:`parity_torch.programs.Program` (a ``.pt2`` or a TorchScript file), on the CPU."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)

    def __call__(self) -> Program:
        return load_program(self.path)


class TorchRunner(BaseRunner):
    """``TorchRunner(ProgramFromPath("model.pt2"), device="cuda", dtype="fp16", outputs="mark all",
    onnx_model="model.onnx")``: see the module's docstring."""

    prefix = "torch"

    def __init__(
        self,
        program: Program | Callable[[], Program] | str,
        device: str = "cpu",
        dtype: str = "fp32",
        outputs: Sequence[str] | str | None = None,
        onnx_model: str | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(name)
        self._source = ProgramFromPath(program) if isinstance(program, (str, os.PathLike)) else program
        self.device, self.dtype, self.outputs, self.onnx_model = device, dtype, outputs, onnx_model
        self._torch: Any = None
        self._program: Program | None = None
        self._module: Any = None
        self._record: dict[str, str] = {}  # returned name -> fx node name, for marked tensors
        self._names: list[str | None] = []  # each flat output's name (None: not a tensor)
        self._fed: set[str] = set()  # inputs of the ONNX model the program computes itself (a cut model's boundary)
        self._traced_on: str | None = None  # the device type the program's weights were exported on

    # --- loading ----------------------------------------------------------------------------------------
    def activate_impl(self) -> None:
        torch = self._torch = import_torch()
        self._check_device(torch)
        program, _ = invoke_if_callable(self._source)
        self._program = program
        if self.outputs and not program.exported:
            raise UsageError(f"{self.name}: --torch-outputs needs a torch.export program (.pt2); {program.path} is TorchScript, whose graph Parity does not walk")
        with quiet():
            if program.exported:
                self._traced_on = _traced_device(program.program)
                ep = self._layerwise(program)
                if self.device != "cpu":
                    from torch.export.passes import move_to_device_pass

                    ep = move_to_device_pass(ep, self.device)
                self._module = ep.module()
                self._names = list(_user_outputs(ep))
            else:
                self._module = program.program.to(self.device).eval()
                self._names = self._onnx_output_names()

    def _check_device(self, torch: Any) -> None:
        if self.device == "cpu":
            return
        if not torch.cuda.is_available():
            raise UsageError(f"--torch-device {self.device}: PyTorch sees no CUDA device here (torch.cuda.is_available() is False; torch {torch.__version__})")
        index = int(self.device.partition(":")[2] or 0)
        if index >= torch.cuda.device_count():
            raise UsageError(f"--torch-device {self.device}: PyTorch sees {torch.cuda.device_count()} CUDA device(s), cuda:0 to cuda:{torch.cuda.device_count() - 1}")

    def _onnx_graph(self) -> Any:
        return onnx_models.load(self.onnx_model, load_external_data=False, ignore_external_data=True) if self.onnx_model else None

    def _onnx_output_names(self) -> list[str | None]:
        proto = self._onnx_graph()
        return [o.name for o in proto.graph.output] if proto is not None else []

    def _layerwise(self, program: Program) -> Any:
        """The program to run, and the intermediate tensors to record from it (``self._record``)."""
        ep = program.program
        proto = self._onnx_graph()
        if proto is not None:
            self._fed = {i.name for i in proto.graph.input} - set(program.inputs)
            wanted = [o.name for o in proto.graph.output]
            if not self.outputs and set(wanted) <= set(program.outputs):
                return ep  # the program's own outputs: run it as saved
            return self._matched(ep, proto, wanted)
        if not self.outputs:
            return ep
        module = ep.module()
        nodes = _tensor_nodes(self._torch, module)
        self._record = {name: name for name in self._chosen(nodes, "the program")}
        return ep

    def _matched(self, ep: Any, proto: Any, wanted: list[str]) -> Any:
        """Decompose as torch.onnx does and match the ONNX model's values (see the module's docstring): the
        ONNX model's graph outputs (a tool such as debug localize marks tensors by cutting the model) and
        ``--torch-outputs``."""
        nodes = [(list(n.output), {p.key: p.value for p in n.metadata_props}) for n in proto.graph.node]
        if not has_torch_metadata(nodes):
            flag = "--torch-outputs" if self.outputs else "--torch"
            raise UsageError(
                f"{flag}: {self.onnx_model} records no PyTorch origin in its nodes' metadata, so no tensor can be matched; "
                "export it with torch.onnx.export(..., dynamo=True), or run the program alone (parity run model.pt2 --torch ...)"
            )
        decomposed = exporter_decomposition(ep)
        if decomposed is None:
            warn(
                f"{self.name}: torch.onnx's decomposition is not available here (pip install onnxscript): the program is matched as saved, "
                "so the outputs of decomposed ops have no counterpart"
            )
            decomposed = ep
        module = decomposed.module()
        program = {n.name: _fx_node(n) for n in module.graph.nodes if n.op == "call_function"}
        matched = match_values(nodes, program)
        chosen = self._chosen(list(matched), self.onnx_model) if self.outputs else []
        self._record = {name: matched[name] for name in dict.fromkeys([*(w for w in wanted if w in matched), *chosen])}
        if self.outputs == MARK_ALL:
            values = [v for outputs, _ in nodes for v in outputs if v]
            counterparts = set(matched.values())
            without = [v for v in values if v not in matched]
            unmatched = [t for t in _tensor_nodes(self._torch, module) if t not in counterparts]
            if without or unmatched:
                warn(
                    f"{self.name}: {len(matched)} tensors matched through {os.path.basename(self.onnx_model or '')}'s metadata; not compared: "
                    f"{len(unmatched)} PyTorch tensors without an ONNX counterpart ({names_preview(unmatched) or 'none'}), "
                    f"{len(without)} ONNX tensors without a PyTorch one ({names_preview(without) or 'none'})"
                )
        return decomposed

    def _chosen(self, known: list[str], where: str | None) -> list[str]:
        if self.outputs == MARK_ALL:
            return known
        missing = [n for n in self.outputs or () if n not in known]
        if missing:
            name = missing[0]
            raise UsageError(f"--torch-outputs: no tensor '{name}' with a counterpart in {where}{did_you_mean(name, known)}; known: {names_preview(known)}")
        return list(self.outputs or ())

    def deactivate_impl(self) -> None:
        self._module = self._program = None

    def get_input_metadata_impl(self) -> dict[str, TensorMeta]:
        assert self._program is not None
        return self._program.inputs

    # --- inference ------------------------------------------------------------------------------------
    def infer(self, feed_dict: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """As every runner's, except that values fed for tensors of a cut ONNX model (debug localize's segments feed
        the boundary tensors earlier segments computed) are dropped: the program computes them from its inputs."""
        if self._fed:
            feed_dict = {name: value for name, value in feed_dict.items() if name not in self._fed}
        return super().infer(feed_dict)

    def infer_impl(self, feed_dict: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        torch = self._torch
        assert self._program is not None
        args = [torch.from_numpy(np.ascontiguousarray(feed_dict[name])).to(self.device) for name in self._program.inputs]
        kept: dict[str, Any] = {}
        try:
            with torch.inference_mode(), self._autocast():
                # marked tensors: node by node; else the program's own forward (its generated code: no per-node Python)
                flat = _run_recording(torch, self._module, args, set(self._record.values()), kept) if self._record else torch.utils._pytree.tree_leaves(self._call(args))
                if self.device != "cpu":
                    torch.cuda.synchronize(self.device)  # the kernels are done before the clock stops (the copies below wait too)
        except (UsageError, BackendError):
            raise
        except Exception as exc:  # noqa: BLE001 - torch raises anything: shape guards, kernels, device errors
            hint = ""
            if self._traced_on and self._traced_on != self.device.partition(":")[0]:
                hint = f" (the program was exported on {self._traced_on}, and torch.export keeps the layouts it traced there: export it on {self.device})"
            raise BackendError(f"{self.name}: inference failed: {one_line(str(exc), 300) or type(exc).__name__}{hint}") from None
        outputs = {name: _numpy(value) for name, value in zip(self._output_names(len(flat)), flat) if name and isinstance(value, torch.Tensor)}
        by_node = {node: name for name, node in self._record.items()}
        for node, value in kept.items():
            outputs.setdefault(by_node[node], _numpy(value))
        return outputs

    def _call(self, args: list[Any]) -> Any:
        program = self._program
        assert program is not None
        if program.exported:
            spec = program.program.call_spec.in_spec
            if spec is not None:
                positional, keywords = self._torch.utils._pytree.tree_unflatten(args, spec)
                return self._module(*positional, **keywords)
        return self._module(*args)

    def _output_names(self, count: int) -> list[str | None]:
        names = self._names
        if len(names) == count:
            return names
        return [f"output_{i}" for i in range(count)]

    def _autocast(self) -> Any:
        if self.dtype == "fp32":
            return contextlib.nullcontext()
        return self._torch.autocast(device_type=self.device.partition(":")[0], dtype=getattr(self._torch, _AUTOCAST[self.dtype]))


def _traced_device(ep: Any) -> str | None:
    """The device type of an exported program's weights: where it was traced (its views and strides are that
    device's: a CPU trace of an attention block fails a view on CUDA)."""
    for value in ep.state_dict.values():
        device = getattr(value, "device", None)
        if device is not None:
            return str(device.type)
    return None


def _numpy(value: Any) -> np.ndarray:
    """A tensor as a NumPy array on the host; bfloat16 (and other types NumPy lacks) as float32, exactly."""
    tensor = value.detach().to("cpu")
    try:
        return tensor.numpy()
    except TypeError:
        return tensor.float().numpy()


def _tensor_nodes(torch: Any, module: Any) -> list[str]:
    """The names of ``module``'s op nodes whose value is a tensor (what --torch-outputs may mark)."""
    return [n.name for n in module.graph.nodes if n.op == "call_function" and isinstance(n.meta.get("val"), torch.Tensor)]


def _fx_node(node: Any) -> FxNode:
    source = node.args[0].name if node.target is operator.getitem and node.args and hasattr(node.args[0], "name") else None
    return FxNode(target_of(node.format_node()) or str(node.target), source)


def _user_outputs(ep: Any) -> list[str | None]:
    """Each flat user output's name (the graph signature's), None where it is not a tensor."""
    out = []
    for spec in ep.graph_signature.output_specs:
        if str(spec.kind).endswith("USER_OUTPUT"):
            out.append(getattr(spec.arg, "name", None) if type(spec.arg).__name__ == "TensorArgument" else None)
    return out


def _run_recording(torch: Any, module: Any, args: list[Any], wanted: set[str], kept: dict[str, Any]) -> list[Any]:
    """Run ``module``'s graph node by node (torch.fx.Interpreter), keeping the tensor values of ``wanted`` nodes."""

    class Recorder(torch.fx.Interpreter):
        def run_node(self, node: Any) -> Any:
            value = super().run_node(node)
            if node.name in wanted and isinstance(value, torch.Tensor):
                kept[node.name] = value
            return value

    result = Recorder(module).run(*args)
    return list(result) if isinstance(result, (list, tuple)) else [result]


def exporter_decomposition(ep: Any) -> Any | None:
    """``ep`` decomposed as ``torch.onnx.export(..., dynamo=True)`` decomposes it before translating (ops without an
    ONNX implementation become their aten decompositions), so fx node names are those the ONNX values carry. torch
    offers this step only inside its exporter (``torch.onnx._internal``); None where that is missing or fails."""
    try:
        from torch.onnx._internal.exporter import _core
    except Exception:  # noqa: BLE001 - another torch version, or onnxscript not installed
        return None
    try:
        with quiet():
            return _core._prepare_exported_program_for_export(ep, registry=_onnx_registry())
    except Exception:  # noqa: BLE001 - the private API changed: match the program as saved
        return None


@functools.lru_cache(maxsize=1)
def _onnx_registry() -> Any:
    """torch.onnx's table of the ops it translates (1.3 s to build): once per process, for every runner that
    matches (debug localize builds one per check)."""
    from torch.onnx._internal.exporter import _registration

    return _registration.ONNXRegistry.from_torchlib()
