"""``debug reduce`` and ``debug precision`` on models with external data (issue 25): the model is loaded lazily,
every check's candidate is its graph alone beside the run's one shared copy of the weights (a reflink clone
where the filesystem has them; a hard link only as the last resort), results are written with ``save_model``
and Polygraphy's external-data flags, and the input model and its folder are left exactly as they were."""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from parity_reduce.external import CandidateFiles

from parity.api import onnx_external
from parity.testing import invoke

# the overflow decoder, small: block 1's MLP overflows float16, the float32 model stays finite
DECODER = {"layers": 2, "hidden": 64, "heads": 2, "vocab": 128, "seq": 8, "overflow_block": 1}
# fails while any tensor of the candidate holds Inf or NaN (in this process: parity run loads it from its path)
NONFINITE = ["--check", "parity", "run", "parity_debug.onnx", "--onnxrt", "--validate", "--onnx-outputs", "mark", "all"]


def _files(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (relative name -> sha256): what the commands must leave unchanged."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


def _valid(path: Path) -> ort.InferenceSession:
    """Passes the full checker on its path and loads in onnxruntime from there."""
    onnx.checker.check_model(str(path), full_check=True)
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def fp16_decoder(llm_decoder, tmp_path_factory) -> Path:
    """The overflow decoder's fp16 twin (``parity convert --fp-to-fp16``), saved with its weights in one external
    data file: every float16 run of it overflows in block 1's MLP."""
    folder = tmp_path_factory.mktemp("fp16")
    assert invoke("convert", "--fp-to-fp16", str(llm_decoder(**DECODER)), "-o", str(folder / "whole.onnx")).exit_code == 0
    model = onnx.load(str(folder / "whole.onnx"))
    for path in folder.iterdir():
        path.unlink()
    onnx.save_model(model, str(folder / "decoder.onnx"), save_as_external_data=True, location="decoder.onnx.data", size_threshold=1024)
    return folder / "decoder.onnx"


@pytest.fixture()
def candidates(monkeypatch) -> list[dict]:
    """What the work folder held when each check's candidate was written: name -> (inode, size, links), with
    the candidate's own name and how the weights are shared."""
    seen: list[dict] = []
    write = CandidateFiles.write

    def recording(self, model, name):
        path = write(self, model, name)
        listing = {str(p.relative_to(self.folder)): (p.stat().st_ino, p.stat().st_size, p.stat().st_nlink) for p in self.folder.rglob("*") if p.is_file()}
        seen.append({"files": listing, "candidate": path.name, "mode": self.mode})
        return path

    monkeypatch.setattr(CandidateFiles, "write", recording)
    return seen


def _shared_once(candidates: list[dict], data: Path, mode: str) -> None:
    """Every check's candidate was its graph alone, beside one data file made once for the whole run: the
    original's blocks (reflink), one copy (other filesystems), or the original itself (a hard link)."""
    assert len(candidates) >= 3
    first = candidates[0]["files"]["decoder.onnx.data"]
    for seen in candidates:
        files = dict(seen["files"])
        assert files.pop(seen["candidate"])[1] < 64 << 10  # the graph and small constants, no weight
        assert files.pop("decoder.onnx.data") == first  # the same file for every check: never a copy per check
        assert set(files) <= {"parity_lowered.data"}
        assert seen["mode"] == mode
    inode, size, links = first
    assert size == data.stat().st_size
    if mode == "hard link":
        assert inode == data.stat().st_ino and links == 2
    else:
        assert inode != data.stat().st_ino and links == 1  # a file of its own: onnx accepts it, the original keeps one link
    assert data.stat().st_nlink == 1  # afterwards


@pytest.mark.parametrize("ways", [("reflink", "copy"), ("hard link",)], ids=["default", "hard-link"])
def test_reduce_shares_the_weights_once_and_writes_only_the_result_weights(fp16_decoder, tmp_path, monkeypatch, candidates, ways):
    monkeypatch.setattr(CandidateFiles, "ways", ways)
    data = fp16_decoder.parent / "decoder.onnx.data"
    before = _files(fp16_decoder.parent)
    result = invoke("debug", "reduce", str(fp16_decoder), "-o", "out/red.onnx", *NONFINITE)
    assert result.exit_code == 0, result.stderr
    # the result: a small failing model that loads and passes the checker, with its own weights inside
    red = tmp_path / "out" / "red.onnx"
    _valid(red)
    reduced = onnx.load(str(red))
    nodes = [n.name for n in reduced.graph.node]
    assert "block1/mlp/up" in nodes and len(nodes) <= 5, nodes
    read = {t for n in reduced.graph.node for t in n.input}
    assert {w.name for w in reduced.graph.initializer} <= read  # its weights only
    assert not any(onnx_external.is_external(t) for t in onnx_external.tensors(reduced))
    assert onnx_external.weight_bytes(reduced) < data.stat().st_size / 4
    # nothing changed or left behind: the input, its folder, the output folder, the working directory
    assert _files(fp16_decoder.parent) == before
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["red.onnx", "red_repro"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    _shared_once(candidates, data, candidates[0]["mode"] if ways != ("hard link",) else "hard link")
    if ways != ("hard link",):
        assert candidates[0]["mode"] in ("reflink", "copy")
    # the repro bundle: small weights inside, standalone
    bundle = tmp_path / "out" / "red_repro"
    _valid(bundle / "model.onnx")
    assert sorted(p.name for p in bundle.iterdir()) == ["README.md", "check.sh", "expected.npz", "inputs.npz", "model.onnx"]


def test_candidates_pass_the_checker_and_large_bundles_refer_to_the_weights(fp16_decoder, tmp_path, monkeypatch):
    """A check that runs onnx.checker (full check, on the path) and onnxruntime on each candidate: every
    candidate passes both (a hard-linked data file would not: onnx refuses it). A result with more weights
    than the bundle copies (the limit made 0 here) refers to the original file instead of copying it."""
    import parity_reduce.bundle

    monkeypatch.setattr(parity_reduce.bundle, "MAX_COPY", 0)
    (tmp_path / "check.py").write_text(
        "import sys, numpy as np, onnx, onnxruntime as ort\n"
        "onnx.checker.check_model(sys.argv[1], full_check=True)\n"
        "s = ort.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider'])\n"
        "names = {n.name for n in onnx.load(sys.argv[1], load_external_data=False).graph.node}\n"
        "sys.exit(1 if 'block1/mlp/up' in names else 0)\n"
    )
    check = ["--check", sys.executable, "check.py", "parity_debug.onnx"]
    result = invoke("debug", "reduce", str(fp16_decoder), "-o", "red.onnx", "--mode", "bisect", "--max-checks", "6", *check)
    assert result.exit_code == 0, result.stderr
    assert "unresolved: 0" in result.stdout
    bundle = tmp_path / "red_repro"
    readme = (bundle / "README.md").read_text()
    original = str((fp16_decoder.parent / "decoder.onnx.data").resolve())
    assert original in readme
    if (bundle / "decoder.onnx.data").exists():  # a reflink clone: its own file, no byte copied
        assert (bundle / "decoder.onnx.data").stat().st_nlink == 1
        _valid(bundle / "model.onnx")
    else:
        assert "not here" in readme
    assert onnx_external.is_external(onnx.load(str(bundle / "model.onnx"), load_external_data=False).graph.initializer[0])


def test_precision_finds_block1_and_lowers_each_weight_once(llm_decoder, tmp_path, candidates):
    src = llm_decoder(**DECODER)
    data = src.parent / "decoder.onnx.data"
    before = _files(src.parent)
    result = invoke("debug", "precision", str(src), "-o", "out/mixed.onnx", "--save-nodes", "out/nodes.json", *NONFINITE)
    assert result.exit_code == 0, result.stderr
    import json

    fp32 = json.loads((tmp_path / "out" / "nodes.json").read_text())["fp32_nodes"]
    assert fp32 and all(n.startswith("block1/mlp/") for n in fp32), fp32
    assert "block1/mlp/up" in fp32
    session = _valid(tmp_path / "out" / "mixed.onnx")
    logits = session.run(None, {"input_ids": np.arange(DECODER["seq"], dtype=np.int64)[None] % DECODER["vocab"]})[0]
    assert np.isfinite(logits).all()
    assert _files(src.parent) == before
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["mixed.onnx", "nodes.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    _shared_once(candidates, data, candidates[0]["mode"])
    lowered = [seen["files"].get("parity_lowered.data") for seen in candidates]
    assert lowered[0] is not None  # the fp16 model: every lowerable weight, converted once
    assert all(entry == lowered[0] for entry in lowered)  # never again
    assert lowered[0][1] <= data.stat().st_size // 2 + 4096 * 64


def test_external_data_dir_and_writing_flags(fp16_decoder, tmp_path):
    # the graph in one folder, its weights in another: --external-data-dir
    (tmp_path / "graph").mkdir()
    (tmp_path / "weights").mkdir()
    shutil.copy(fp16_decoder, tmp_path / "graph" / "decoder.onnx")
    shutil.copy(fp16_decoder.parent / "decoder.onnx.data", tmp_path / "weights" / "decoder.onnx.data")
    model = str(tmp_path / "graph" / "decoder.onnx")
    code, _, err = invoke("debug", "reduce", model, "-o", "r.onnx", "--no-repro", *NONFINITE)
    assert code == 3 and len(err.strip().splitlines()) == 1 and "decoder.onnx.data" in err and "Traceback" not in err
    args = ["debug", "reduce", model, "--external-data-dir", "weights", "--no-repro", *NONFINITE]
    result = invoke(*args[:3], "-o", "out/red.onnx", "--min-good", "out/good.onnx", "--save-external-data", *args[3:])
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["good.onnx", "good.onnx.data", "red.onnx", "red.onnx.data"]
    for name in ("red.onnx", "good.onnx"):
        _valid(tmp_path / "out" / name)
        loaded = onnx.load(str(tmp_path / "out" / name), load_external_data=False)
        assert {onnx_external.external_info(t)[0] for t in onnx_external.tensors(loaded) if onnx_external.is_external(t)} == {name + ".data"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["graph", "out", "weights"]
    # refused in one line before any check: a modifier without --save-external-data, one data file for two
    # outputs, an output data file that is the input's weights
    for bad in (
        ["-o", "a.onnx", "--external-data-size-threshold", "1K"],
        ["-o", "a.onnx", "--min-good", "b.onnx", "--save-external-data", "w.data"],
        ["-o", "weights/a.onnx", "--save-external-data", "decoder.onnx.data"],
        ["-o", "weights/decoder.onnx"],
    ):
        code, _, err = invoke(*args[:3], *bad, *args[3:])
        assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, (bad, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["graph", "out", "weights"]
    assert sorted(p.name for p in (tmp_path / "weights").iterdir()) == ["decoder.onnx.data"]


@pytest.mark.parametrize("limit_kib", [20, 40])
def test_automatic_data_file_past_the_limit_and_no_stale_one(fp16_decoder, tmp_path, monkeypatch, limit_kib):
    """A result that would pass protobuf's limit as one file gets <output>.data and one note (the limit made
    small here: the result, block 1's up-projection, has 33 KiB of weights); a data file an earlier, larger
    improvement got is removed when the final -o needs none."""
    import parity_reduce.reducer

    monkeypatch.setattr(onnx_external, "PROTOBUF_LIMIT", (64 << 20) + (limit_kib << 10))
    writes = []
    save_model = parity_reduce.reducer.save_model

    def recording(*args, **kwargs):
        saved = save_model(*args, **kwargs)
        writes.append([p.name for p in saved.data_files])
        return saved

    monkeypatch.setattr(parity_reduce.reducer, "save_model", recording)
    result = invoke("debug", "reduce", str(fp16_decoder), "-o", "red.onnx", "--no-repro", *NONFINITE)
    assert result.exit_code == 0, result.stderr
    red = tmp_path / "red.onnx"
    _valid(red)
    assert ["red.onnx.data"] in writes[:-1]  # larger improvements, written as the search found them
    automatic = limit_kib == 20
    assert writes[-1] == (["red.onnx.data"] if automatic else [])
    assert ("parity: note: the weights" in result.stderr) == automatic
    assert sorted(p.name for p in tmp_path.iterdir()) == ["red.onnx"] + (["red.onnx.data"] if automatic else [])


def test_sorted_artifacts_keep_their_weights(fp16_decoder, tmp_path):
    """--artifacts parity_debug.onnx: each kept candidate is copied with the weights it reads (its own
    <name>.data), so every sorted artifact loads on its own after the run's work folder is gone."""
    result = invoke(
        "debug", "reduce", str(fp16_decoder), "-o", "red.onnx", "--no-repro", "--max-checks", "3",
        "--artifacts", "parity_debug.onnx", "--artifacts-dir", "kept", *NONFINITE,
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    kept = sorted((tmp_path / "kept").rglob("*.onnx"))
    assert kept, sorted((tmp_path / "kept").rglob("*"))
    for model in kept:
        _valid(model)
