"""``parity inspect model --format polygraphy`` (issue 29): Polygraphy 0.53.6's exact text, for scripts that parse
it, on models this test builds and corpus models. Parity's own layout stays the default. Where Polygraphy is
installed (a development dependency) its own ``inspect model`` text is the oracle, byte for byte."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

CORPUS = Path("/root/.cache/parity-corpus/models")


def _save(model: onnx.ModelProto, path: Path, **save: object) -> Path:
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path), **save)
    ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])  # a real, runnable model
    return path


def _model(graph: onnx.GraphProto, opset: int = 17) -> onnx.ModelProto:
    return helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", opset)])


def conv_model(path: Path) -> Path:
    """x[1,3,'h',4] -> Conv(w, b) -> Cast(to=float16) -> y; a Constant node holds a tensor attribute."""
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3, 1, 1), "w")
    b = numpy_helper.from_array(np.array([0.5, -0.5], np.float32), "b")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", kernel_shape=[1, 1], pads=[0, 0, 0, 0]),
        helper.make_node("Constant", [], ["k"], name="const", value=numpy_helper.from_array(np.full((2, 2), 2.0, np.float32))),
        helper.make_node("Cast", ["c"], ["y"], name="cast", to=TensorProto.FLOAT16),
    ]
    graph = helper.make_graph(
        nodes, "convnet", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "h", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [1, 2, "h", 4]), helper.make_tensor_value_info("k", TensorProto.FLOAT, [2, 2])],
        [w, b],
    )
    return _save(_model(graph), path)


def if_model(path: Path) -> Path:
    """cond, x[2] -> If(then: x + 1, else: Identity(x)) -> y; subgraphs opened under the attribute."""
    one = numpy_helper.from_array(np.ones(2, np.float32), "one")
    then = helper.make_graph([helper.make_node("Add", ["x", "one"], ["t"])], "then", [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2])], [one])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [], [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2])])
    graph = helper.make_graph(
        [helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=then, else_branch=other)], "branchy",
        [helper.make_tensor_value_info("cond", TensorProto.BOOL, []), helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    return _save(_model(graph), path)


SHOWS = [[], ["layers"], ["layers", "attrs"], ["layers", "attrs", "weights"], ["weights"]]


def _polygraphy_text(path: Path, show: list[str], *extra: str) -> str:
    """What Polygraphy 0.53.6 itself prints (its colour warning aside)."""
    exe = Path(sys.executable).with_name("polygraphy")
    if not exe.exists():
        pytest.skip("Polygraphy (a development dependency) is not installed")
    args = [str(exe), "inspect", "model", str(path), *(["--show", *show] if show else []), *extra]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, check=True, cwd=path.parent)
    return "\n".join(line for line in done.stdout.splitlines() if "'colored' module" not in line)


@pytest.mark.parametrize("show", SHOWS, ids=lambda s: "-".join(s) or "none")
@pytest.mark.parametrize("build", [conv_model, if_model])
def test_layout_is_polygraphys_byte_for_byte(main, tmp_path, build, show):
    model = build(tmp_path / "m.onnx")
    code, out, err = main("inspect", "model", str(model), "--format", "polygraphy", *(["--show", *show] if show else []))
    assert code == 0, err
    assert out.rstrip("\n") == _polygraphy_text(model, show)


@pytest.mark.parametrize("name", ["ppocr_cls.onnx", "silero_vad.onnx"])
def test_corpus_models_match_polygraphy(main, name):
    """silero_vad: If subgraphs in If subgraphs, tensors of undefined type (Polygraphy warns and prints dtype=0)."""
    model = CORPUS / name
    if not model.exists():
        pytest.skip(f"corpus model {name} is not in {CORPUS}")
    code, out, err = main("inspect", "model", str(model), "--format", "polygraphy", "--show", "layers", "attrs", "weights")
    assert code == 0, err
    assert out.rstrip("\n") == _polygraphy_text(model, ["layers", "attrs", "weights"])


def test_what_the_layout_shows(main, tmp_path):
    """Without the oracle: the sections, tensor entries, node lines and weights a parsing script relies on."""
    model = conv_model(tmp_path / "m.onnx")
    code, out, _ = main("inspect", "model", str(model), "--format", "polygraphy", "--show", "layers", "attrs", "weights")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"[I] Loading model: {model}"
    assert lines[1] == "[I] ==== ONNX Model ===="
    assert lines[2] == "    Name: convnet | ONNX Opset: 17"
    assert "    {x [dtype=float32, shape=(1, 3, 'h', 4)]}" in lines
    assert "    ---- 2 Initializer(s) ----" in lines
    assert "    Initializer | b [dtype=float32, shape=[2]] | Values:" in lines
    assert "        [ 0.5 -0.5]" in lines
    assert "    Node 0    | conv [Op: Conv]" in lines
    assert "        {x [dtype=float32, shape=(1, 3, 'h', 4)]," in lines
    assert "         Initializer | w [dtype=float32, shape=(2, 3, 1, 1)]," in lines
    assert "         -> {c}" in lines  # no value_info: the name alone
    assert "        cast.to = float16" in lines  # a type attribute by name
    assert "        conv.kernel_shape = [1, 1]" in lines
    assert "        const.value = Tensor: [dtype=float32, shape=[2, 2]] | Values:" in lines


def test_parity_layout_stays_the_default(main, tmp_path, monkeypatch):
    monkeypatch.delenv("PARITY_INSPECT_FORMAT", raising=False)
    model = conv_model(tmp_path / "m.onnx")
    code, out, _ = main("inspect", "model", str(model))
    assert code == 0 and out.startswith(f"ONNX model: {model}") and "====" not in out
    code, same, _ = main("inspect", "model", str(model), "--format", "parity")
    assert code == 0 and same == out
    monkeypatch.setenv("PARITY_INSPECT_FORMAT", "polygraphy")
    code, out, _ = main("inspect", "model", str(model))
    assert code == 0 and out.splitlines()[1] == "[I] ==== ONNX Model ===="


def test_run_under_the_name_polygraphy_prints_polygraphys_layout(tmp_path):
    """A script installed in Polygraphy's place (parity's entry point under the name 'polygraphy'): scripts that
    call and parse ``polygraphy inspect model`` keep working unchanged."""
    model = conv_model(tmp_path / "m.onnx")
    shim = tmp_path / "bin" / "polygraphy"
    shim.parent.mkdir()
    shim.write_text(f"#!{sys.executable}\nimport sys\nfrom parity.cli import main\nsys.exit(main())\n")
    shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "PARITY_INSPECT_FORMAT"}
    done = subprocess.run([str(shim), "inspect", "model", str(model)], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1] == "[I] ==== ONNX Model ===="
    done = subprocess.run([str(shim), "inspect", "model", str(model), "--format", "parity"], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0 and done.stdout.startswith("ONNX model:")
    # a model kind without Polygraphy's layout: only a default, so Parity's layout, not a refusal
    plugin, toy = tmp_path / "toy_plugin.py", tmp_path / "m.toy"
    plugin.write_text(PLUGIN)
    toy.write_text("toy")
    done = subprocess.run([str(shim), "--plugin", str(plugin), "inspect", "model", str(toy)], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0 and done.stdout.strip() == "a toy model", done.stderr


def test_external_weights_unread_with_ignore_external_data(main, tmp_path):
    """--ignore-external-data: each external weight prints Polygraphy's error line and value placeholder; without
    it the values are read from the data file."""
    inits = [numpy_helper.from_array(np.full((1, 1200), v, np.float32), n) for n, v in (("a", 1.0), ("b", 2.0))]
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["c"]), helper.make_node("Add", ["x", "c"], ["y"])], "ext",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1200])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1200])], inits,
    )
    model = _save(_model(graph), tmp_path / "ext.onnx", save_as_external_data=True, location="ext.data", size_threshold=0)
    code, out, err = main("inspect", "model", str(model), "--format", "polygraphy", "--show", "weights", "--ignore-external-data")
    assert code == 0, err
    lines = out.splitlines()
    assert lines.count("[E] Failed to load weights.") == 2
    assert lines.count("        <error: failed to load weights>") == 2
    assert lines.index("[I] ==== ONNX Model ====") > max(i for i, line in enumerate(lines) if line.startswith("[E]"))
    code, out, err = main("inspect", "model", str(model), "--format", "polygraphy", "--show", "weights")
    assert code == 0, err
    assert "[E]" not in out and "<error" not in out and "        [[2. 2. 2. ... 2. 2. 2.]]" in out.splitlines()


PLUGIN = """
from parity import hookimpl
from parity.api import ModelKind, TensorMeta

