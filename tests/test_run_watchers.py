"""The hook ``parity_watch_run`` (docs/plugins/reports.md): a plugin's report watches a run, told of each step in
order, as parity-reports is; without parity-reports, ``parity run`` works and its options do not exist."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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


LEVELS = '''
import json
import click
from parity import hookimpl
from parity.api import OptionSpec, RunWatcher


class Reads(RunWatcher):
    def __init__(self, level):
        self.statistics, self.seen = level, []

    def on_compared(self, index, pair, actual, reference):
        for check in pair.iterations[-1].checks:
            abs_ = check.details.get("abs", {})
            self.seen.append({"median": "median_abs" in check.values, "details": bool(check.details),
                              "histogram": bool(check.details.get("abs_histogram")), "percentiles": "p50" in abs_})

    def on_reported(self, run):
        print("seen:", json.dumps(self.seen))


@hookimpl
def parity_register_options(register):
    register(OptionSpec("reads", ("run",), [click.Option(["--reads"])]))


@hookimpl
def parity_watch_run(options, reporter):
    return Reads(options["reads"]) if options.get("reads") else None
'''


def _seen(out: str) -> list[dict]:
    import json

    return json.loads(next(line for line in out.splitlines() if line.startswith("seen:"))[5:])


EXPECT = {
    "histogram": {"median": False, "details": True, "histogram": True, "percentiles": False},
    "shown": {"median": False, "details": False, "histogram": False, "percentiles": False},
    "report": {"median": True, "details": False, "histogram": False, "percentiles": False},
    "all": {"median": True, "details": True, "histogram": True, "percentiles": True},
}


@pytest.mark.parametrize("level", list(EXPECT))
def test_a_watcher_gets_the_statistics_it_says_it_reads(main, tmp_path, level):
    """RunWatcher.statistics: a watcher reading histograms gets every output's details without medians or
    percentiles; one reading the values only gets neither; the default gets everything."""
    plugin = tmp_path / "reads.py"
    plugin.write_text(LEVELS)
    code, out, err = main("--plugin", plugin, *RUN, "--reads", level)
    assert code == 0, err
    assert _seen(out) == [EXPECT[level]]


def test_the_run_computes_the_least_level_covering_every_need(main, tmp_path):
    """A watcher reading histograms and --report's medians: "all"."""
    plugin = tmp_path / "reads.py"
    plugin.write_text(LEVELS)
    code, out, err = main("--plugin", plugin, *RUN, "--reads", "histogram", "--report", tmp_path / "r.json")
    assert code == 0 and _seen(out) == [EXPECT["all"]], err


@pytest.mark.parametrize("level", ["histogram", "shown"])
def test_a_failing_output_keeps_its_full_details_at_every_level(main, tmp_path, level):
    """The CLI prints a failure's statistics and percentiles: a watcher that reads less never takes them away
    (the two sides differ: a fixed seed's inputs against themselves plus an offset, loaded as outputs)."""
    plugin = tmp_path / "reads.py"
    plugin.write_text(LEVELS)
    code, out, err = main(*RUN, "--save-outputs", tmp_path / "o.json")
    assert code == 0, err
    code, out, err = main("--plugin", plugin, *RUN[:3], "--input-shapes", "x:[1,3,16,16]", "--val-range", "x:[5,6]",
                          "--load-outputs", tmp_path / "o.json", "--reads", level)
    assert code == 1, err
    assert _seen(out)[0]["percentiles"] and _seen(out)[0]["details"] and not _seen(out)[0]["median"]


def test_statistics_level_is_the_least_level_covering_the_needs():
    from parity.api import STATISTICS, statistics_level

    assert STATISTICS == ("all", "report", "histogram", "shown")
    assert statistics_level([]) == "shown"
    assert statistics_level(["shown", "shown"]) == "shown"
    assert statistics_level(["report"]) == "report"
    assert statistics_level(["histogram", "shown"]) == "histogram"
    assert statistics_level(["report", "histogram"]) == "all"
    assert statistics_level(["all", "shown"]) == "all"


def test_a_watcher_with_an_unknown_level_gets_everything_and_a_warning(main, tmp_path):
    plugin = tmp_path / "reads.py"
    plugin.write_text(LEVELS)
    code, out, err = main("--plugin", plugin, *RUN, "--reads", "medians")
    assert code == 0 and _seen(out) == [EXPECT["all"]], err
    assert "Reads.statistics: unknown level 'medians' (choose from all, report, histogram, shown)" in err
    with pytest.raises(ValueError, match="unknown statistics level 'medians'"):
        from parity.api import statistics_level

        statistics_level(["medians"])
