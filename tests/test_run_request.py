"""``parity run``'s engine takes a typed request built in Python (no click) and any reporter; it names options
as the request spells them and never builds a flag from a parameter name (issue 27)."""

from __future__ import annotations

import ast
from pathlib import Path

import core_models
import pytest

from parity import RunRequest, run_comparison
from parity.errors import UsageError
from parity.reporting import QuietReporter, RunReporter, run_reporter

CORE = Path(__file__).resolve().parent.parent / "core" / "parity"
ENGINE = ("run_engine.py", "from_options.py")


class OldReporter:
    """A third party's reporter written before ``progress``, ``nonfinite`` and ``note`` existed; it counts how
    often the engine looks each of its attributes up."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.lookups: dict[str, int] = {}

    def __getattribute__(self, name: str):
        if not name.startswith("_") and name not in ("lines", "lookups"):
            counts = object.__getattribute__(self, "lookups")
            counts[name] = counts.get(name, 0) + 1
        return object.__getattribute__(self, name)

    def warning(self, message: str) -> None:
        self.lines.append(f"warning: {message}")

    def iteration(self, index: int, pairs) -> None:
        self.lines.extend(f"{p.actual} vs {p.reference} {index}: {p.iterations[index].passed}" for p in pairs)

    def divergence(self, reports) -> None:
        self.lines.append(f"divergence: {len(reports)}")

    def summary(self, summary) -> None:
        self.lines.append(f"summary: {summary.iterations} iteration(s)")


def test_a_typed_request_and_an_old_reporter_run_without_click(tmp_path):
    model = core_models.affine(tmp_path / "a.onnx")
    golden = tmp_path / "golden.npz"
    reporter = OldReporter()
    request = RunRequest(
        str(model),
        [("onnxrt", {}), ("onnxrt", {"graph_optimization_level": "disable"})],  # typed settings, as the CLI casts them
        seed=3,
        iterations=3,
        save_outputs=str(golden),
        plugin_options={"simple": {"atol": ("1e-6",), "rtol": ("0",)}},
    )
    outcome = run_comparison(request, reporter)
    assert outcome.passed and outcome.code == 0 and golden.is_file()
    assert reporter.lines == [
        "onnxrt-0 vs onnxrt-1 0: True",
        "onnxrt-0 vs onnxrt-1 1: True",
        "onnxrt-0 vs onnxrt-1 2: True",
        "divergence: 0",
        "summary: 3 iteration(s)",
    ]
    # completed once: the methods it lacks were looked up when it was wrapped, not at each of the 3 iterations
    assert all(reporter.lookups.get(name, 0) <= 1 for name in ("progress", "note", "nonfinite")), reporter.lookups
    assert reporter.lookups["iteration"] == 1


def test_the_old_positional_option_mapping_fails_loudly():
    with pytest.raises(TypeError):
        RunRequest("m.onnx", [("onnxrt", {})], {"seed": 3})  # type: ignore[misc]


def test_run_reporter_completes_once_and_keeps_subclasses():
    quiet = QuietReporter()
    assert run_reporter(quiet) is quiet and isinstance(run_reporter(None), QuietReporter)
    completed = run_reporter(OldReporter())
    assert isinstance(completed, RunReporter)
    completed.progress("iterations", 1, 2, "")  # the defaults: nothing happens
    completed.note("wrote")
    completed.nonfinite([])


def test_messages_name_options_as_the_request_spells_them(tmp_path):
    model = core_models.affine(tmp_path / "a.onnx")
    folder = tmp_path / "out"
    folder.mkdir()
    as_python = RunRequest(str(model), [("onnxrt", {})], save_outputs=str(folder))
    with pytest.raises(UsageError, match=r"^save_outputs /"):
        run_comparison(as_python)
    as_typed = RunRequest(str(model), [("onnxrt", {})], save_outputs=str(folder), flags={"save_outputs": "--save-results"})
    with pytest.raises(UsageError, match=r"^--save-results /"):
        run_comparison(as_typed)


def test_the_command_line_spells_the_flag_the_user_knows(main, tmp_path):
    model = core_models.affine(tmp_path / "a.onnx")
    folder = tmp_path / "out"
    folder.mkdir()
    code, _, err = main("run", model, "--onnxrt", "--save-outputs", folder)
    assert code == 2 and err.strip().splitlines()[-1].startswith(f"parity: error: --save-outputs {folder}: ")


def test_a_runner_gets_its_own_backends_group_and_no_other():
    request = RunRequest("m.onnx", seed=5, plugin_options={"onnxrt": {"providers": ("cpu",)}, "trt": {"fp16": True}, "simple": {"atol": ("1",)}})
    mine = request.options(leave_out=("trt",))
    assert mine["seed"] == 5 and mine["providers"] == ("cpu",) and mine["atol"] == ("1",) and "fp16" not in mine
    assert "model" not in mine and "flags" not in mine and "plugin_options" not in mine


def _flag_building(path: Path) -> list[str]:
    """``"--" + name``, ``f"--{name}..."`` and ``name.replace("_", "-")`` in ``path``: a flag made from a name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        where = f"{path.name}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left = node.left
            if isinstance(left, ast.Constant) and isinstance(left.value, str) and left.value.endswith("--"):
                found.append(where)
        elif isinstance(node, ast.JoinedStr):
            parts = node.values
            for before, after in zip(parts, parts[1:]):
                if isinstance(before, ast.Constant) and str(before.value).endswith("--") and isinstance(after, ast.FormattedValue):
                    found.append(where)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "replace":
            args = [a.value for a in node.args if isinstance(a, ast.Constant)]
            if args == ["_", "-"]:
                found.append(where)
    return found


@pytest.mark.parametrize("module", ENGINE)
def test_the_engine_builds_no_flag_from_a_parameter_name(module):
    assert _flag_building(CORE / module) == []


def test_the_flag_check_sees_what_it_looks_for(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('a = "--" + name\nb = f"--{name}"\nc = f"the --{name} file"\nd = name.replace("_", "-")\ne = "--save-outputs"\n')
    assert _flag_building(sample) == ["sample.py:1", "sample.py:2", "sample.py:3", "sample.py:4"]