@hookimpl
def parity_register_model_kinds(register):
    register(ModelKind("toy", (".toy",), lambda path: {"x": TensorMeta(None, (1,))}, lambda path, show, options: "a toy model"))
"""


def test_refused_where_polygraphys_layout_is_not_available(main, tmp_path):
    """A model kind whose plugin has no Polygraphy layout (its describe takes no ``layout=``) is refused in one
    line (exit 2), never printed in Parity's layout under --format polygraphy."""
    plugin = tmp_path / "toy_plugin.py"
    plugin.write_text(PLUGIN)
    model = tmp_path / "m.toy"
    model.write_text("toy")
    code, out, err = main("--plugin", str(plugin), "inspect", "model", str(model), "--format", "polygraphy")
    assert code == 2 and out == "" and "Polygraphy's layout is not available for toy" in err and len(err.strip().splitlines()) == 1
    code, _, err = main("inspect", "model", str(model), "--format", "nope")
    assert code == 2 and "nope" in err


def test_convert_to_is_display_as(main, tmp_path):
    """Polygraphy's --convert-to is --display-as under its other name: the same choices, the same refusal."""
    model = conv_model(tmp_path / "m.onnx")
    code, plain, _ = main("inspect", "model", str(model))
    code2, same, _ = main("inspect", "model", str(model), "--convert-to", "onnx")
    assert code == code2 == 0 and same == plain
    code, out, err = main("inspect", "model", str(model), "--convert-to", "nope")
    assert code == 2 and out == "" and "no installed plugin reads ONNX models as 'nope'" in err


