"""Reading torch.onnx's node metadata without torch: the fx node a node records, the module it ran in, and which
ONNX values are the values of which fx nodes (never matched by name alone)."""

from __future__ import annotations

from parity_torch.origins import FX_NODE, NAME_SCOPES, FxNode, describe, match_values, module_of, node_origins, recorded_node

CONV = "%conv2d_2 : [num_users=1] = call_function[target=torch.ops.aten.conv2d.default](args = (%relu_1, %p_w, %p_b, [1, 1], [1, 1]), kwargs = {})"
BN_OP = "torch.ops.aten._native_batch_norm_legit_no_training.default"
BN = f"%_native_batch_norm_legit_no_training : [num_users=1] = call_function[target={BN_OP}](args = (%conv2d_1,), kwargs = {{}})"
GETITEM = "<built-in function getitem>"


def meta(fx: str, scopes: str = "['', 'layer1', 'layer1.0', 'layer1.0.conv2', 'conv2d_2']", classes: str = "") -> dict[str, str]:
    found = {FX_NODE: fx, NAME_SCOPES: scopes}
    if classes:
        found["pkg.torch.onnx.class_hierarchy"] = classes
    return found


def test_recorded_node_reads_the_name_and_target():
    assert recorded_node(CONV) == ("conv2d_2", "torch.ops.aten.conv2d.default")
    assert recorded_node("not an fx node") is None and recorded_node("") is None


def test_module_of_the_path_and_class():
    classes = "['__main__.Cnn', 'torch.nn.modules.container.Sequential', '__main__.Block', 'torch.nn.modules.conv.Conv2d', 'aten.conv2d.default']"
    assert module_of(meta(CONV, classes=classes)) == ("layer1.0.conv2", "Conv2d")
    assert describe(meta(CONV, classes=classes)) == "PyTorch module 'layer1.0.conv2' (Conv2d)"
    root = meta("%relu : ...", "['', 'relu']", "['__main__.Cnn', 'aten.relu.default']")
    assert module_of(root) == ("", "Cnn") and describe(root) == "PyTorch root module (Cnn)"
    assert module_of({}) is None and describe({"other": "x"}) is None
    assert node_origins({"a": meta(CONV), "b": {"other": "x"}}) == {"a": "PyTorch module 'layer1.0.conv2'"}


def test_values_are_matched_only_where_the_metadata_vouches():
    program = {
        "conv2d_2": FxNode("torch.ops.aten.conv2d.default"),
        "_native_batch_norm_legit_no_training": FxNode(BN_OP),
        "getitem": FxNode(GETITEM, "_native_batch_norm_legit_no_training"),
        "relu_1": FxNode("torch.ops.aten.relu.default"),
    }
    nodes = [
        (["conv2d_2"], meta(CONV)),  # the node's own value
        (["getitem"], meta(BN)),  # a BatchNormalization folded into a Conv: the item of the node it records
        (["val_3", "relu_1"], meta(CONV)),  # a name the program has, but another node's translation made it: no
        (["relu_1"], {}),  # no metadata: no
    ]
    assert match_values(nodes, program) == {"conv2d_2": "conv2d_2", "getitem": "getitem"}
    other_op = {**program, "conv2d_2": FxNode("torch.ops.aten.convolution.default")}  # same name, another op: not the same tensor
    assert "conv2d_2" not in match_values(nodes, other_op)
