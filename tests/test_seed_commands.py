"""Every ``polygraphy`` command of the seed documents (Polygraphy's guides) runs with ``parity`` in its place.

The commands and what each must do are listed in ``tests/data/seed_commands.txt`` (so CI needs no copy of the
guides); a seed document's commands run in order in one folder, as its reader would type them, so a later command
reads what an earlier one wrote (``golden.json``, ``inputs.json``, ``identity_fp16.onnx``). The files a guide
assumes but does not make (its models, data loader scripts, TensorRT tactic replays a TensorRT build would have
sorted into ``replays/good|bad``, the engines a TensorRT build would have written) are made here first.

Without TensorRT, a command that needs it must fail with exit 3 and Parity's one ``tensorrt is not installed``
line, nothing else; every other command must pass with exit 0, write only valid artifacts and print no traceback.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parents[1]
LIST = Path(__file__).parent / "data" / "seed_commands.txt"
SEEDS = ROOT.parent / "shared" / "seeds"
TRT_LINE = (
    "parity: error: tensorrt is not installed; install it with: pip install 'parity-trt[tensorrt]' "
    "(or pip install tensorrt; needs an NVIDIA GPU and driver)"
)
# A guide's placeholder and the commands it stands for: "*.onnx/*.engine" means an ONNX model or an engine.
PLACEHOLDERS = {
    "polygraphy inspect model *.onnx/*.engine": ["polygraphy inspect model identity.onnx", "polygraphy inspect model identity.engine"],
}


def read_list() -> list[tuple[str, list[str], str]]:
    """``(source, expectations, command)`` per line of the list."""
    rows = []
    for line in LIST.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            source, expect, command = line.split("\t")
            rows.append((source, expect.split(","), command))
    return rows


def extract(folder: Path) -> list[tuple[str, str]]:
    """``(file:line, command)`` for every ``polygraphy`` command of the guides in ``folder``: a line that starts
    with one (``\\`` continuations joined), and the help commands quoted in the prose (``polygraphy debug -h``)."""
    found = []
    for file in sorted(folder.glob("*.txt")):
        lines = file.read_text(encoding="utf-8").splitlines()
        index = 0
        while index < len(lines):
            text = lines[index].strip()
            if text.startswith("polygraphy "):
                start, parts = index, [text.rstrip("\\").strip()]
                while lines[index].rstrip().endswith("\\") and index + 1 < len(lines):
                    index += 1
                    parts.append(lines[index].strip().rstrip("\\").strip())
                found.append((f"{file.name}:{start + 1}", " ".join(p for p in parts if p)))
            else:
                found.extend((f"{file.name}:{index + 1}", m.group(1)) for m in re.finditer(r"`(polygraphy [^`]*-h)`", lines[index]))
            index += 1
    return found


@pytest.mark.skipif(not SEEDS.is_dir(), reason="the seed documents (../shared/seeds) are not beside this checkout")
def test_the_list_is_complete():
    assert [(source, command) for source, _, command in read_list()] == extract(SEEDS)


# ---- the files the guides assume ---------------------------------------------------------------------------
def save(graph: onnx.GraphProto, path: Path) -> None:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)


def identity(path: Path, name: str, shape: list) -> None:
    x = helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)
    y = helper.make_tensor_value_info("y" if name == "x" else "Y", TensorProto.FLOAT, shape)
    save(helper.make_graph([helper.make_node("Identity", [x.name], [y.name])], "test_identity", [x], [y]), path)


def data_loader(name: str, shape: tuple) -> str:
    return f"import numpy as np\n\ndef load_data():\n    for _ in range(5):\n        yield {{{name!r}: np.ones({shape}, dtype=np.float32)}}\n"


# The TensorRT network scripts of the cheatsheet (for --trt-network-func): as the guide writes them, they import
# TensorRT first.
NETWORK_SCRIPT = """import tensorrt as trt
from parity_trt import NetworkFromOnnxPath


def load_network():
    builder, network, parser = NetworkFromOnnxPath("identity.onnx")()
    network.name = "MyIdentity"
    return builder, network, parser


def create_network():
    builder = trt.Builder(trt.Logger())
    network = builder.create_network()
    return builder, network
"""


# Polygraphy's JSON encoder imports torch (1.3 s a process) to look for its tensors; these files hold numpy arrays
NO_TORCH = "import sys\nsys.modules['torch'] = None\n"


def polygraphy_replays(folder: Path) -> None:
    """Tactic replays in Polygraphy's own format, sorted as ``debug build --artifacts`` sorts them (Polygraphy
    writes them, through the tactics plugin's test helper)."""
    sys.path.insert(0, str(ROOT / "plugins" / "tactics" / "tests"))
    try:
        from tactics_synth import write_polygraphy_replay
    finally:
        sys.path.pop(0)
    tensor = ("FLOAT", [4, 4, 2, 1], -1, 1)
    for label, tactic in (("good", 1), ("good", 1), ("bad", 7)):
        index = len(list((folder / label).glob("*.json"))) if (folder / label).is_dir() else 0
        (folder / label).mkdir(parents=True, exist_ok=True)
        write_polygraphy_replay(folder / label / f"replay_{index}.json", {"(Unnamed Layer* 0) [Identity]": [0x1234, tactic, [tensor], [tensor]]})