# ---- --visual, --save-visual, --visual-port: tested without a browser -----------------------------------------------
def _page_data(text: str) -> dict:
    import json
    import re

    found = re.search(r'<script id="data" type="application/json">(.*?)</script>', text, re.S)
    assert found, "the page embeds its graph as JSON"
    return json.loads(found.group(1))


def test_save_visual_writes_one_self_contained_page(main, tmp_path):
    model = conv_model(tmp_path / "m.onnx")
    before = sorted(p.name for p in tmp_path.iterdir())
    code, out, err = main("inspect", "model", str(model), "--save-visual", str(tmp_path / "graph.html"))
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*before, "graph.html"])  # no stray temp file
    text = (tmp_path / "graph.html").read_text()
    assert "<script src" not in text and "cdn" not in text.lower()  # works offline
    data = _page_data(text)
    labels = [(n["kind"], n["label"]) for n in data["nodes"]]
    assert labels == [("input", "x"), ("op", "Conv"), ("op", "Constant"), ("op", "Cast"), ("output", "y"), ("output", "k")]
    names = [n["label"] for n in data["nodes"]]
    assert [(names[s], names[t], tensor) for s, t, tensor in data["edges"]] == [
        ("x", "Conv", "x"), ("Conv", "Cast", "c"), ("Cast", "y", "y"), ("Constant", "k", "k")]
    layers = {n["label"]: n["layer"] for n in data["nodes"]}
    assert layers["x"] < layers["Conv"] < layers["Cast"] < layers["y"]
    conv = data["nodes"][1]["details"]
    assert "Name: conv" in conv and "  Initializer | w [dtype=float32, shape=(2, 3, 1, 1)]" in conv and "  kernel_shape = [1, 1]" in conv
    assert f"Viewer page saved to {tmp_path / 'graph.html'}" in out


