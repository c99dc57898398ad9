"""``debug reduce --report`` and ``debug precision --report``: real reports of the real CLI, validated against the
schemas this plugin ships (loaded from the installed package, as a user's tooling would), for a completed search
with good, bad and unresolved checks and for runs that stop with an error. Broken copies must fail the schema."""

from __future__ import annotations

import copy
import json
import sys
from importlib import resources
from pathlib import Path

import jsonschema
import onnx
import pytest
from parity_reduce.testing import chain, fp16_sensitive

PY = sys.executable

# exit 1 (the failure) iff n12 and n15 are in the candidate; a candidate without n5 crashes with exit 7: unresolved
CRASHY = (
    "import sys\ndata = open(sys.argv[1], 'rb').read()\n"
    "has = lambda n: b'\\x1a' + bytes([len(n)]) + n.encode() in data\n"
    "if not has('n5'):\n    sys.exit(7)\n"
    "sys.exit(1 if has('n12') and has('n15') else 0)\n"
)


def load(path: str) -> dict:
    return json.loads(Path(path).read_text())


def schema(name: str) -> dict:
    data = json.loads(resources.files("parity_reduce").joinpath("schemas", f"{name}.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(data)
    return data


def validate(document: dict, name: str) -> None:
    jsonschema.validate(document, schema(name), cls=jsonschema.Draft202012Validator)


def broken_copies_fail(document: dict, name: str) -> None:
    spec = schema(name)
    for field in spec["required"]:
        broken = copy.deepcopy(document)
        del broken[field]
        with pytest.raises(jsonschema.ValidationError):
            validate(broken, name)
    if document["error"] is None:
        for field in spec["then"]["properties"]["result"]["required"]:  # a completed run's result is whole
            broken = copy.deepcopy(document)
            del broken["result"][field]
            with pytest.raises(jsonschema.ValidationError):
                validate(broken, name)
    with pytest.raises(jsonschema.ValidationError):  # a verdict other than good / bad / unresolved
        validate({**document, "checks": [{**document["checks"][0], "verdict": "failed"}]}, name)


def counts_agree(report: dict) -> None:
    for verdict in ("good", "bad", "unresolved"):
        assert report["counts"][verdict] == sum(c["verdict"] == verdict for c in report["checks"]), verdict
    assert report["counts"]["checks"] + report["counts"]["resumed"] == len(report["checks"])


@pytest.fixture
def chain_model(tmp_path):
    model = chain(20)
    model.ir_version = 10
    onnx.save(model, "chain.onnx")
    (tmp_path / "crashy.py").write_text(CRASHY)
    return tmp_path / "chain.onnx"


def test_reduce_report_with_good_bad_and_unresolved_checks(chain_model, parity_invoke):
    result = parity_invoke(
        "debug", "reduce", chain_model, "-o", "red.onnx", "--min-good", "good.onnx", "--report", "r.json", "--check", PY, "crashy.py", "parity_debug.onnx"
    )
    assert result.exit_code == 0, result.stderr
    data = load("r.json")
    validate(data, "reduce-report")
    broken_copies_fail(data, "reduce-report")
    assert (data["exit_code"], data["status"], data["error"], data["output"]) == (0, "passed", None, "red.onnx")
    found = data["result"]
    assert found["nodes"] == ["n5", "n12", "n15"] and found["total_nodes"] == 20 and found["verified"] is True
    assert found["min_good"] == "good.onnx" and found["repro"] == "red_repro" and found["repro_verified"] is True
    assert [n.name for n in onnx.load("red.onnx").graph.node] == found["nodes"]
    checks = {c["key"]: c for c in data["checks"]}
    assert checks[found["key"]]["verdict"] == "bad"
    assert data["checks"][0]["original"] and data["checks"][0]["verdict"] == "bad" and data["checks"][0]["size"] == 20
    unresolved = [c for c in data["checks"] if c["verdict"] == "unresolved"]
    assert unresolved and all("exit code 7" in c["note"] for c in unresolved)  # crashed: unresolved, never bad
    assert all(c["verdict"] != "bad" for c in data["checks"] if c["note"] and "exit code 7" in c["note"])
    counts_agree(data)
    assert data["seconds"] >= data["counts"]["check_seconds"] > 0


def test_reduce_report_when_the_original_passes(chain_model, parity_invoke):
    result = parity_invoke("debug", "reduce", chain_model, "-o", "red.onnx", "--report", "r.json", "--check", PY, "-c", "pass")
    assert result.exit_code == 2 and "does not fail the check" in result.stderr
    data = load("r.json")
    validate(data, "reduce-report")
    broken_copies_fail(data, "reduce-report")
    assert (data["status"], data["output"], data["result"]) == ("usage", None, {})
    assert "does not fail the check" in data["error"]
    assert [(c["original"], c["verdict"]) for c in data["checks"]] == [(True, "good")]
    with pytest.raises(jsonschema.ValidationError):  # an error report has no result
        validate({**data, "result": {"nodes": []}}, "reduce-report")


def test_reduce_report_path_is_refused_before_the_search(chain_model, parity_invoke):
    for bad in ("chain.onnx", "."):  # the input model, a directory
        result = parity_invoke("debug", "reduce", chain_model, "-o", "red.onnx", "--report", bad, "--check", PY, "crashy.py", "parity_debug.onnx")
        assert result.exit_code == 2 and "--report" in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (chain_model.parent / "red.onnx").exists()


def test_precision_report(tmp_path, parity_invoke):
    model = fp16_sensitive()
    model.ir_version = 10
    onnx.save(model, "model.onnx")
    assert parity_invoke("run", "model.onnx", "--onnxrt", "--save-inputs", "in.npz", "--save-outputs", "golden.npz").exit_code == 0
    check = ["--check", "parity", "run", "parity_debug.onnx", "--onnxrt", "--load-inputs", "in.npz", "--load-outputs", "golden.npz", "--atol", "1e-3", "--rtol", "1e-3"]
    result = parity_invoke("debug", "precision", "model.onnx", "-o", "mixed.onnx", "--save-nodes", "n.json", "--report", "p.json", *check)
    assert result.exit_code == 0, result.stderr
    data = load("p.json")
    validate(data, "precision-report")
    broken_copies_fail(data, "precision-report")
    found = data["result"]
    assert found["fp32_nodes"] == load("n.json")["fp32_nodes"] and found["fp32_nodes"]
    nodes = load("n.json")
    validate(nodes, "precision-nodes")
    for field in schema("precision-nodes")["required"]:
        with pytest.raises(jsonschema.ValidationError):
            validate({k: v for k, v in nodes.items() if k != field}, "precision-nodes")
    with pytest.raises(jsonschema.ValidationError):
        validate({**nodes, "fp32_nodes": "conv1"}, "precision-nodes")
    assert load("n.json")["low_precision"] == "float16" and load("n.json")["candidates"] >= len(found["fp32_nodes"])
    assert found["verified"] and {c["key"]: c["verdict"] for c in data["checks"]}[found["key"]] == "good"
    assert data["checks"][0]["original"] and data["checks"][0]["verdict"] == "bad"  # every candidate in fp16 fails
    assert data["output"] == "mixed.onnx" and data["check"] == check[1:]
    counts_agree(data)


def test_precision_report_when_fp32_fails_too(tmp_path, parity_invoke):
    onnx.save(fp16_sensitive(), "model.onnx")
    result = parity_invoke("debug", "precision", "model.onnx", "-o", "mixed.onnx", "--report", "p.json", "--check", PY, "-c", "raise SystemExit(1)")
    assert result.exit_code == 1, result.stderr
    data = load("p.json")
    validate(data, "precision-report")
    assert (data["status"], data["output"], data["result"]) == ("mismatch", None, {})
    assert "even with every node in fp32" in data["error"]
    assert {c["verdict"] for c in data["checks"]} == {"bad"}
    counts_agree(data)


def test_precision_report_path_is_refused_before_the_search(tmp_path, parity_invoke):
    onnx.save(fp16_sensitive(), "model.onnx")
    for bad in ("model.onnx", "mixed.onnx", "."):  # the input model, -o, a directory
        result = parity_invoke("debug", "precision", "model.onnx", "-o", "mixed.onnx", "--report", bad, "--check", PY, "-c", "pass")
        assert result.exit_code == 2 and "--report" in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "mixed.onnx").exists() and not (tmp_path / "parity_debug.onnx.state.json").exists()


def test_reduce_iteration_info_files_follow_their_schema(chain_model, parity_invoke):
    """What a reduce check reads from --iteration-info: each file written validates (with the candidate's size)."""
    keep = (
        "import json, shutil, sys, onnx\n"
        "info = json.load(open('info.json'))\n"
        "shutil.copy('info.json', f\"seen_{info['iteration']}.json\")\n"
        "sys.exit(any(n.name == 'n7' for n in onnx.load(info['artifact']).graph.node))\n"
    )
    Path("check.py").write_text(keep)
    result = parity_invoke("debug", "reduce", "chain.onnx", "-o", "min.onnx", "--iteration-info", "info.json", "--check", sys.executable, "check.py")
    assert result.exit_code == 0, result.stderr
    iteration_schema = json.loads(resources.files("parity").joinpath("schemas", "iteration-info.schema.json").read_text())
    seen = sorted(Path(".").glob("seen_*.json"))
    assert len(seen) >= 3
    for path in seen:
        info = load(str(path))
        jsonschema.validate(info, iteration_schema)
        assert info["size"] >= 1 and info["label"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({k: v for k, v in load(str(seen[0])).items() if k != "artifact"}, iteration_schema)
    assert not Path("info.json").exists()  # removed with the iteration's files
