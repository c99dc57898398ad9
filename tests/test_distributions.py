"""A core-only install knows its first-party distributions: an option or command of a first-party plugin that is not loaded gets one
line naming the distribution that provides it, and core/parity/distributions.json stays in step with the plugins."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from parity import distributions

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "examples" / "models" / "tiny_cnn.onnx"
HELPS = [["run", "--help"], ["convert", "--help"], ["inspect", "model", "--help"], ["--help"], ["debug", "--help"], ["inspect", "--help"], ["debug", "repeat", "--help"]]


def parity(*args: object, **env: str) -> subprocess.CompletedProcess:
    full = {**{k: v for k, v in os.environ.items() if not k.startswith("PARITY_")}, "COLUMNS": "200", **env}
    return subprocess.run([sys.executable, "-m", "parity", *map(str, args)], capture_output=True, text=True, env=full, timeout=120)


def surface(**env: str) -> tuple[set[str], set[str]]:
    """Every option the help pages show, and every command path."""
    options, commands = set(), set()
    for page in HELPS:
        out = parity(*page, **env).stdout
        options |= set(re.findall(r"(?<![\w-])(--[a-z0-9][a-z0-9-]*[a-z0-9])(?![\w-])", out))
        if page[0] not in ("run", "convert") and "Commands:" in out:
            prefix = " ".join(page[:-1])
            commands |= {f"{prefix} {m}".strip() for m in re.findall(r"^  ([a-z][\w-]*)", out.split("Commands:", 1)[1], re.M)}
    return options, commands


def test_the_catalogue_matches_what_each_plugin_adds():
    members = {m.extra: m for m in distributions.members()}
    assert set(members) == {p.name for p in (ROOT / "plugins").iterdir() if (p / "pyproject.toml").is_file()}
    all_options, all_commands = surface()
    for extra, member in members.items():
        options, commands = surface(PARITY_DISABLE_PLUGINS=extra)
        added_options, added_commands = all_options - options, all_commands - commands
        assert added_options <= set(member.options), f"{member.distribution} adds options distributions.json lacks: {sorted(added_options - set(member.options))}"
        assert added_commands <= set(member.commands), f"{member.distribution} adds commands distributions.json lacks: {sorted(added_commands - set(member.commands))}"
        assert set(member.options) <= all_options and set(member.commands) <= all_commands, f"distributions.json lists what {member.distribution} does not add"


def test_an_option_or_command_of_a_plugin_not_loaded_names_its_distribution():
    cases = {
        ("run", MODEL, "--onnxrt"): "--onnxrt is provided by parity-onnxrt",
        ("run", MODEL, "--trt", "--save-engine", "x.engine"): "--trt is provided by parity-trt",
        ("surgeon", "sanitize", MODEL): "'parity surgeon' is provided by parity-surgeon",
        ("debug", "reduce", MODEL): "'parity debug reduce' is provided by parity-reduce",
        ("inspect", "tactics", "t.json"): "'parity inspect tactics' is provided by parity-tactics",
    }
    for args, expected in cases.items():
        proc = parity(*args, PARITY_LOAD_PLUGINS="")  # no installed plugin loads: a core-only install
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and expected in lines[0], proc.stderr
        assert "parity plugins" in lines[0] and "Traceback" not in proc.stderr  # installed here, but not loaded


def test_a_distribution_not_installed_is_named_with_its_install_command():
    absent = distributions.Member("parity-absent-for-test", "absent", ("--absent",), ())
    assert not absent.installed and absent.remedy() == 'pip install "parity[absent]"'


def test_other_usage_errors_are_one_line_with_exit_2():
    for args in (("run", MODEL, "--onnxrt", "--no-such-flag"), ("run", MODEL, "--onnxrt", "--iterations", "x"), ("no-such-command",)):
        proc = parity(*args)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("parity: error: ") and "--help" in lines[0], proc.stderr


def test_parity_plugins_lists_the_members_not_installed(tmp_path):
    """A catalogue naming a distribution that is not installed: `parity plugins` says how to get it."""
    data = json.loads((ROOT / "core" / "parity" / "distributions.json").read_text())
    assert data["format"] == "parity-distributions"
    listing = parity("plugins").stdout
    missing = [m for m in distributions.members() if not m.installed]
    for member in missing:
        assert f"not installed: {member.distribution}" in listing
    if not missing:  # everything is installed here: the listing has no such line
        assert "not installed:" not in listing