def test_visual_serves_the_page_headless_until_interrupted(tmp_path):
    """No display: no browser is started; the address and how to forward the port are printed, the page is
    served on 127.0.0.1, and Ctrl+C ends the command with exit 0."""
    import signal
    import urllib.request

    model = conv_model(tmp_path / "m.onnx")
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    # Ctrl+C's default action, whatever this test inherited: a shell's background job (`pytest ... &`) starts with
    # SIGINT ignored, and Python then leaves it ignored in the child, which would serve on after the signal
    proc = subprocess.Popen([sys.executable, "-m", "parity", "inspect", "model", str(model), "--visual", "--visual-port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        first = proc.stdout.readline()
        assert first.startswith("Viewer available at http://127.0.0.1:"), first + proc.stderr.read()
        url = first.split()[3]
        assert "No browser opened (no display)" in proc.stdout.readline()
        with urllib.request.urlopen(url, timeout=30) as reply:
            assert reply.status == 200
            data = _page_data(reply.read().decode())
        assert [n["label"] for n in data["nodes"]][:2] == ["x", "Conv"]
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(url + "nothing", timeout=30)
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=60)
    assert code == 0, proc.stderr.read()


def test_visual_port_in_use_is_one_line(tmp_path):
    import socket

    model = conv_model(tmp_path / "m.onnx")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "parity", "inspect", "model", str(model), "--visual", "--visual-port", str(port)],
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and f"--visual-port {port}: cannot listen there" in done.stderr


@pytest.mark.parametrize(("args", "says"), [
    (["--visual-port", "8123"], "give --visual too"),
    (["--visual", "--save-visual", "x.html"], "give one"),
    (["--save-visual", "x.html", "--json"], "leave out --json"),
    (["--save-visual", "x.html", "--display-as", "onnx", "--model-type", "onnx", "--list-unbounded-dds"], "leave out --json"),
])
def test_visual_flags_refused_where_they_cannot_apply(main, tmp_path, args, says):
    model = conv_model(tmp_path / "m.onnx")
    code, out, err = main("inspect", "model", str(model), *(str(tmp_path / a) if a == "x.html" else a for a in args))
    assert code == 2 and out == "" and says in err and not (tmp_path / "x.html").exists()


# ---- inspect tactics / diff-tactics --format polygraphy ----------------------------------------------------------------
def _replay(path: Path, layers: dict[str, tuple[int, int]]) -> Path:
    """A Polygraphy TacticReplayData file: layer -> (implementation, tactic), one FLOAT input and output."""
    import json

    info = {"dtype": "DataType.FLOAT", "strides": [1, 2], "vectorized_dim": -1, "components_per_element": 1, "polygraphy_class": "TensorInfo"}
    replay = {name: {"implementation": impl, "tactic": tactic, "inputs": [info], "outputs": [info], "polygraphy_class": "Algorithm"}
              for name, (impl, tactic) in layers.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"replay": replay, "polygraphy_class": "TacticReplayData"}))
    return path


IO = "Inputs: (TensorInfo(DataType.FLOAT, (1, 2), -1, 1),) | Outputs: (TensorInfo(DataType.FLOAT, (1, 2), -1, 1),)"


def test_inspect_tactics_polygraphy_layout(main, tmp_path):
    replay = _replay(tmp_path / "r.json", {"conv": (3, 7), "relu": (1, (1 << 64) - 5)})  # a tactic stored unsigned
    code, out, err = main("inspect", "tactics", str(replay), "--format", "polygraphy")
    assert code == 0, err
    assert out.splitlines() == [
        f"[I] Loading tactic replay file from {replay}",
        "[I] Layer: conv",
        f"        Algorithm: (Implementation: 3, Tactic: 7) | {IO}",
        "    Layer: relu",
        f"        Algorithm: (Implementation: 1, Tactic: -5) | {IO}",  # signed, as TensorRT and Polygraphy print it
    ]
    code, table, _ = main("inspect", "tactics", str(replay))
    assert code == 0 and "[I]" not in table and "Layer" in table  # Parity's table stays the default
    code, _, err = main("inspect", "tactics", str(replay), "--format", "polygraphy", "--json")
    assert code == 2 and "give one" in err


