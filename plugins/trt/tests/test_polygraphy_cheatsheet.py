"""Polygraphy's Python cheatsheet (../shared/seeds/004_*.txt, issue 15): each of its 11 scripts runs with only the
one import rule applied (docs/python-api.md: ``polygraphy`` -> ``parity_polygraphy`` in imports, issue 28). The ONNX Runtime parts run for real; the TensorRT parts run
against the behavioural model of TensorRT (trt_model: NOT TensorRT) of every modelled version, and against the
real TensorRT where it imports (skipped elsewhere). The four snippets of the immediately evaluated API's section
run too, on a real model in place of ``/path/to/model.onnx``.

Each script runs as a user runs it: ``python script.py`` in a folder holding the files it names, in a fresh
process (the model reaches it through the site shims trt_model.install puts on PYTHONPATH)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from onnx import TensorProto, helper

from parity.testing import save_graph

ROOT = Path(__file__).resolve().parents[3]
SEEDS = ROOT.parent / "shared" / "seeds"  # the documents Parity was made from, beside the checkout (not copied in)
CHEATSHEET = next(iter(sorted(SEEDS.glob("004_*.txt"))), None)

# docs/python-api.md's one import rule: the word polygraphy becomes parity_polygraphy in imports, nothing else
MAPPING = [(r"^(\s*(?:from|import)\s+)polygraphy\b", r"\1parity_polygraphy")]


def mapped(source: str) -> str:
    for pattern, replacement in MAPPING:
        source = re.sub(pattern, replacement, source, flags=re.MULTILINE)
    return source


def blocks() -> list[str]:
    if CHEATSHEET is None:
        return []
    text = CHEATSHEET.read_text(encoding="utf-8").replace("\xa0", " ")  # the guide's snippets carry no-break spaces
    return [textwrap.dedent(b) for b in re.findall(r"```python\n(.*?)```", text, re.S)]


def scripts() -> list[tuple[str, str]]:
    """(id, source) of each whole script (it has a main), named by its docstring's first words."""
    found = []
    for source in blocks():
        if "def main" not in source:
            continue
        doc = re.search(r'"""\s*(.*?)\n', source)
        words = re.sub(r"[^a-z0-9]+", "-", (doc.group(1) if doc else "script").lower()).strip("-")
        found.append((words[:60], source))
    return found


def snippets() -> list[str]:
    """The immediately evaluated API's snippets: the blocks naming /path/to/model.onnx."""
    return [b for b in blocks() if "/path/to/model.onnx" in b]


