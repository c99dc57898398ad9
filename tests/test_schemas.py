"""The JSON Schemas shipped in the packages validate the machine-readable outputs that real commands write.

Each output is made by running the command on real models (the bundled tiny CNN; a model built here that fails a
comparison, so the failing branches carry data too), then validated with the schema loaded from the installed
package, as a user's tooling would load it. A broken output (a required field removed, a field of the wrong type)
must fail, so the schemas are not vacuous. The debug reports of the plugins' commands are validated in their own
tests (plugins/reduce/tests/test_report_schemas.py, plugins/tactics/tests/test_build_report.py); here ``debug repeat
--report`` (the core's) and the one envelope all four share.
"""

from __future__ import annotations

import copy
import json
import sys
from importlib import resources
from importlib.util import find_spec
from pathlib import Path

import jsonschema
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "examples" / "models" / "tiny_cnn.onnx"
SHAPES = ("--input-shapes", "x:[4,3,16,16]")


def schema(package: str, name: str) -> dict:
    text = resources.files(package).joinpath("schemas", f"{name}.schema.json").read_text(encoding="utf-8")
    data = json.loads(text)
    jsonschema.Draft202012Validator.check_schema(data)
    return data


def validate(document: object, package: str, name: str) -> None:
    jsonschema.Draft202012Validator(schema(package, name)).validate(document)


def rejects(document: dict, package: str, name: str) -> None:
    """A copy without its first required field, and one with ``format`` of the wrong type, both fail."""
    spec = schema(package, name)
    broken = copy.deepcopy(document)
    del broken[spec["required"][0]]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, spec, cls=jsonschema.Draft202012Validator)
    if "format" in document:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**document, "format": 1}, spec, cls=jsonschema.Draft202012Validator)


@pytest.fixture
def drifting_model(tmp_path) -> Path:
    """y = relu(x @ W): a second model of the suite, and (with W scaled) a mismatch against its saved outputs."""
    rng = np.random.default_rng(0)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])
    w = numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])], "drift", [x], [y], [w]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    path = tmp_path / "drift.onnx"
    onnx.save(model, path)
    return path


def test_every_shipped_schema_is_a_valid_draft_2020_12_schema():
    names = {
        "parity": ["run-report", "plugins", "model", "repeat-report", "iteration-info"],
        "parity_surgeon": ["localize", "lint"],
        "parity_reduce": ["reduce-report", "precision-report", "precision-nodes"],
        "parity_tactics": ["build-report", "diff-tactics", "tactic-replay"],
    }
    for package, schemas in names.items():
        pytest.importorskip(package)
        shipped = sorted(p.name for p in resources.files(package).joinpath("schemas").iterdir() if p.name.endswith(".json"))
        assert shipped == sorted(f"{n}.schema.json" for n in schemas)
        for name in schemas:
            assert schema(package, name)["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_run_report_passing_failing_and_layerwise(tmp_path, parity_invoke, drifting_model):
    report = tmp_path / "r.json"
    result = parity_invoke("run", TINY, "--onnxrt", "--onnxrt", *SHAPES, "--validate", "--report", report)
    assert result.exit_code == 0, result.stderr
    validate(json.loads(report.read_text()), "parity", "run-report")
    rejects(json.loads(report.read_text()), "parity", "run-report")

    layerwise = tmp_path / "l.json"
    result = parity_invoke("run", TINY, "--onnxrt", "--onnxrt", *SHAPES, "--onnx-outputs", "mark", "all", "--report", layerwise)
    assert result.exit_code == 0, result.stderr
    data = json.loads(layerwise.read_text())
    assert data["layerwise"] and data["layerwise"][0]["tensors"]
    validate(data, "parity", "run-report")

    # a mismatch: outputs saved from the model, then perturbed, as golden values
    golden = tmp_path / "golden.json"
    assert parity_invoke("run", drifting_model, "--onnxrt", "--save-outputs", golden).exit_code == 0
    text = golden.read_text()
    assert '"y"' in text
    failing = tmp_path / "f.json"
    inputs = tmp_path / "in.json"
    assert parity_invoke("run", drifting_model, "--onnxrt", "--save-inputs", inputs).exit_code == 0
    other = tmp_path / "other.onnx"
    model = onnx.load(drifting_model)
    model.graph.initializer[0].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(model.graph.initializer[0]) * 1.01, "w"))
    onnx.save(model, other)
    result = parity_invoke("run", other, "--onnxrt", "--load-inputs", inputs, "--load-outputs", golden, "--report", failing)
    assert result.exit_code == 1, result.stderr
    data = json.loads(failing.read_text())
    assert data["passed"] is False and data["exit_code"] == 1
    validate(data, "parity", "run-report")