@pytest.mark.parametrize("sub", ["", "deeper"])
def test_diff_tactics_polygraphy_layout_is_the_set_difference(main, tmp_path, sub):
    """Polygraphy's rule, not Parity's ranking: per layer, the algorithms of bad replays no good replay used."""
    root = tmp_path / "replays"
    _replay(root / "good" / sub / "0.json", {"conv": (3, 7), "relu": (1, 0)})
    _replay(root / "good" / sub / "1.json", {"conv": (3, 7), "relu": (1, 5)})
    _replay(root / "bad" / sub / "0.json", {"conv": (3, 9), "relu": (1, 0)})
    _replay(root / "bad" / sub / "1.json", {"conv": (4, 9), "relu": (1, 2)})
    code, out, err = main("inspect", "diff-tactics", "--dir", str(root), "--format", "polygraphy")
    assert code == 0, err
    lines = [line for line in out.splitlines() if "Loading tactic replay file from" not in line]
    assert lines == [
        "[I] Loaded 2 good tactic replays.",
        "[I] Loaded 2 bad tactic replays.",
        "[I] Found potentially bad tactics:",
        "[I] Layer: conv",
        f"        Algorithms: ['(Implementation: 3, Tactic: 9) | {IO}', '(Implementation: 4, Tactic: 9) | {IO}']",
        "[I] Layer: relu",
        f"        Algorithms: ['(Implementation: 1, Tactic: 2) | {IO}']",
    ]
    code, out, err = main("inspect", "diff-tactics", "--good", str(root / "good"), "--bad", str(root / "good"), "--format", "polygraphy")
    assert code == 0 and out.splitlines()[-1] == "[I] Could not determine potentially bad tactics. Try providing more tactic replay files if possible."
    code, _, err = main("inspect", "diff-tactics", "--dir", str(root), "--format", "polygraphy", "--top", "3")
    assert code == 2 and "--top" in err


def test_timing_cache_replay_has_no_polygraphy_layout(main, tmp_path):
    """TensorRT 10.8+/11 replays are keyed by timing-cache key; Polygraphy never records those: refused when asked
    for explicitly, Parity's table otherwise."""
    import json

    replay = tmp_path / "tc.json"
    replay.write_text(json.dumps({"format": "parity-tactics", "version": 1, "source": "timing-cache",
                                  "tactics": {"0x" + "ab" * 16: {"tactic": "0x00000000000000ff"}}}))
    code, out, err = main("inspect", "tactics", str(replay), "--format", "polygraphy")
    assert code == 2 and out == "" and "timing-cache replay" in err
    code, out, _ = main("inspect", "tactics", str(replay))
    assert code == 0 and "0x00000000000000ff" in out


# ---- --combine-tensor-info: an engine of the behavioural model of TensorRT (NOT TensorRT) -------------------------------
TRT_MODEL = Path(__file__).resolve().parents[1] / "plugins" / "trt" / "tests"


def _trt_model_env() -> dict[str, str]:
    if not (TRT_MODEL / "trt_model" / "site").is_dir() or not Path("/work/shared/trt-api/tensorrt-10.16.1.11-members.txt").exists():
        pytest.skip("the behavioural model of TensorRT (plugins/trt/tests/trt_model) or its API lists are not here")
    paths = [TRT_MODEL / "trt_model" / "site", TRT_MODEL / "trt_model" / "site_host_cuda", TRT_MODEL]
    return {**os.environ, "PARITY_TRT_MODEL_VERSION": "10.16.1.11", "PARITY_TRT_MODEL_MEMORY": "host",
            "PYTHONPATH": os.pathsep.join(map(str, paths))}


