"""The tactic replay files and ``inspect diff-tactics --json`` validate against the schemas this plugin ships
(tactic-replay.schema.json, diff-tactics.schema.json, loaded from the installed package).

Real outputs only: replays recorded by ``run --trt``, ``convert`` and ``debug build`` against the TensorRT model
(trt_model, each modelled version; the real TensorRT where it imports), ``inspect tactics --json`` of those and of
Polygraphy's files, and ``diff-tactics --json`` of debug build's sorted replays and of the simulated flaky builds
(tactics_synth). Broken copies (a required field removed, a wrong type) must fail the schemas.
"""

from __future__ import annotations

import base64
import copy
import json
import sys
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
from parity_tactics.replay import load_replay
from tactics_synth import simulate, write_polygraphy_replay, write_sorted
from test_tactics_flows import make_model

from parity.testing import invoke


def schema(name: str) -> dict:
    return json.loads(resources.files("parity_tactics").joinpath("schemas", f"{name}.schema.json").read_text(encoding="utf-8"))


def validate(document: dict, name: str) -> None:
    spec = schema(name)
    jsonschema.Draft202012Validator.check_schema(spec)
    jsonschema.validate(document, spec, cls=jsonschema.Draft202012Validator)


def invalid(document: dict, name: str) -> None:
    with pytest.raises(jsonschema.ValidationError):
        validate(document, name)


def without(document: dict, *path: str | int) -> dict:
    """A deep copy of ``document`` with the field at ``path`` removed."""
    broken = copy.deepcopy(document)
    parent = broken
    for key in path[:-1]:
        parent = parent[key]
    del parent[path[-1]]
    return broken


def replaced(document: dict, value: object, *path: str | int) -> dict:
    """A deep copy of ``document`` with the field at ``path`` set to ``value``."""
    broken = copy.deepcopy(document)
    parent = broken
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return broken


def replay_rejects_broken_copies(replay: dict) -> None:
    for field in ("format", "version", "source", "tactics"):
        invalid(without(replay, field), "tactic-replay")
    invalid(replaced(replay, "1", "version"), "tactic-replay")
    invalid(replaced(replay, 2, "version"), "tactic-replay")  # a newer version is another schema's
    invalid(replaced(replay, "polygraphy", "format"), "tactic-replay")
    invalid(replaced(replay, "cache", "source"), "tactic-replay")
    invalid(replaced(replay, [], "tactics"), "tactic-replay")
    key, entry = next(iter(replay["tactics"].items()))
    invalid(without(replay, "tactics", key, "tactic"), "tactic-replay")
    invalid(replaced(replay, int(entry["tactic"], 16), "tactics", key, "tactic"), "tactic-replay")  # hex text, not a number
    invalid(replaced(replay, "0x3e8", "tactics", key, "tactic"), "tactic-replay")  # always 16 digits
    invalid(replaced(replay, "fast", "tactics", key, "timing_ms"), "tactic-replay")
    if "inputs" in entry:
        invalid(without(replay, "tactics", key, "outputs"), "tactic-replay")  # written together
        if entry["inputs"]:
            invalid(without(replay, "tactics", key, "inputs", 0, "dtype"), "tactic-replay")
            invalid(replaced(replay, "4,1", "tactics", key, "inputs", 0, "strides"), "tactic-replay")
        invalid(replaced(replay, "-2147483642", "tactics", key, "implementation"), "tactic-replay")
    if "timing_cache" in replay:
        invalid(without(replay, "timing_cache", "data"), "tactic-replay")
        invalid(replaced(replay, "hex", "timing_cache", "encoding"), "tactic-replay")
        invalid(replaced(replay, str(replay["timing_cache"]["size"]), "timing_cache", "size"), "tactic-replay")
    # readers ignore fields they do not know, and so does the schema
    validate({**replay, "recorded_by": "someone"}, "tactic-replay")
    validate(replaced(replay, {**entry, "note": "x"}, "tactics", key), "tactic-replay")


