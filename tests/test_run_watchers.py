"""The hook ``parity_watch_run`` (docs/plugins/reports.md): a plugin's report watches a run, told of each step in
order, as parity-reports is; without parity-reports, ``parity run`` works and its options do not exist."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TINY = Path(__file__).resolve().parents[1] / "examples" / "models" / "tiny_cnn.onnx"
RUN = ("run", TINY, "--onnxrt", "--onnxrt", "--input-shapes", "x:[1,3,16,16]")

WATCHER = '''
import click
from parity import hookimpl
from parity.api import OptionSpec, RunWatcher, UsageError


class Steps(RunWatcher):
    def __init__(self, options):
        self.options, self.steps = options, []

    def check(self):
        self.steps.append("check")

    def check_model(self, model, kind):
        self.steps.append(f"check_model {kind}")
        if self.options.get("steps") == "refuse":
            raise UsageError("--steps: refused")

    def on_compared(self, index, pair, actual, reference):
        self.steps.append(f"on_compared {index} {pair.actual} {pair.reference} {sorted(actual)}")

    def on_finished(self, run):
        self.steps.append(f"on_finished {run.code} {run.summary.iterations}")

    def on_reported(self, run):
        print("steps:", " | ".join([*self.steps, "on_reported"]))


@hookimpl
def parity_register_options(register):
    register(OptionSpec("steps", ("run",), [click.Option(["--steps"], help="Print the steps the watcher was told of.")]))


@hookimpl
def parity_watch_run(options, reporter):
    return Steps(options) if options.get("steps") else None
'''


def test_a_watcher_is_told_each_step_in_order(main, tmp_path):
    plugin = tmp_path / "steps.py"
    plugin.write_text(WATCHER)
    code, out, err = main("--plugin", plugin, *RUN, "--iterations", "2", "--steps", "yes")
    assert code == 0, err
    line = next(line for line in out.splitlines() if line.startswith("steps:"))
    assert line == (
        "steps: check | check_model onnx | on_compared 0 onnxrt-0 onnxrt-1 ['probs'] | on_compared 1 onnxrt-0 onnxrt-1 ['probs']"
        " | on_finished 0 2 | on_reported"
    )
    assert out.index("PASSED") < out.index("steps:")  # on_reported comes after the summary


def test_a_watcher_refuses_before_any_runner_is_built(main, tmp_path):
    plugin = tmp_path / "steps.py"
    plugin.write_text(WATCHER)
    code, out, err = main("--plugin", plugin, *RUN, "--steps", "refuse", "--save-outputs", tmp_path / "o.npz")
    assert code == 2 and err.strip() == "parity: error: --steps: refused" and "iteration" not in out
    assert not (tmp_path / "o.npz").exists()


def test_no_watcher_without_its_option(main, tmp_path):
    plugin = tmp_path / "steps.py"
    plugin.write_text(WATCHER)
    code, out, err = main("--plugin", plugin, *RUN)
    assert code == 0 and "steps:" not in out, err


def test_without_parity_reports_run_works_and_its_options_do_not_exist(tmp_path):
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PARITY_")}, "PARITY_DISABLE_PLUGINS": "reports"}

    def parity(*args: object) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "parity", *map(str, args)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)

    ok = parity(*RUN)
    assert ok.returncode == 0 and "PASSED" in ok.stdout, ok.stderr
    helped = parity("run", "--help")
    assert "--save-report-html" not in helped.stdout and "--save-heatmaps" not in helped.stdout
    refused = parity(*RUN, "--save-report-html", "r.html")
    lines = refused.stderr.strip().splitlines()
    assert refused.returncode == 2 and len(lines) == 1 and "--save-report-html is provided by parity-reports" in lines[0], refused.stderr
    assert not (tmp_path / "r.html").exists()
