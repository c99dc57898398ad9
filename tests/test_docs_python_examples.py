"""The ```python blocks of Parity's own docs are real (issue 15): each runs in a fresh interpreter, in a folder
holding the files it names (models built here, golden files saved by ``parity run``), and must not raise.

A block that cannot run here (it needs TensorRT or a GPU) is fenced ```python-norun, with a one-line
``<!-- norun: why -->`` comment above it; NORUN says how many each page may have, and such blocks must still
compile. A block that defines a plugin (``@hookimpl``) is also loaded as one (``PARITY_PLUGINS``, strict) and,
where EXERCISES has code for it, used.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The pages whose ```python blocks run.
PAGES = [
    "README.md",
    "docs/README.md",
    "docs/architecture.md",
    "docs/big-models.md",
    "docs/cli.md",
    "docs/corpus.md",
    "docs/debug.md",
    "docs/formats.md",
    "docs/layerwise.md",
    "docs/onnxrt.md",
    "docs/real-models.md",
    "docs/surgeon.md",
    "docs/tactics.md",
    "docs/plugins/README.md",
    "docs/plugins/api.md",
    "docs/plugins/hooks.md",
    "docs/plugins/reports.md",
    "docs/plugins/troubleshooting.md",
    "docs/plugins/tutorial.md",
    "docs/python-api.md",
    "docs/trt.md",  # against the behavioural model of TensorRT (trt_model_env)
    "docs/torch.md",  # its export block; plugins/torch/tests/test_torch_docs.py runs its commands on what it writes
]
NOT_YET: list[str] = []  # pages with Python blocks this test does not run yet

NORUN = {"docs/tactics.md": 1}  # the most ```python-norun blocks a page may have (debug_build builds TensorRT engines)

FENCE = re.compile(r"^```(python|python-norun)\n(.*?)^```$", re.M | re.S)
BLOCK_FILE = "doc_block.py"  # the block's file, in the folder it runs in (so `import parity_maxrel` finds the tutorial's module)

LOADED = """
from parity import plugins
[info] = [i for i in plugins.plugin_infos() if i.source == "file"]
assert info.status == "loaded" and info.hooks, info
"""

# (page, block index) -> (extra environment, code run after LOADED with the block loaded as a plugin)
EXERCISES = {
    ("docs/debug.md", 0): (
        {},
        "from parity_reduce import Reducer\n"
        "from parity_reduce.testing import chain\n"
        "result = Reducer(chain(12), lambda m: 'n5' in {n.name for n in m.graph.node}, mode='greedy').run()\n"
        "assert result.nodes == ['n5'], result.nodes\n",
    ),
    ("docs/plugins/hooks.md", 1): (  # the surgeon plugin's own descriptions: only one plugin may make them
        {"PARITY_DISABLE_PLUGINS": "surgeon"},
        "from parity.testing import invoke\n"
        "result = invoke('surgeon', 'sanitize', '--help')\n"
        "assert result.exit_code == 0 and 'Usage: parity surgeon sanitize' in result.stdout, result\n"
        "assert invoke('debug', 'localize', '--help').exit_code == 0\n",
    ),
    ("docs/plugins/hooks.md", 2): (  # the surgeon plugin's hint would come first
        {"PARITY_DISABLE_PLUGINS": "surgeon"},
        "from types import SimpleNamespace\n"
        "from parity.api import call_hook\n"
        "report = SimpleNamespace(model='m.onnx', first=SimpleNamespace(node='fc2'))\n"
        "hints = call_hook('parity_divergence_hint', report=report, output=None)\n"
        "assert hints == ['mytool cut m.onnx --node fc2 -o cut.onnx'], hints\n",
    ),
    ("docs/plugins/hooks.md", 3): (  # the torch plugin answers for torch.onnx's metadata only, an empty dict here
        {"PARITY_DISABLE_PLUGINS": "torch"},
        "from parity.api import call_hook\n"
        "found = call_hook('parity_node_origins', nodes={'n1': {'my.layer': 'block1'}, 'n2': {'other': 'x'}})\n"
        "assert found == [{'n1': 'layer block1'}], found\n",
    ),
    ("docs/plugins/hooks.md", 5): (  # another plugin implements the declared hook
        {},
        "from parity import hookimpl\n"
        "from parity.api import call_hook\n"
        "from parity.plugins import get_manager\n"
        "class User:\n"
        "    @hookimpl\n"
        "    def parity_mytool_extend(self, options):\n"
        "        return options['level']\n"
        "get_manager().register(User(), name='user')\n"
        "found = call_hook('parity_mytool_extend', options={'level': 2})\n"
        "assert found == [2], found\n",
    ),
    ("docs/plugins/tutorial.md", 0): ({"PARITY_PLUGINS": BLOCK_FILE}, ""),  # the page's parity_maxrel.py is this block
}


# (page, block index) -> code run right after the block, in its process: what the page says the block gives
RESULTS = {
    ("docs/big-models.md", 0): "assert head.shape and not head.flags.writeable and config and saved.data_files[0].is_file()\n",
    ("docs/layerwise.md", 0): "assert (result.first.node, result.first.op_type, result.suspect.verdict) == ('scale2', 'Mul', 'introduces')\n",
}


def blocks(page: str) -> list[tuple[str, str]]:
    """(fence language, code) of each ```python / ```python-norun block of a page, in order."""
    return FENCE.findall((ROOT / page).read_text())


CASES = [(page, index) for page in PAGES for index, (lang, _) in enumerate(blocks(page)) if lang == "python"]


def parity(folder: Path, *args: str) -> None:
    result = subprocess.run([sys.executable, "-m", "parity", *args], cwd=folder, capture_output=True, text=True, timeout=120, env=clean_env())
    assert result.returncode == 0, f"parity {' '.join(args)}\n{result.stdout}\n{result.stderr}"


def clean_env(**extra: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("PARITY_")}, **extra}


def overflow_models(folder: Path) -> None:
    """layerwise.md: x in [0,1] -> scale1 (x300) -> scale2 (x300: past fp16's 65504) -> shrink -> y, and its fp16 copy."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from parity.testing import save_model

    nodes = [
        helper.make_node("Mul", ["x", "k1"], ["s1"], name="scale1"),
        helper.make_node("Mul", ["s1", "k2"], ["s2"], name="scale2"),
        helper.make_node("Div", ["s2", "k3"], ["s3"], name="shrink"),
        helper.make_node("Relu", ["s3"], ["y"], name="out"),
    ]
    inits = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in (("k1", 300.0), ("k2", 300.0), ("k3", 1e4))]
    x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, [4, 8]) for n in ("x", "y"))
    save_model(folder / "model.onnx", nodes, [x], [y], inits)
    parity(folder, "convert", "--fp-to-fp16", "model.onnx", "-o", "model_fp16.onnx")