def diff_rejects_broken_copies(result: dict) -> None:
    for field in ("format", "version", "determined", "reason", "suspects", "skipped", "good_replays", "bad_replays", "unexplained_bad_replays"):
        invalid(without(result, field), "diff-tactics")
    invalid(replaced(result, "1", "version"), "diff-tactics")
    invalid(replaced(result, "parity-tactics", "format"), "diff-tactics")
    invalid(replaced(result, "yes", "determined"), "diff-tactics")
    invalid(replaced(result, 2.5, "good_replays"), "diff-tactics")
    invalid(replaced(result, not result["determined"], "determined"), "diff-tactics")  # determined agrees with reason and suspects
    invalid(replaced(result, [{"path": "x.json"}], "skipped"), "diff-tactics")
    if result["suspects"]:
        for field in ("rank", "key", "tactic", "p_value", "bad_only"):
            invalid(without(result, "suspects", 0, field), "diff-tactics")
        invalid(replaced(result, "1", "suspects", 0, "rank"), "diff-tactics")
        invalid(replaced(result, 1.5, "suspects", 0, "p_value"), "diff-tactics")
        invalid(without(result, "suspects", 0, "tactic", "tactic"), "diff-tactics")
        invalid(replaced(result, "because", "reason"), "diff-tactics")
    else:
        invalid(replaced(result, None, "reason"), "diff-tactics")
    validate({**result, "key_kind": "layer"}, "diff-tactics")  # a field a later version may add


def diff_json(*args: str) -> dict:
    """``inspect diff-tactics ... --json``; ``debug diff-tactics`` (Polygraphy's older name) must print the same."""
    outputs = []
    for group in ("inspect", "debug"):
        result = invoke(group, "diff-tactics", *args, "--json")
        assert result.exit_code == 0, result
        outputs.append(json.loads(result.stdout))
    assert outputs[0] == outputs[1]
    return outputs[0]


