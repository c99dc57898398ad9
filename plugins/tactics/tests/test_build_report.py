"""``debug build --report``: the report validates against the schema this plugin ships (loaded from the installed
package), through the real CLI against the TensorRT model (trt_model, each modelled version; the real TensorRT
where it imports) and through the Python API with stand-in builders for bad builds and unresolved checks.
Broken copies must fail the schema."""

from __future__ import annotations

import copy
import json
import sys
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
from parity_tactics.debug_build import debug_build
from test_tactics_flows import make_model

from parity.api import BackendError, Outcome
from parity.testing import invoke


def validate(document: dict) -> None:
    spec = json.loads(resources.files("parity_tactics").joinpath("schemas", "build-report.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(spec)
    jsonschema.validate(document, spec, cls=jsonschema.Draft202012Validator)


def counts_agree(report: dict) -> None:
    for verdict in ("good", "bad", "unresolved"):
        assert report["counts"][verdict] == sum(c["verdict"] == verdict for c in report["checks"]), verdict
        if report["error"] is None:
            assert report["result"][verdict] == report["counts"][verdict]


def test_cli_report_against_the_tensorrt_model(trt_backend, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = make_model(tmp_path / "model.onnx")
    # good, then bad (exit 1), then unresolved (exit 5: not a --fail-code)
    (tmp_path / "check.py").write_text(
        "import pathlib, sys\np = pathlib.Path('n.txt')\nn = int(p.read_text()) if p.exists() else 0\np.write_text(str(n + 1))\n"
        "sys.exit({1: 1, 2: 5}.get(n, 0))\n"
    )
    result = invoke("debug", "build", model, "--until=3", "--fail-code", "1", "--artifacts-dir", "replays", "--report", "b.json", "--check", sys.executable, "check.py")
    assert result.exit_code == 1, result
    data = json.loads(Path("b.json").read_text())
    validate(data)
    assert [c["verdict"] for c in data["checks"]] == ["good", "bad", "unresolved"]
    assert (data["exit_code"], data["status"], data["error"], data["output"]) == (1, "mismatch", None, "replays")
    assert data["result"]["builds"] == 3 and data["result"]["build_errors"] == {}
    assert data["check"] == [sys.executable, "check.py"] and data["model"] == str(model)
    counts_agree(data)
    for field in ("checks", "counts", "status"):
        broken = copy.deepcopy(data)
        del broken[field]
        with pytest.raises(jsonschema.ValidationError):
            validate(broken)
    with pytest.raises(jsonschema.ValidationError):
        validate({**data, "result": {k: v for k, v in data["result"].items() if k != "unresolved"}})


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.onnx").write_bytes(b"onnx")
    return tmp_path


def test_failed_builds_and_unresolved_checks(workdir):
    def builder(model, engine, options):  # iteration 1 fails to build
        count = len(list(workdir.glob("built_*")))
        (workdir / f"built_{count}").touch()
        if count == 1:
            raise BackendError("TensorRT failed to build the engine\nmore detail")
        Path(engine).write_bytes(b"engine")

    verdicts = iter([Outcome(False), Outcome(False, unresolved=True, note="exit code 5")])  # iteration 1: no check
    result = debug_build("model.onnx", 3, lambda it: next(verdicts), build=builder, report="b.json")
    data = json.loads(Path("b.json").read_text())
    validate(data)
    assert result.exit_code == 1 and data["exit_code"] == 1
    assert [c["verdict"] for c in data["checks"]] == ["good", "bad", "unresolved"]
    assert data["checks"][1]["note"] == "build failed: TensorRT failed to build the engine"
    assert data["result"]["build_errors"] == {"1": "TensorRT failed to build the engine"}
    assert data["check"] is None  # a Python check
    counts_agree(data)


def test_only_unresolved_checks_exit_3(workdir):
    def builder(model, engine, options):
        Path(engine).write_bytes(b"engine")

    result = debug_build("model.onnx", 2, lambda it: Outcome(False, unresolved=True, note="no input"), build=builder, report="b.json")
    data = json.loads(Path("b.json").read_text())
    validate(data)
    assert result.exit_code == 3 and (data["exit_code"], data["status"], data["error"]) == (3, "failure", None)
    assert {c["verdict"] for c in data["checks"]} == {"unresolved"}
    counts_agree(data)