def identity(path: Path, name_in: str, name_out: str, shape: list) -> None:
    graph = helper.make_graph(
        [helper.make_node("Identity", [name_in], [name_out])],
        "identity",
        [helper.make_tensor_value_info(name_in, TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(name_out, TensorProto.FLOAT, shape)],
    )
    save_graph(graph, path, opset=17)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files the cheatsheet's scripts name: identity.onnx (x [1,1,2,2] -> y), dynamic_identity.onnx
    (X [N,3,28,28] -> Y), and inputs.json/outputs.json as `polygraphy run identity.onnx --onnxrt --save-inputs
    inputs.json --save-outputs outputs.json` writes them (here `parity run`, which writes the same format). Made
    once; each test gets a copy (:func:`workdir`)."""
    folder = tmp_path_factory.mktemp("cheatsheet-files")
    identity(folder / "identity.onnx", "x", "y", [1, 1, 2, 2])
    identity(folder / "dynamic_identity.onnx", "X", "Y", ["N", 3, 28, 28])
    subprocess.run(
        ["parity", "run", "identity.onnx", "--onnxrt", "--save-inputs", "inputs.json", "--save-outputs", "outputs.json"],
        cwd=folder, check=True, capture_output=True, timeout=120,
    )
    return folder


@pytest.fixture
def workdir(files: Path, tmp_path: Path) -> Path:
    """A fresh copy of :func:`files` for one script (a script may write or change files there)."""
    shutil.copytree(files, tmp_path, dirs_exist_ok=True)
    return tmp_path


def run_script(source: str, cwd: Path) -> subprocess.CompletedProcess:
    path = cwd / "script.py"
    path.write_text(mapped(source))
    return subprocess.run([sys.executable, str(path)], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_the_cheatsheet_has_its_eleven_scripts():
    if CHEATSHEET is None:
        pytest.skip("the seed documents are not beside this checkout")
    assert len(scripts()) == 11 and len(snippets()) == 4
    assert all(not re.search(r"^\s*(from|import)\s+polygraphy\b", mapped(source), re.MULTILINE) for _, source in scripts())


# TensorRT 11 removed the weak-typing precision flags (BuilderFlag.FP16, INT8, ...: ../shared/trt-api's 10.16 -> 11.0
# diff): a script asking for them fails there, in Polygraphy as in Parity. It must fail saying so, in one of these words.
PRECISION_ASKED = re.compile(r"fp16=True|int8=True|BuilderFlag\.FP16")
REFUSED_ON_11 = re.compile(
    r"is not available on TensorRT 11[^\n]*(strongly typed|int8 calibration was removed)|'BuilderFlag' has no attribute 'FP16'"
)


def strongly_typed(trt: object) -> bool:
    return int(str(getattr(trt, "__version__", "10")).split(".")[0]) >= 11


def without_precision_flags(source: str) -> str:
    """The producer of an engine another script loads, as a TensorRT 11 user would write it (no fp16 flag)."""
    return source.replace("CreateConfig(fp16=True)", "CreateConfig()").replace("create_config(builder, network, fp16=True)", "create_config(builder, network)")


def producer_of(script: str) -> str | None:
    """The script that saves the engine ``script`` loads: the guide's reader runs it first."""
    if "identity.engine" not in script or "SaveEngine" in script or "save_engine" in script:
        return None
    wanted = '"output"' if '"output"' in script else '"y"'
    return next(s for _, s in scripts() if "identity.engine" in s and ("SaveEngine" in s or "save_engine" in s) and wanted in s)


@pytest.mark.parametrize("script", [s for _, s in scripts()], ids=[i for i, _ in scripts()])
def test_cheatsheet_script_runs_with_only_the_module_names_changed(script, trt_backend, workdir):
    typed = strongly_typed(trt_backend)
    producer = producer_of(script)
    if producer:
        first = run_script(without_precision_flags(producer) if typed else producer, workdir)
        assert first.returncode == 0, first.stderr[-3000:]
    result = run_script(script, workdir)
    if typed and PRECISION_ASKED.search(script):
        assert result.returncode != 0 and REFUSED_ON_11.search(result.stderr), result.stderr[-3000:]
        return
    assert result.returncode == 0, f"{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    if "succeeded!" in script:
        assert "succeeded!" in result.stdout


@pytest.mark.parametrize("index", range(4))
def test_immediate_api_snippets_run_on_a_real_model(index, trt_backend, workdir):
    if CHEATSHEET is None:
        pytest.skip("the seed documents are not beside this checkout")
    snippet = snippets()[index].replace("/path/to/model.onnx", "identity.onnx")
    lines = [line.strip() for line in snippet.splitlines() if line.strip() and not line.strip().startswith("#")]
    if "This throws" in snippet:  # the guide's quiz: the last line calls an engine's bytes, which must raise
        *fine, throws = lines
        body = "\n".join(fine) + f"\ntry:\n    {throws}\nexcept TypeError as exc:\n    print('raised:', exc)\nelse:\n    raise SystemExit('did not raise')\n"
    else:
        body = "\n".join(lines)
    result = run_script("from parity_polygraphy.backend.trt import *\n" + body, workdir)
    if strongly_typed(trt_backend) and PRECISION_ASKED.search(snippet):
        assert result.returncode != 0 and REFUSED_ON_11.search(result.stderr), result.stderr[-3000:]
        return
    assert result.returncode == 0, result.stderr[-3000:]