def test_plugins_json(parity_invoke):
    result = parity_invoke("plugins", "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert any(p["name"] == "onnxrt" for p in data)
    validate(data, "parity", "plugins")
    with pytest.raises(jsonschema.ValidationError):
        validate([{**data[0], "hooks": "not a list"}], "parity", "plugins")


def test_inspect_model_json(tmp_path, parity_invoke, drifting_model):
    for model in (TINY, drifting_model):
        result = parity_invoke("inspect", "model", model, "--json")
        assert result.exit_code == 0, result.stderr
        data = json.loads(result.stdout)
        validate(data, "parity", "model")
        rejects(data, "parity", "model")
    assert data["inputs"] == {"x": {"dtype": "float32", "shape": [1, 8]}}
    assert data["outputs"] == {"y": {"dtype": "float32", "shape": [1, 8]}}
    assert data["nodes"] == 2 and data["initializers"] == 1 and data["opsets"] == {"ai.onnx": 17}


def test_localize_report(tmp_path, parity_invoke):
    pytest.importorskip("parity_surgeon")
    report = tmp_path / "loc.json"
    result = parity_invoke("debug", "localize", TINY, "--onnxrt", "--onnxrt", *SHAPES, "--report", report)
    assert result.exit_code == 0, result.stderr
    data = json.loads(report.read_text())
    assert data["divergence"]["tensors"]
    validate(data, "parity_surgeon", "localize")
    rejects(data, "parity_surgeon", "localize")


def test_lint_report(tmp_path, parity_invoke):
    pytest.importorskip("parity_surgeon")
    model = onnx.load(TINY)
    model.graph.node[0].name = model.graph.node[1].name  # duplicate node names: lint reports an issue
    bad = tmp_path / "dup.onnx"
    onnx.save(model, bad)
    for path in (TINY, bad):
        out = tmp_path / f"{path.stem}.lint.json"
        result = parity_invoke("check", "lint", path, "-o", out)
        assert result.exit_code in (0, 1), result.stderr
        data = json.loads(out.read_text())
        validate(data, "parity_surgeon", "lint")
        rejects(data, "parity_surgeon", "lint")
    assert data["issues"], "the broken model should have lint issues"


def check_counts(report: dict) -> None:
    """The counts a debug report gives agree with its list of checks (resumed ones included)."""
    checks = report["checks"]
    for verdict in ("good", "bad", "unresolved"):
        assert report["counts"][verdict] == sum(c["verdict"] == verdict for c in checks), verdict
    assert report["counts"]["checks"] + report["counts"]["resumed"] == len(checks)
    assert [c["iteration"] for c in checks] == sorted(c["iteration"] for c in checks)


def test_debug_repeat_report(tmp_path, parity_invoke, monkeypatch):
    """good, bad and unresolved checks of `debug repeat --report`, each reported as what it was."""
    monkeypatch.chdir(tmp_path)
    # exit 1 on the 2nd run (bad), exit 5 on the 3rd (not a --fail-code: unresolved), else 0
    script = tmp_path / "flaky.py"
    script.write_text(
        "import pathlib, sys\np = pathlib.Path('n.txt')\nn = int(p.read_text()) if p.exists() else 0\np.write_text(str(n + 1))\n"
        "sys.exit({1: 1, 2: 5}.get(n, 0))\n"
    )
    report = tmp_path / "repeat.json"
    result = parity_invoke("debug", "repeat", "--until", "4", "--fail-code", "1", "--report", report, "--check", sys.executable, "-S", script)
    assert result.exit_code == 1, result.stderr
    data = json.loads(report.read_text())
    validate(data, "parity", "repeat-report")
    rejects(data, "parity", "repeat-report")
    assert [c["verdict"] for c in data["checks"]] == ["good", "bad", "unresolved", "good"]
    assert data["checks"][2]["note"] and "exit code 5" in data["checks"][2]["note"]
    assert (data["exit_code"], data["status"], data["error"]) == (1, "mismatch", None)
    assert data["result"] == {"iterations": 4, "until": "4", "good": 2, "bad": 1, "unresolved": 1}
    check_counts(data)
    # an unresolved check reported as bad, or a result missing while no error is given, fails the schema
    with pytest.raises(jsonschema.ValidationError):
        validate({**data, "checks": [{**data["checks"][2], "verdict": "failed"}]}, "parity", "repeat-report")
    with pytest.raises(jsonschema.ValidationError):
        validate({**data, "result": {}}, "parity", "repeat-report")


def test_debug_repeat_report_of_a_run_stopped_by_unresolved_checks(tmp_path, parity_invoke, monkeypatch):
    monkeypatch.chdir(tmp_path)
    report = tmp_path / "repeat.json"
    result = parity_invoke("debug", "repeat", "--until", "9", "--fail-code", "1", "--report", report, "--check", "sh", "-c", "exit 5")
    assert result.exit_code == 3, result.stderr
    data = json.loads(report.read_text())
    validate(data, "parity", "repeat-report")
    assert data["error"] and "unresolved" in data["error"] and data["result"] == {} and data["status"] == "failure"
    assert {c["verdict"] for c in data["checks"]} == {"unresolved"}
    check_counts(data)


def test_debug_report_option_refuses_a_bad_path_before_any_check(tmp_path, parity_invoke, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dir").mkdir()
    result = parity_invoke("debug", "repeat", "--until", "2", "--report", tmp_path / "dir", "--check", "true")
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1 and "--report" in result.stderr
    assert "Finished" not in result.stdout


def test_debug_report_schemas_share_one_envelope():
    """The four debug reports are self-contained schemas with the same envelope: only their result differs."""
    owners = [("parity_reduce", "reduce-report"), ("parity_reduce", "precision-report"), ("parity_tactics", "build-report")]
    specs = [schema(package, name) for package, name in owners if find_spec(package)]
    assert specs, "no plugin that writes a debug report is installed"
    base = schema("parity", "repeat-report")
    for spec in specs:
        assert spec["$defs"] == base["$defs"]
        assert spec["required"] == base["required"]
        skip = {"format", "command", "model", "output"}
        assert {k: v for k, v in spec["properties"].items() if k not in skip} == {k: v for k, v in base["properties"].items() if k not in skip}


def test_iteration_info_files_of_a_repeat_loop(tmp_path, parity_invoke, monkeypatch):
    """Each --iteration-info file a check reads validates against parity/schemas/iteration-info.schema.json."""
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "keep.py"
    script.write_text("import json, shutil\ninfo = json.load(open('info.json'))\nshutil.copy('info.json', f\"seen_{info['iteration']}.json\")\n")
    result = parity_invoke("debug", "repeat", "--until", "3", "--iteration-info", "info.json", "--check", sys.executable, "-S", script)
    assert result.exit_code == 0, result.stderr
    seen = [json.loads((tmp_path / f"seen_{i}.json").read_text()) for i in range(3)]
    for index, info in enumerate(seen):
        validate(info, "parity", "iteration-info")
        assert (info["iteration"], info["key"], info["label"]) == (index, f"N{index}", f"iteration {index}")
    rejects(seen[0], "parity", "iteration-info")