def polygraphy_results(model: Path, path: Path) -> None:
    """``inference_results.json`` as the cheatsheet's script makes it: Polygraphy's ``RunResults.save``."""
    script = (
        NO_TORCH + "from polygraphy.backend.onnxrt import OnnxrtRunner, SessionFromOnnx\n"
        "from polygraphy.comparator import Comparator\n"
        "Comparator.run([OnnxrtRunner(SessionFromOnnx(sys.argv[1]))]).save(sys.argv[2])\n"
    )
    subprocess.run([sys.executable, "-c", script, str(model), str(path)], check=True, capture_output=True)


def prepare(folder: Path, source: str) -> None:
    folder.mkdir(parents=True)
    identity(folder / "identity.onnx", "x", [1, 1, 2, 2])
    identity(folder / "dynamic_identity.onnx", "X", ["N", "C", "H", "W"])
    if source.startswith("003"):
        (folder / "data_loader.py").write_text(data_loader("X", (1, 2, 28, 28)))
        subprocess.run(  # what the guide's `python3 data_loader.py` saves
            [sys.executable, "-c", NO_TORCH + "import numpy as np\nfrom polygraphy.json import save_json\n"
             "save_json([{'X': np.ones((1, 2, 28, 28), np.float32)}], sys.argv[1])", str(folder / "custom_inputs.json")],
            check=True, capture_output=True,
        )
    if source.startswith("004"):
        (folder / "data_loader.py").write_text(data_loader("x", (1, 1, 2, 2)))
        api = folder / ".." / ".." / ".." / "api" / "04_int8_calibration_in_tensorrt"
        api.mkdir(parents=True)
        (api / "example.py").write_text(data_loader("x", (1, 1, 2, 2)).replace("load_data", "calib_data"))
        (folder / "example.py").write_text(NETWORK_SCRIPT)
        polygraphy_results(folder / "identity.onnx", folder / "inference_results.json")
        for engine in ("identity.engine", "dynamic_identity.engine"):  # what the guide's TensorRT builds wrote
            (folder / engine).write_bytes(b"not an engine: TensorRT would have built it")
    polygraphy_replays(folder / "replays")
    if source.startswith("004"):
        (folder / "replay.json").write_bytes(next((folder / "replays" / "good").glob("*.json")).read_bytes())


def parity(command: str) -> list[str]:
    """The guide's command with ``parity`` for ``polygraphy`` (``polygraphy_debug.engine`` keeps its name)."""
    words = re.sub(r"\bpolygraphy\b(?!_)", "parity", command).split()
    assert words[0] == "parity"
    return [sys.executable, "-m", "parity", *words[1:]]


def check_artifacts(folder: Path, before: set[Path]) -> None:
    """Every ONNX model a command wrote passes the full checker and loads in onnxruntime."""
    for path in sorted(set(folder.rglob("*.onnx")) - before):
        onnx.checker.check_model(onnx.load(path), full_check=True)
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def documents() -> list[str]:
    return sorted({source.partition(":")[0] for source, _, _ in read_list()})


@pytest.mark.skipif(importlib.util.find_spec("tensorrt") is not None, reason="TensorRT is installed: the TRT-less outcomes do not apply")
@pytest.mark.skipif(importlib.util.find_spec("polygraphy") is None, reason="Polygraphy writes some of the guides' files (pip install -r requirements-dev.txt)")
@pytest.mark.parametrize("document", documents())
def test_every_command_of_the_guide_runs_with_parity(document, tmp_path):
    folder = tmp_path / "a" / "b" / document.partition("_")[0]
    prepare(folder, document)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}", "NO_COLOR": "1"}
    failures = []
    for source, expects, written in (row for row in read_list() if row[0].startswith(document)):
        commands = PLACEHOLDERS.get(written, [written])
        for command, expect in zip(commands, expects if len(expects) == len(commands) else expects * len(commands)):
            before = set(folder.rglob("*.onnx"))
            result = subprocess.run(parity(command), cwd=folder, env=env, capture_output=True, text=True, timeout=120)
            output = result.stdout + result.stderr
            if "Traceback" in output:
                failures.append(f"{source}: {command}: printed a traceback:\n{output}")
            elif expect == "ok" and result.returncode != 0:
                failures.append(f"{source}: {command}: exit {result.returncode}, expected 0:\n{output}")
            elif expect == "trt" and (result.returncode != 3 or result.stderr.strip() != TRT_LINE):
                failures.append(f"{source}: {command}: expected exit 3 and only the TensorRT line, got exit {result.returncode}:\n{output}")
            else:
                check_artifacts(folder, before)
    assert not failures, "\n\n".join(failures)


def test_the_help_commands_name_the_debug_tools(tmp_path):
    """``parity debug -h`` (the guides point readers to it) lists debug build, the tool the guides use."""
    result = subprocess.run([sys.executable, "-m", "parity", "debug", "-h"], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0
    assert re.search(r"^\s+build\s", result.stdout, re.M), result.stdout