def test_the_schemas_ship_as_package_data_and_share_the_tactic_definition():
    replay, diff = schema("tactic-replay"), schema("diff-tactics")
    assert replay["$id"] == "urn:parity:schema:tactic-replay:1" and diff["$id"] == "urn:parity:schema:diff-tactics:1"
    assert replay["$schema"] == diff["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    for name in ("tactic", "tensor_format"):  # one definition of a tactic in both (self-contained schemas)
        assert diff["$defs"][name] == replay["$defs"][name], name


def test_replays_recorded_through_the_cli_against_the_tensorrt_model(trt_backend, tmp_path, monkeypatch):
    trt = trt_backend
    monkeypatch.chdir(tmp_path)
    model = make_model(tmp_path / "model.onnx")
    assert invoke("run", model, "--trt", "--save-tactics", "run.json").exit_code == 0
    result = invoke("convert", model, "-o", "m.engine", "--save-tactics", "convert.json")
    assert result.exit_code == 0, result
    for name in ("run.json", "convert.json"):
        replay = json.loads(Path(name).read_text())
        validate(replay, "tactic-replay")
        assert replay["tensorrt"] == trt.__version__ and replay["tactics"]
        if replay["source"] == "timing-cache":
            assert len(base64.b64decode(replay["timing_cache"]["data"])) == replay["timing_cache"]["size"]
            assert any("kernel" in entry for entry in replay["tactics"].values())
        else:
            assert all({"implementation", "inputs", "outputs"} <= set(entry) for entry in replay["tactics"].values())
        replay_rejects_broken_copies(replay)
        # inspect tactics --json prints the same document
        shown = invoke("inspect", "tactics", name, "--json")
        assert shown.exit_code == 0, shown
        assert json.loads(shown.stdout) == replay
    # a replay with a field this version does not know still loads, and still validates
    extended = {**json.loads(Path("run.json").read_text()), "recorded_by": "someone"}
    Path("extended.json").write_text(json.dumps(extended))
    validate(extended, "tactic-replay")
    assert load_replay("extended.json").tactics == load_replay("run.json").tactics


def test_debug_build_replays_and_their_diff_against_the_tensorrt_model(trt_backend, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = make_model(tmp_path / "model.onnx")
    # good, bad, good: debug build sorts each build's replay into replays/good or replays/bad
    (tmp_path / "check.py").write_text(
        "import pathlib, sys\np = pathlib.Path('n.txt')\nn = int(p.read_text()) if p.exists() else 0\np.write_text(str(n + 1))\n"
        "sys.exit(1 if n == 1 else 0)\n"
    )
    result = invoke("debug", "build", model, "--save-tactics", "replay.json", "--artifacts", "replay.json", "--artifacts-dir", "replays",
                    "--until=3", "--check", sys.executable, "-S", "check.py")
    assert result.exit_code == 1, result
    sorted_replays = sorted(Path("replays").rglob("*.json"))
    assert len(sorted_replays) == 3
    for path in sorted_replays:
        validate(json.loads(path.read_text()), "tactic-replay")
    data = diff_json("--dir", "replays")
    validate(data, "diff-tactics")
    assert (data["format"], data["version"], data["good_replays"], data["bad_replays"]) == ("parity-diff-tactics", 1, 2, 1)
    assert data["determined"] == bool(data["suspects"]) == (data["reason"] is None)
    diff_rejects_broken_copies(data)


@pytest.mark.parametrize("source", ["algorithm-selector", "timing-cache"])
def test_diff_tactics_json_of_simulated_flaky_builds(tmp_path, monkeypatch, source):
    monkeypatch.chdir(tmp_path)
    good, bad = simulate(30, culprits=[(6, 1)], seed=2, source=source)
    write_sorted(tmp_path / "replays", good, bad)
    (tmp_path / "replays" / "good" / "golden.json").write_text('{"lst": []}')  # not a replay: skipped, and listed
    for path in (tmp_path / "replays").rglob("replay_*.json"):
        validate(json.loads(path.read_text()), "tactic-replay")

    data = diff_json("--dir", "replays")
    validate(data, "diff-tactics")
    assert (data["format"], data["version"]) == ("parity-diff-tactics", 1)
    assert data["determined"] and data["reason"] is None and data["suspects"][0]["rank"] == 1
    assert [entry["path"] for entry in data["skipped"]] == [str(Path("replays/good/golden.json"))]
    assert (data["good_replays"], data["bad_replays"]) == (len(good), len(bad))
    diff_rejects_broken_copies(data)

    # the same replays named as folders and files
    files = diff_json("--good", "replays/good", *(arg for path in sorted(Path("replays/bad").glob("*.json")) for arg in ("--bad", str(path))))
    validate(files, "diff-tactics")
    assert files["suspects"] == data["suspects"]

    # nothing determined: no bad replays
    Path("replays/none").mkdir()
    data = diff_json("--good", "replays/good", "--bad", "replays/none")
    validate(data, "diff-tactics")
    assert not data["determined"] and data["reason"] == "no bad tactic replays" and data["suspects"] == []
    diff_rejects_broken_copies(data)


def test_inspect_tactics_json_converts_polygraphy_files_to_the_schema(tmp_path):
    # a real Polygraphy 0.53 file (written by Polygraphy's own encoder)
    write_polygraphy_replay(tmp_path / "pg.json", {"/conv1/Conv": [-2147483642, -4566512812484733616, [["FLOAT", [4, 1], -1, 1]], [["HALF", [4, 1], 0, 2]]]})
    shown = invoke("inspect", "tactics", str(tmp_path / "pg.json"), "--json")
    assert shown.exit_code == 0, shown
    converted = json.loads(shown.stdout)
    validate(converted, "tactic-replay")
    assert converted["tactics"]["/conv1/Conv"]["tactic"] == "0xc0a07cca9d93d550" and "tensorrt" not in converted
    replay_rejects_broken_copies(converted)


def test_inspect_tactics_json_of_an_old_polygraphy_pair_file(tmp_path):
    # Polygraphy < 0.42 wrote tensor infos as [format, dtype] pairs: the conversion keeps the format
    (tmp_path / "old.json").write_text(json.dumps({"replay": {"L": {"implementation": 1, "tactic": 2,
                                                                    "inputs": [["TensorFormat.LINEAR", "DataType.FLOAT"]],
                                                                    "outputs": [["TensorFormat.CHW2", "DataType.HALF"]]}}}))
    shown = invoke("inspect", "tactics", str(tmp_path / "old.json"), "--json")
    assert shown.exit_code == 0, shown
    converted = json.loads(shown.stdout)
    validate(converted, "tactic-replay")
    assert converted["tactics"]["L"]["inputs"][0] == {"dtype": "FLOAT", "strides": [], "vectorized_dim": -1, "components_per_element": 1,
                                                     "format": "TensorFormat.LINEAR"}
    replay_rejects_broken_copies(converted)
