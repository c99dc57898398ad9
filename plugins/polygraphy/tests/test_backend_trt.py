"""parity_polygraphy.backend.trt: CreateNetwork against Parity's behavioural model of TensorRT (NOT TensorRT),
for each modelled version; and a script loader building a network through func.extend."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "trt" / "tests"))  # trt_model lives with parity-trt's tests
from parity_polygraphy.backend.common import invoke_from_script  # noqa: E402
from parity_polygraphy.backend.trt import CreateNetwork, Profile, create_network, network_from_onnx_bytes  # noqa: E402
from parity_polygraphy.exception import PolygraphyException  # noqa: E402
from trt_model.install import install, uninstall  # noqa: E402
from trt_model.manifest import versions  # noqa: E402


@pytest.fixture(params=versions())
def trt(request, monkeypatch):
    yield install(monkeypatch, request.param)
    uninstall()


def test_create_network_gives_an_empty_network_and_its_builder(trt):
    builder, network = CreateNetwork()()
    assert isinstance(builder, trt.Builder) and isinstance(network, trt.INetworkDefinition)
    assert network.num_layers == 0
    x = network.add_input("x", trt.float32, (2, 2))
    network.mark_output(network.add_identity(x).get_output(0))
    assert network.num_layers == 1 and network.num_outputs == 1
    _, typed = create_network(strongly_typed=hasattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED"))
    assert typed.num_layers == 0


def test_a_script_extends_create_network(trt, tmp_path):
    script = tmp_path / "net.py"
    script.write_text(textwrap.dedent("""
        from parity_polygraphy import func
        from parity_polygraphy.backend.trt import CreateNetwork
        import tensorrt as trt

        @func.extend(CreateNetwork())
        def load_network(builder, network):
            inp = network.add_input("input", dtype=trt.float32, shape=(1, 3))
            network.mark_output(network.add_identity(inp).get_output(0))
    """))
    builder, network = invoke_from_script(str(script), "load_network")
    assert network.num_layers == 1 and network.get_layer(0).type == trt.LayerType.IDENTITY


def _dynamic_relu() -> bytes:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x_in"], ["y"])],
        "relu",
        [helper.make_tensor_value_info("x_in", TensorProto.FLOAT, ["n", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    return model.SerializeToString()


def test_profile_from_a_parsed_onnx_network(trt):
    builder, network, parser = network_from_onnx_bytes(_dynamic_relu)
    assert network.num_inputs == 1 and tuple(network.get_input(0).shape) == (-1, 3)

    filled = Profile().fill_defaults(network)  # the dynamic dim becomes 1
    assert tuple(filled["x_in"]) == ((1, 3), (1, 3), (1, 3))
    given = Profile().add("x_*", min=(1, 3), opt=(4, 3), max=(8, 3))
    assert given.fill_defaults(network) is given and list(given) == ["x_*"]  # a wildcard covers the input
    shapes = given.to_trt(builder, network).get_shape("x_in")
    assert [tuple(s) for s in shapes] == [(1, 3), (4, 3), (8, 3)]

    with pytest.raises(PolygraphyException, match="Invalid inputs"):
        Profile().add("nope", (1, 3), (1, 3), (1, 3)).to_trt(builder, network)
    with pytest.raises(PolygraphyException, match="does not have shapes set"):
        Profile()["x_in"]
    with pytest.raises(PolygraphyException, match="Failed to parse ONNX model"):
        network_from_onnx_bytes(b"garbage")