def test_combine_tensor_info_adds_saved_tensor_statistics_to_engine_layers(tmp_path):
    """parity run --trt --mark-unfused-tensors-as-debug-tensors --save-outputs saves every unfused tensor; inspect
    model ENGINE --show layers --combine-tensor-info shows each one's min/max/avg beside the layers that use it."""

    w1 = numpy_helper.from_array(np.eye(4, dtype=np.float32) * 2.0, "w1")
    w2 = numpy_helper.from_array(np.eye(4, dtype=np.float32) * -1.0, "w2")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("MatMul", ["h", "w2"], ["y"])], "mm2",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [w1, w2],
    )
    model = _save(_model(graph), tmp_path / "mm2.onnx")
    env = _trt_model_env()
    parity = [sys.executable, "-m", "parity"]
    done = subprocess.run([*parity, "run", str(model), "--trt", "--mark-unfused-tensors-as-debug-tensors", "--val-range", "x:[0,7]",
                           "--save-outputs", "out.json", "--save-engine", "m.engine"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([*parity, "inspect", "model", "m.engine", "--show", "layers", "--combine-tensor-info", "out.json"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    from parity.api import load_results

    saved = dict(next(iter(load_results(tmp_path / "out.json")))[1][0].items())  # the first runner's first iteration
    assert {"h", "y"} <= set(saved)
    for name in ("h", "y"):
        values = np.asarray(saved[name], np.float64)
        tag = f"{name} [min={values.min():.2f}, max={values.max():.2f}, avg={values.mean():.2f}]"
        assert tag in done.stdout, done.stdout
    poly = subprocess.run([*parity, "inspect", "model", "m.engine", "--show", "layers", "attrs", "--combine-tensor-info", "out.json",
                           "--format", "polygraphy"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert poly.returncode == 0, poly.stderr
    layers = [line for line in poly.stdout.splitlines() if line.startswith("    Layer ")]
    assert len(layers) == 2 and all("[Op: " in line for line in layers)
    assert poly.stdout.count("        ---- Attributes ----") == 2 and poly.stdout.count("        Tactic = ") == 2
    h = np.asarray(saved["h"], np.float64)
    assert "h [dtype=float32, shape=(2, 4), Format: " in poly.stdout
    assert f", min={h.min():.2f}, max={h.max():.2f}, avg={h.mean():.2f}]" in poly.stdout
    plain = subprocess.run([*parity, "inspect", "model", "m.engine", "--show", "layers"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert plain.returncode == 0 and "min=" not in plain.stdout
    for args, says in ((["m.engine", "--combine-tensor-info", "out.json"], "give --show layers too"),
                       ([str(model), "--combine-tensor-info", "out.json"], "applies to an engine model")):
        refused = subprocess.run([*parity, "inspect", "model", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert refused.returncode == 2 and says in refused.stderr and refused.stdout == ""


def test_format_with_json_or_visual_is_refused_but_its_variable_is_not(main, tmp_path, monkeypatch):
    """--format lays out text: given with --json or --visual it would do nothing, so it is refused; the
    environment variable (a standing preference) leaves --json alone."""
    model = conv_model(tmp_path / "m.onnx")
    for extra in (["--json"], ["--save-visual", str(tmp_path / "g.html")]):
        code, out, err = main("inspect", "model", str(model), "--format", "polygraphy", *extra)
        assert code == 2 and out == "" and "leave out --format" in err
    assert not (tmp_path / "g.html").exists()
    monkeypatch.setenv("PARITY_INSPECT_FORMAT", "polygraphy")
    code, out, err = main("inspect", "model", str(model), "--json")
    assert code == 0 and out.lstrip().startswith("{"), err
    replay = _replay(tmp_path / "r.json", {"conv": (3, 7)})
    code, out, err = main("inspect", "tactics", str(replay), "--json")
    assert code == 0 and out.lstrip().startswith("{"), err
    monkeypatch.delenv("PARITY_INSPECT_FORMAT")
    code, _, err = main("inspect", "tactics", str(replay), "--format", "parity", "--json")
    assert code == 2 and "give one" in err


def test_engine_polygraphy_layout(tmp_path):
    """inspect model ENGINE --format polygraphy: Polygraphy's engine text (I/O, memory, every profile's shapes,
    layers with --show layers); on an engine of the behavioural model of TensorRT with two profiles."""
    env = _trt_model_env()
    graph = helper.make_graph([helper.make_node("Relu", ["X"], ["Y"])], "dyn",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 2, "h", "w"])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 2, "h", "w"])])
    model = _save(_model(graph), tmp_path / "dyn.onnx")
    parity = [sys.executable, "-m", "parity"]
    shapes = ["--trt-min-shapes", "X:[1,2,1,1]", "--trt-opt-shapes", "X:[1,2,3,3]", "--trt-max-shapes", "X:[1,2,5,5]",
              "--trt-min-shapes", "X:[1,2,2,2]", "--trt-opt-shapes", "X:[1,2,4,4]", "--trt-max-shapes", "X:[1,2,6,6]"]
    done = subprocess.run([*parity, "convert", str(model), "-o", "dyn.engine", *shapes], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([*parity, "inspect", "model", "dyn.engine", "--format", "polygraphy"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = [line.rstrip() for line in done.stdout.splitlines()]
    assert lines[:3] == ["[I] Loading bytes from dyn.engine", "[I] ==== TensorRT Engine ====", "    Name: Unnamed Network 0 | Explicit Batch Engine"]
    for expected in ("    ---- 1 Engine Input(s) ----", "    {X [dtype=float32, shape=(1, 2, -1, -1)]}", "    ---- 1 Engine Output(s) ----",
                     "    ---- Memory ----", "    ---- 2 Profile(s) (2 Tensor(s) Each) ----", "    - Profile: 0", "    - Profile: 1",
                     "        Tensor: X          (Input), Index: 0 | Shapes: min=(1, 2, 1, 1), opt=(1, 2, 3, 3), max=(1, 2, 5, 5)",
                     "        Tensor: X          (Input), Index: 0 | Shapes: min=(1, 2, 2, 2), opt=(1, 2, 4, 4), max=(1, 2, 6, 6)",
                     "        Tensor: Y         (Output), Index: 1 | Shape: (1, 2, -1, -1)"):
        assert expected in lines, expected
    assert any(line.startswith("    Device Memory: ") and line.endswith(" bytes") for line in lines)
    assert lines[-1].startswith("    ---- ") and lines[-1].endswith(" Layer(s) ----")


def test_shape_inference_and_unbounded_dds_in_polygraphy_layout(main, tmp_path):
    """--shape-inference: Polygraphy's layout shows the model with every tensor's inferred shape (ONNX Runtime's
    symbolic inference; ONNX's with --no-onnxruntime-shape-inference); --list-unbounded-dds ends with Polygraphy's
    ``Found tensors with unbounded DDS: [Variable (...): (shape=..., dtype=...)]`` line."""
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("start", 0), ("delta", 1))]
    nodes = [helper.make_node("ReduceMax", ["x"], ["m"], keepdims=0, name="max"),
             helper.make_node("Cast", ["m"], ["limit"], to=TensorProto.INT64, name="cast"),
             helper.make_node("Range", ["start", "limit", "delta"], ["r"], name="range"),
             helper.make_node("Cast", ["r"], ["y"], to=TensorProto.FLOAT, name="back")]
    graph = helper.make_graph(nodes, "dds", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])], inits)
    model = _save(_model(graph), tmp_path / "dds.onnx")
    code, out, err = main("inspect", "model", str(model), "--format", "polygraphy", "--show", "layers", "--shape-inference")
    assert code == 0, err
    assert "         -> {limit [dtype=int64, shape=()]}" in out.splitlines()  # inferred: unknown without inference
    code, plain, _ = main("inspect", "model", str(model), "--format", "polygraphy", "--show", "layers")
    assert "         -> {limit}" in plain.splitlines()
    code, onnx_only, err = main("inspect", "model", str(model), "--format", "polygraphy", "--show", "layers", "--shape-inference",
                                "--no-onnxruntime-shape-inference")
    assert code == 0 and "         -> {limit [dtype=int64, shape=()]}" in onnx_only.splitlines(), err
    code, out, err = main("inspect", "model", str(model), "--format", "polygraphy", "--list-unbounded-dds", "--shape-inference")
    assert code == 0, err
    assert out.splitlines()[-1] == "[I] Found tensors with unbounded DDS: [Variable (limit): (shape=[], dtype=int64)]"
    code, _, err = main("inspect", "model", str(model), "--format", "parity", "--shape-inference")
    assert code == 2 and "--shape-inference applies to --list-unbounded-dds" in err