def surgeon_model(folder: Path) -> None:
    """surgeon.md: x [N, 3, H, W] -> a1 (Relu) -> h1 (Mul) -> h2 (Add) -> y (Softmax)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from parity.testing import save_model

    nodes = [
        helper.make_node("Relu", ["x"], ["a1"], name="relu"),
        helper.make_node("Mul", ["a1", "k"], ["h1"], name="scale"),
        helper.make_node("Add", ["h1", "b"], ["h2"], name="shift"),
        helper.make_node("Softmax", ["h2"], ["y"], name="softmax", axis=1),
    ]
    inits = [numpy_helper.from_array(np.array(0.5, np.float32), "k"), numpy_helper.from_array(np.array(0.1, np.float32), "b")]
    x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 3, "H", "W"]) for n in ("x", "y"))
    save_model(folder / "model.onnx", nodes, [x], [y], inits)


def fp16_sensitive_model(folder: Path) -> None:
    """debug.md: parity_reduce's 26-node chain whose shift_a/unshift_a and shift_b/unshift_b add and subtract 1e5."""
    import onnx
    from parity_reduce.testing import fp16_sensitive

    onnx.save(fp16_sensitive(), folder / "model.onnx")  # ir_version 10


def tactic_replays(folder: Path) -> None:
    """tactics.md: replay.json and replays/{good,bad}/ as debug build sorts them (builds where /block1/Conv took
    tactic 0x65 are bad)."""
    from parity_tactics.replay import Tactic, TacticReplay

    def replay(*tactics: int) -> TacticReplay:
        made = TacticReplay(source="algorithm-selector", tensorrt="10.7.0")
        for layer, tactic in enumerate(tactics):
            made.add(f"/block{layer}/Conv", Tactic(tactic, implementation=-2147483642))
        return made

    replay(0x10, 0x64).save(folder / "replay.json")
    for label, builds in (("good", [(0x10, 0x64), (0x11, 0x64), (0x10, 0x66)]), ("bad", [(0x10, 0x65), (0x11, 0x65)])):
        for index, tactics in enumerate(builds):
            replay(*tactics).save(folder / "replays" / label / f"replay_{index}.json")


