"""The engine has no CLI inside it: a comparison and a debug session run without click and print nothing."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import core_models

CORE = Path(__file__).resolve().parent.parent / "core" / "parity"

# The layer rule itself (only the CLI imports parity.cli) is import-linter's: importlinter/core.ini,
# tests/test_import_contracts.py. These tests check what the contract cannot see: behaviour.

_API_RUN = """
import json, sys
from parity import RunRequest, run_comparison

model, golden, mode = sys.argv[1:4]
if mode == "pair":
    request = RunRequest(model, [("onnxrt", {}), ("onnxrt", {"graph_optimization_level": "disable"})], seed=3, iterations=2)
else:
    request = RunRequest(model, [("onnxrt", {})], load_outputs=(golden,), plugin_options={"simple": {"atol": ("1e-6",), "rtol": ("0",)}})
outcome = run_comparison(request)
pairs = [(p.actual, p.reference, p.passed) for p in outcome.summary.accuracy]
print(json.dumps({"code": outcome.code, "passed": outcome.passed, "pairs": pairs, "click": "click" in sys.modules,
                  "cli": sorted(m for m in sys.modules if m == "parity.cli" or m.startswith("parity.cli."))}))
"""


def _api(model: Path, golden: Path | str, mode: str) -> dict:
    result = subprocess.run([sys.executable, "-c", _API_RUN, str(model), str(golden), mode], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_comparison_through_the_engine_api_matches_the_cli(main, tmp_path):
    a = core_models.affine(tmp_path / "a.onnx")
    b = core_models.affine(tmp_path / "b.onnx", bias=0.501)
    golden = tmp_path / "golden.npz"
    assert main("run", a, "--onnxrt", "--save-outputs", golden)[0] == 0

    # the same comparison, from the command line and from a RunRequest (a fresh interpreter: no CLI loaded)
    cli_same = main("run", a, "--onnxrt", "--onnxrt=graph-optimization-level=disable", "--seed", "3", "--iterations", "2")
    cli_diff = main("run", b, "--onnxrt", "--load-outputs", golden, "--atol", "1e-6", "--rtol", "0")
    api_same = _api(a, "-", "pair")
    api_diff = _api(b, golden, "golden")

    assert cli_same[0] == api_same["code"] == 0 and api_same["passed"]
    assert "[onnxrt-0 vs onnxrt-1] iteration 1: PASSED" in cli_same[1]
    assert api_same["pairs"] == [["onnxrt-0", "onnxrt-1", True]]
    assert cli_diff[0] == api_diff["code"] == 1 and not api_diff["passed"]
    assert "FAILED | mismatched outputs: y (onnxrt-0 vs golden.npz:onnxrt-0)" in cli_diff[1]
    assert api_diff["pairs"] == [["onnxrt-0", "golden.npz:onnxrt-0", False]]
    # no command ran: neither `parity run` nor its printer was imported (plugins' option classes may load
    # parity.cli.parsing while they register)
    for loaded in (api_same["cli"], api_diff["cli"]):
        assert "parity.cli.run" not in loaded and "parity.cli.report" not in loaded, loaded


_DEBUG_SESSION = """
import json, sys
from parity.api import CommandCheck, DebugSession

class Recorder:
    def __init__(self):
        self.calls = []
    def iteration(self, index, verdict, seconds, info, resumed=False, note=""):
        self.calls.append(["iteration", index, verdict])
    def check_output(self, text):
        self.calls.append(["check_output", text.strip()])
    def note(self, message):
        self.calls.append(["note", message])
    def warn(self, message):
        self.calls.append(["warn", message])
    def close(self):
        self.calls.append(["close"])

check = [sys.executable, "-S", "-c", "import sys; print('check says', sys.argv[1]); sys.exit(int(sys.argv[1]))"]
recorder = Recorder() if sys.argv[1] == "recorder" else None
session = DebugSession(CommandCheck([*check, "{artifact}"]), iter_artifact="1", reporter=recorder)
session.judge("failing", lambda it: None)  # the artifact's name is the exit code: bad, output shown
session.finish()
print(json.dumps({"calls": recorder.calls if recorder else None, "click": "click" in sys.modules}))
"""


def test_the_debug_engine_reports_through_its_reporter_and_prints_nothing(tmp_path):
    """A DebugSession built in Python shows nothing by default; what the CLI would show (a bad check's output,
    the verdict) reaches the reporter it is given, and click is never imported."""
    runs = {}
    for mode in ("default", "recorder"):
        result = subprocess.run([sys.executable, "-c", _DEBUG_SESSION, mode], capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert result.stderr == ""
        runs[mode] = json.loads(result.stdout.strip().splitlines()[-1])
    assert runs["default"]["calls"] is None and not runs["default"]["click"]
    calls = runs["recorder"]["calls"]
    assert calls == [["check_output", "check says 1"], ["iteration", 0, "bad"], ["close"]], calls


def test_the_debug_engine_imports_no_ui_library():
    """Presentation (click prompts, rich progress) is the CLI's: no module of parity.debug imports click or rich."""
    for path in sorted((CORE / "debug").glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(n.split(".")[0] in ("click", "rich") for n in names), f"{path.name}:{node.lineno} imports {names}"
