"""-v/-q written between a tool and its subtool (Polygraphy's own tests call ``polygraphy surgeon -v sanitize``)
take effect exactly as they do after the subtool's name."""

from __future__ import annotations

import pytest

from parity.cli.parsing import move_loudness


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["-v", "sanitize", "m.onnx"], ["sanitize", "-v", "m.onnx"]),
        (["-vv", "--verbosity", "info", "reduce", "x"], ["reduce", "-vv", "--verbosity", "info", "x"]),
        (["--quiet", "--verbosity=error", "model", "m"], ["model", "--quiet", "--verbosity=error", "m"]),
        (["sanitize", "-v"], ["sanitize", "-v"]),  # already after the name
        (["-v", "--help"], ["-v", "--help"]),  # no subcommand name follows: click judges it
        (["-x", "sanitize"], ["-x", "sanitize"]),  # not a loudness flag: click refuses it as before
        (["-v"], ["-v"]),
    ],
)
def test_move_loudness(args: list[str], expected: list[str]) -> None:
    assert move_loudness(args) == expected


def test_verbose_before_the_subtool_runs_the_command(parity_invoke, relu_add_model, tmp_path) -> None:
    before = parity_invoke("surgeon", "-v", "sanitize", relu_add_model, "-o", tmp_path / "a.onnx", "--fold-constants")
    after = parity_invoke("surgeon", "sanitize", relu_add_model, "-o", tmp_path / "b.onnx", "--fold-constants", "-v")
    assert before.exit_code == after.exit_code == 0, before.stderr
    assert before.stdout.replace("a.onnx", "b.onnx") == after.stdout
    assert (tmp_path / "a.onnx").read_bytes() == (tmp_path / "b.onnx").read_bytes()


def test_quiet_before_the_subtool_quiets_it(parity_invoke, relu_add_model) -> None:
    loud = parity_invoke("inspect", "model", relu_add_model)
    quiet = parity_invoke("inspect", "-q", "model", relu_add_model)
    assert loud.exit_code == quiet.exit_code == 0
    assert loud.stdout.strip() and len(quiet.stdout) < len(loud.stdout)


def test_unknown_option_before_the_subtool_is_still_refused(parity_invoke) -> None:
    result = parity_invoke("surgeon", "-x", "sanitize")
    assert result.exit_code == 2
    assert "No such option '-x'" in result.stderr