def decoder_model(folder: Path) -> None:
    """big-models.md: decoder.onnx with its weights in decoder.onnx.data (bench/llm_decoder.py, 2 small blocks)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from llm_decoder import build_decoder

    build_decoder(folder / "decoder.onnx", layers=2, hidden=64, heads=4, vocab=100, seq=8)


def trt_model_env(folder: Path) -> dict[str, str]:
    """trt.md: identity.onnx (x [1,1,2,2] -> y) and dynamic_identity.onnx (X [N,3,28,28] -> Y), and ``import tensorrt``
    giving the behavioural model of TensorRT 10.16 (plugins/trt/tests/trt_model: NOT TensorRT) with host memory."""
    from onnx import TensorProto, helper

    from parity.testing import save_model

    for name, (i, o, shape) in {"identity.onnx": ("x", "y", [1, 1, 2, 2]), "dynamic_identity.onnx": ("X", "Y", ["N", 3, 28, 28])}.items():
        ios = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in (i, o)]
        save_model(folder / name, [helper.make_node("Identity", [i], [o])], ios[:1], ios[1:])
    model = ROOT / "plugins" / "trt" / "tests"
    shims = [model / "trt_model" / "site", model / "trt_model" / "site_host_cuda", model]
    return {"PARITY_TRT_MODEL_VERSION": "10.16.1.11", "PARITY_TRT_MODEL_MEMORY": "host", "PYTHONPATH": os.pathsep.join(map(str, shims))}


def maxrel_module(folder: Path) -> dict[str, str]:
    """tutorial.md: its parity_maxrel.py, found by Parity as if `pip install -e .` had installed it."""
    (folder / "parity_maxrel.py").write_text(blocks("docs/plugins/tutorial.md")[0][1])
    return {"PARITY_PLUGINS": "parity_maxrel.py"}


# page -> what it adds to the shared folder (model.onnx: examples/models/tiny_cnn.onnx; inputs.npz and golden.npz:
# its onnxruntime run; results.npz: onnxruntime's and the ONNX reference's outputs); it may return environment variables
PREPARE = {
    "docs/big-models.md": decoder_model,
    "docs/debug.md": fp16_sensitive_model,
    "docs/layerwise.md": overflow_models,
    "docs/surgeon.md": surgeon_model,
    "docs/tactics.md": tactic_replays,
    "docs/plugins/tutorial.md": maxrel_module,
    "docs/trt.md": trt_model_env,
}


@pytest.fixture(scope="module")
def page_folder(tmp_path_factory):
    """page -> (a folder holding the files its examples name, environment variables), made once per page."""
    shared = tmp_path_factory.mktemp("docs-shared")
    shutil.copy(ROOT / "examples" / "models" / "tiny_cnn.onnx", shared / "model.onnx")
    parity(shared, "run", "model.onnx", "--onnxrt", "--save-inputs", "inputs.npz", "--save-outputs", "golden.npz")
    parity(shared, "run", "model.onnx", "--onnxrt", "--onnx-ref", "--load-inputs", "inputs.npz", "--save-outputs", "results.npz")
    made: dict[str, tuple[Path, dict[str, str]]] = {}

    def get(page: str) -> tuple[Path, dict[str, str]]:
        if page not in made:
            folder = tmp_path_factory.mktemp("docs-page")
            shutil.copytree(shared, folder, dirs_exist_ok=True)
            env = PREPARE[page](folder) if page in PREPARE else None
            made[page] = folder, env or {}
        return made[page]

    return get


def run_python(folder: Path, args: list[str], env: dict[str, str], what: str) -> None:
    result = subprocess.run([sys.executable, *args], cwd=folder, capture_output=True, text=True, timeout=120, env=clean_env(**env))
    assert result.returncode == 0, f"{what} raised (exit {result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"


@pytest.mark.parametrize(("page", "index"), CASES, ids=[f"{page}#{index}" for page, index in CASES])
def test_python_block_runs(page, index, tmp_path, page_folder):
    source, env = page_folder(page)
    shutil.copytree(source, tmp_path, dirs_exist_ok=True)
    code = blocks(page)[index][1]
    (tmp_path / BLOCK_FILE).write_text(code + RESULTS.get((page, index), ""))
    run_python(tmp_path, [BLOCK_FILE], env, f"{page} python block {index}")
    if "@hookimpl" in code:  # a plugin: load it as one, strictly, and use it
        extra_env, exercise = EXERCISES.get((page, index), ({}, ""))
        plugin_env = {**env, "PARITY_PLUGINS": BLOCK_FILE, "PARITY_STRICT_PLUGINS": "1", **extra_env}
        run_python(tmp_path, ["-c", LOADED + exercise], plugin_env, f"{page} python block {index}, loaded as a plugin")


def test_every_page_with_python_blocks_is_listed():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs" / "plugins").glob("*.md"))]
    with_python = {str(p.relative_to(ROOT)) for p in pages if "```python" in p.read_text()}
    missing = sorted(with_python - set(PAGES) - set(NOT_YET))
    assert not missing, f"pages with Python blocks this test does not know: {missing}; add them to PAGES"
    assert not set(PAGES) & set(NOT_YET)
    assert all((ROOT / page).is_file() for page in PAGES + NOT_YET)


@pytest.mark.parametrize("page", PAGES, ids=PAGES)
def test_fences_and_norun_blocks(page):
    """Every Python fence is one this test reads; few blocks skip running, each saying why and still compiling."""
    text = (ROOT / page).read_text()
    fences = re.findall(r"^[ \t]*```[ \t]*py\S*", text, re.M)
    assert all(f in ("```python", "```python-norun") for f in fences), f"{page}: fences this test would miss: {fences}"
    norun = [code for lang, code in blocks(page) if lang == "python-norun"]
    assert len(norun) <= NORUN.get(page, 0), f"{page}: {len(norun)} python-norun blocks, NORUN allows {NORUN.get(page, 0)}"
    lines = text.splitlines()
    for number, line in enumerate(lines):
        if line == "```python-norun":
            assert number and re.fullmatch(r"<!-- norun: .+ -->", lines[number - 1]), f"{page}:{number + 1}: no <!-- norun: why --> line above"
    for code in norun:
        compile(code, f"{page} (python-norun)", "exec")


def test_exercises_and_results_name_blocks_that_run():
    for page, index in EXERCISES:
        assert (page, index) in CASES and "@hookimpl" in blocks(page)[index][1], f"EXERCISES names {page} block {index}, not a plugin block"
    assert set(RESULTS) <= set(CASES)
