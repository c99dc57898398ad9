"""The plugin contract proved from outside: one test per hook (`test_hook_<name>`, checked by a meta-test),
one-off `--plugin` modules, collisions between distributions, old plugins against grown hooks, and lazy
registration with every contrib package installed.

Plugins here are what a stranger writes: a module of `@hookimpl` functions, loaded with `--plugin`/
`PARITY_PLUGINS`, or installed as a distribution (a `*.dist-info` folder with `entry_points.txt`, the
layout pip writes) on PYTHONPATH.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pluggy
import pytest

ROOT = Path(__file__).resolve().parents[1]
IDENTITY = ROOT / "examples" / "models" / "identity.onnx"
CONTRIB = ("parity-onnx-reference", "parity-metrics")

# One module implementing every hook around a toy model kind: a JSON file {"toy": scale, "inputs": {...}}.
TOY_PLUGIN = '''
import json
from pathlib import Path

import click

from parity import hookimpl
from parity.registry import Backend, ComparatorSpec, ConverterSpec, DataLoaderSpec, ExecutorSpec, ModelKind, OptionSpec, StrategySpec


def read_toy(path):
    import numpy as np
    from parity.data.meta import TensorMeta

    spec = json.loads(Path(path).read_text())
    return {name: TensorMeta(np.dtype("float32"), tuple(shape)) for name, shape in spec["inputs"].items()}


def describe_toy(path, show):  # the original two-argument describe(): newer ones also take options
    spec = json.loads(Path(path).read_text())
    return f"toy model {path}: scale {spec['toy']}, inputs {spec['inputs']}"


def make_runner(request):
    from parity.backend.base import BaseRunner

    class ToyRunner(BaseRunner):
        def activate_impl(self):
            spec = json.loads(Path(request.model).read_text())
            self.scale = spec["toy"] * request.get("toy_factor", 1.0) + request.get("toy_offset", 0.0)

        def get_input_metadata_impl(self):
            return read_toy(request.model)

        def infer_impl(self, feed):
            return {f"{name}_out": value * self.scale for name, value in feed.items()}

    return ToyRunner("toy")


def ones(request):
    import numpy as np

    shapes = {name: [d if isinstance(d, int) else 1 for d in meta.shape] for name, meta in request.input_metadata.items()}
    return [{name: np.ones(shape, np.float32) for name, shape in shapes.items()} for _ in range(request.iterations)]


def exact(options):
    import numpy as np
    from parity.compare.result import OutputCheck

    return lambda name, a, b: OutputCheck(name, bool(np.array_equal(a, b)), "exact")


class Halves:
    """A debug strategy: a real one searches items for a minimal failing subset."""

    def __init__(self, options):
        self.options = options


def scale_toy(request):
    spec = json.loads(Path(request.model).read_text())
    spec["toy"] *= request.get("toy_scale_by", 1.0)
    Path(request.output).write_text(json.dumps(spec))


@hookimpl
def parity_register_model_kinds(register):
    register(ModelKind("toy", (".toy",), read_toy, describe_toy, magic=lambda head: head.startswith(b'{"toy"')))


@hookimpl
def parity_register_backends(register):
    factor = click.Option(["--toy-factor"], type=float, default=None, help="toy: extra scale")
    register(Backend("toy", make_runner, "Run toy models.", options=(factor,), model_kinds=("toy",)))


@hookimpl
def parity_register_data_loaders(register):
    register(DataLoaderSpec("ones", ones, "all-ones inputs"))


@hookimpl
def parity_register_comparators(register):
    register(ComparatorSpec("exact", exact, "bit-exact outputs"))


@hookimpl
def parity_register_debug_strategies(register):
    register(StrategySpec("halves", Halves, "split the candidates in halves", kinds=("reduce",)))


class Inline:
    """An executor: checks run here, one at a time, and each is noted in --inline-mark."""

    jobs = 1

    def __init__(self, options):
        self.mark = options["inline_mark"]

    def map(self, fn, items):
        return [fn(0, item) for item in items]

    def run_check(self, check, iteration):
        with open(self.mark, "a") as f:
            f.write(f"{iteration.index}\\n")
        return check(iteration)


@hookimpl
def parity_register_executors(register):
    mark = click.Option(["--inline-mark"], default=None, help="inline: note each check here")
    register(ExecutorSpec("inline", Inline, "checks here, noted", options=(mark,)))


@hookimpl
def parity_register_converters(register):
    by = click.Option(["--toy-scale-by"], type=float, default=None)
    register(ConverterSpec("toy-scaled", (".toy",), scale_toy, "a toy model with its scale multiplied", options=(by,)))


def refuse_offset_with_many_iterations(command, params, ctx):
    from parity.errors import UsageError

    if params.get("toy_offset") and params.get("iterations", 1) > 1:
        raise UsageError(f"--toy-offset works with one iteration on 'parity {command}'")


@hookimpl
def parity_register_options(register):
    offset = click.Option(["--toy-offset"], type=float, default=None, help="toy: added to the scale")
    register(OptionSpec("toy-offset", ("run",), (offset,), refuse_offset_with_many_iterations))


@hookimpl
def parity_register_commands(cli):
    from parity.cli import group

    @cli.command("toy-hello")
    @click.argument("who")
    def hello(who):
        click.echo(f"hello {who} from a one-off plugin")

    @group(cli, "inspect").command("toy")
    @click.argument("path")
    def inspect_toy(path):
        click.echo(describe_toy(path, set()))
'''


@pytest.fixture
def toy(tmp_path) -> dict[str, Path]:
    plugin = tmp_path / "toy_plugin.py"
    plugin.write_text(TOY_PLUGIN)
    model = tmp_path / "model.toy"
    model.write_text(json.dumps({"toy": 2.0, "inputs": {"x": [2, 3]}}))
    return {"plugin": plugin, "model": model, "dir": tmp_path}


def parity(*args: object, env: dict | None = None) -> subprocess.CompletedProcess:
    full = {**{k: v for k, v in os.environ.items() if not k.startswith("PARITY_")}, **(env or {})}
    return subprocess.run([sys.executable, "-m", "parity", *map(str, args)], capture_output=True, text=True, env=full, timeout=120)


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def one_line_error(proc: subprocess.CompletedProcess, code: int = 2) -> str:
    assert proc.returncode == code, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if not line.startswith("parity: warning")]
    assert len(lines) == 1 and lines[0].startswith("parity: error:") and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


# --- one test per hook -----------------------------------------------------------------------------


def test_hook_parity_register_backends(toy):
    same = parity("--plugin", toy["plugin"], "run", toy["model"], "--toy", "--toy", "--compare-func", "exact")
    assert "[toy-0 vs toy-1] iteration 0: PASSED" in ok(same).stdout
    # the backend's own option, set for the second runner only
    drift = parity("--plugin", toy["plugin"], "run", toy["model"], "--toy", "--toy=toy-factor=1.5")
    assert drift.returncode == 1 and "x_out: FAILED" in drift.stdout
    # a backend refuses model kinds it does not run, in one line
    assert "--toy cannot run a onnx model" in one_line_error(parity("--plugin", toy["plugin"], "run", IDENTITY, "--toy"))


def test_hook_parity_register_model_kinds(toy):
    shown = ok(parity("--plugin", toy["plugin"], "inspect", "model", toy["model"])).stdout
    assert "toy model" in shown and "scale 2.0" in shown
    sniffed = toy["dir"] / "model.bin"  # unknown suffix: recognised by the kind's magic bytes
    sniffed.write_text(toy["model"].read_text())
    assert "scale 2.0" in ok(parity("--plugin", toy["plugin"], "inspect", "model", sniffed)).stdout
    # read_inputs checks user input before any runner starts
    bad = parity("--plugin", toy["plugin"], "run", toy["model"], "--toy", "--input-shapes", "y:[2,3]")
    assert "'y'" in one_line_error(bad)


def test_hook_parity_register_comparators(toy):
    from parity import Comparator, plugins

    proc = ok(parity("--plugin", toy["plugin"], "run", toy["model"], "--toy", "--toy", "--compare-func", "exact", "simple"))
    assert "x_out: PASSED | exact" in proc.stdout
    # the Python API resolves the same registered name
    plugins.add_plugin_files([str(toy["plugin"])])
    from parity import IterationResult, RunResults

    x = np.ones((2, 2), np.float32)
    results = RunResults([("a", [IterationResult({"y": x})]), ("b", [IterationResult({"y": x + 1e-7})])])
    assert Comparator.compare_accuracy(results, compare_func="simple")
    assert not Comparator.compare_accuracy(results, compare_func="exact")


def test_hook_parity_register_data_loaders(toy):
    saved = toy["dir"] / "inputs.npz"
    ok(parity("--plugin", toy["plugin"], "run", IDENTITY, "--onnxrt", "--data-loader", "ones", "--iterations", "2", "--save-inputs", saved))
    from parity import load_inputs

    feeds = load_inputs(saved)
    assert len(feeds) == 2 and all(np.array_equal(f["x"], np.ones((1, 1, 2, 2), np.float32)) for f in feeds)
    assert "unknown data loader 'twos'" in one_line_error(parity("--plugin", toy["plugin"], "run", IDENTITY, "--onnxrt", "--data-loader", "twos"))


def test_hook_parity_register_debug_strategies(toy):
    from parity import plugins

    rows = json.loads(ok(parity("--plugin", toy["plugin"], "plugins", "--json")).stdout)
    assert next(r for r in rows if r["source"] == "file")["registered"]["strategies"] == ["halves"]
    plugins.add_plugin_files([str(toy["plugin"])])
    registry = plugins.get_registry()
    spec = registry.strategy("halves")
    assert spec.kinds == ("reduce",) and spec.factory({"seed": 3}).options == {"seed": 3}
    assert registry.owners[("strategies", "halves")] == f"file:{toy['plugin']}"


def test_hook_parity_register_executors(toy):
    from parity import plugins

    mark = toy["dir"] / "mark.txt"
    check = [sys.executable, "-S", "-c", "import os, sys; sys.exit(int(os.environ['PARITY_DEBUG_ITERATION']) == 1)"]
    proc = parity("--plugin", toy["plugin"], "debug", "repeat", "--until", "3", "--executor", "inline", "--inline-mark", mark, "--check", *check)
    assert proc.returncode == 1 and "bad: 1, good: 2" in proc.stdout, proc.stdout + proc.stderr
    assert mark.read_text().split() == ["0", "1", "2"]  # every check went through the registered executor
    assert "--inline-mark" in ok(parity("--plugin", toy["plugin"], "debug", "repeat", "--help")).stdout
    repeat = ("--plugin", toy["plugin"], "debug", "repeat", "--until", "1")
    assert "unknown executor 'outline'" in one_line_error(parity(*repeat, "--executor", "outline", "--check", "true"))
    assert "--inline-mark applies to the inline executor (--executor inline)" in one_line_error(parity(*repeat, "--inline-mark", mark, "--check", "true"))
    plugins.add_plugin_files([str(toy["plugin"])])
    registry = plugins.get_registry()
    assert registry.executor("inline").factory({"inline_mark": "m"}).mark == "m" and "local" in registry.executors
    assert registry.owners[("executors", "inline")] == f"file:{toy['plugin']}"


def test_hook_parity_register_converters(toy):
    out = toy["dir"] / "scaled.toy"
    proc = ok(parity("--plugin", toy["plugin"], "convert", toy["model"], "-o", out, "--toy-scale-by", "3"))
    assert "toy-scaled" in proc.stdout and json.loads(out.read_text())["toy"] == 6.0
    assert "refusing to overwrite" in one_line_error(parity("--plugin", toy["plugin"], "convert", toy["model"], "-o", toy["model"]))


def test_hook_parity_register_commands(toy):
    assert ok(parity("--plugin", toy["plugin"], "toy-hello", "world")).stdout.strip() == "hello world from a one-off plugin"
    assert "scale 2.0" in ok(parity("--plugin", toy["plugin"], "inspect", "toy", toy["model"])).stdout
    assert "toy-hello" in ok(parity("--plugin", toy["plugin"], "--help")).stdout


DESCRIBING_PLUGIN = '''
from parity import hookimpl


@hookimpl
def parity_describe_commands(register):
    register("toy", None, "Toy commands.")
    register("toy greet", "toy_commands:greet", "Greet someone (imported when used).")
    register("inspect toy-size", "toy_commands:make_size", "Show a toy file's size.")
    register("toy old-greet", "toy_commands:old_greet", "An old spelling.", hidden=True)
'''

DESCRIBED_COMMANDS = '''
from pathlib import Path
import os

import click

Path(os.environ["TOY_MARKER"]).write_text("imported")


@click.command("greet")
@click.argument("who")
def greet(who):
    """Greet someone (imported when used)."""
    click.echo(f"greetings {who}")


old_greet = click.Command("old-greet", callback=lambda: click.echo("old"))


def make_size():
    return click.Command("toy-size", params=[click.Argument(["path"])], callback=lambda path: click.echo(len(Path(path).read_text())))
'''


def test_hook_parity_describe_commands(tmp_path):
    (tmp_path / "toy_describer.py").write_text(DESCRIBING_PLUGIN)
    (tmp_path / "toy_commands.py").write_text(DESCRIBED_COMMANDS)
    marker = tmp_path / "marker"
    env = {"PYTHONPATH": str(tmp_path), "TOY_MARKER": str(marker)}
    plugin = ("--plugin", tmp_path / "toy_describer.py")
    root = ok(parity(*plugin, "--help", env=env)).stdout
    assert "toy " in root and "Toy commands." in root
    listing = ok(parity(*plugin, "toy", "--help", env=env)).stdout
    assert "greet" in listing and "Greet someone (imported when used)." in listing and "old-greet" not in listing
    assert "Show a toy file's size." in ok(parity(*plugin, "inspect", "--help", env=env)).stdout
    assert not marker.exists(), "listing a described command imported its module"
    assert ok(parity(*plugin, "toy", "greet", "you", env=env)).stdout.strip() == "greetings you"
    assert marker.exists()
    assert ok(parity(*plugin, "inspect", "toy-size", tmp_path / "toy_commands.py", env=env)).stdout.strip().isdigit()
    assert ok(parity(*plugin, "toy", "old-greet", env=env)).stdout.strip() == "old"
    # two plugins describing one command: an error naming both
    (tmp_path / "copy.py").write_text(DESCRIBING_PLUGIN.replace('register("toy", None, "Toy commands.")', ""))
    line = one_line_error(parity(*plugin, "--plugin", tmp_path / "copy.py", "--help", env=env))
    assert "command 'parity toy greet' is registered by both" in line and "copy.py" in line


def test_hook_parity_register_options(toy):
    assert "--toy-offset" in ok(parity("--plugin", toy["plugin"], "run", "--help")).stdout
    # the value reaches the backend (here for the second runner only)
    drift = parity("--plugin", toy["plugin"], "run", toy["model"], "--toy", "--toy=toy-offset=1")
    assert drift.returncode == 1 and "x_out: FAILED" in drift.stdout
    # validate() runs before the command
    refused = parity("--plugin", toy["plugin"], "run", toy["model"], "--toy", "--toy-offset", "1", "--iterations", "2")
    assert "--toy-offset works with one iteration on 'parity run'" in one_line_error(refused)


DECLARING_PLUGIN = '''
from parity import hookimpl
from parity.api import call_hook
from parity.hookspecs import hookspec


class Specs:
    @hookspec
    def parity_toy_greeting(self, who):
        "A greeting for who."


@hookimpl
def parity_add_hookspecs(add):
    add(Specs)


@hookimpl
def parity_register_commands(cli):
    import click

    @cli.command("toy-greetings")
    @click.argument("who")
    def greetings(who):
        for text in call_hook("parity_toy_greeting", who=who):
            click.echo(text)
'''

GREETING_PLUGIN = '''
from parity import hookimpl


@hookimpl(optionalhook=True)
def parity_toy_greeting(who):
    return f"hello {who}"
'''


def test_hook_parity_add_hookspecs(tmp_path):
    (tmp_path / "declaring.py").write_text(DECLARING_PLUGIN)
    (tmp_path / "greeting.py").write_text(GREETING_PLUGIN)
    (tmp_path / "broken.py").write_text(GREETING_PLUGIN.replace('return f"hello {who}"', "raise RuntimeError('no greeting')"))
    # the implementations load before the declaring plugin
    both = ("--plugin", tmp_path / "greeting.py", "--plugin", tmp_path / "broken.py", "--plugin", tmp_path / "declaring.py")
    proc = ok(parity(*both, "toy-greetings", "you"))
    assert proc.stdout.strip() == "hello you"
    warning = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(warning) == 1 and "broken.py failed to load and is ignored (RuntimeError: no greeting)" in warning[0]
    strict = parity(*both, "toy-greetings", "you", env={"PARITY_STRICT_PLUGINS": "1"})
    assert "broken.py failed to load: RuntimeError: no greeting" in one_line_error(strict)
    rows = {row["name"]: row for row in json.loads(ok(parity(*both, "plugins", "--json")).stdout)}
    assert "parity_toy_greeting" in rows[f"file:{tmp_path / 'greeting.py'}"]["hooks"]
    assert "parity_add_hookspecs" in rows[f"file:{tmp_path / 'declaring.py'}"]["hooks"]


HINT_PLUGIN = '''
from parity import hookimpl


@hookimpl
def parity_divergence_hint(report, output):
    return f"mytool cut {report.model} --node {report.first.node} --feed {','.join(report.outside_inputs())} -o {output or 'cut.onnx'}"
'''


def test_hook_parity_divergence_hint(tmp_path):
    """A layerwise run's report offers the command line a plugin gives for cutting out the first divergent node;
    without such a plugin it offers none (the core knows no command that would)."""
    import core_models

    good, bad = core_models.affine(tmp_path / "good.onnx"), core_models.affine(tmp_path / "bad.onnx", bias=0.9)
    (tmp_path / "hint.py").write_text(HINT_PLUGIN)
    golden, report = tmp_path / "golden.npz", tmp_path / "report.json"
    ok(parity("run", good, "--onnxrt", "--onnx-outputs", "mark", "all", "--save-outputs", golden))
    layerwise = ("run", bad, "--onnxrt", "--onnx-outputs", "mark", "all", "--load-outputs", golden, "--report", report)
    only_onnxrt = {"PARITY_LOAD_PLUGINS": "onnxrt"}  # the surgeon plugin, which offers its own line, is not loaded

    mine = parity("--plugin", tmp_path / "hint.py", *layerwise, env=only_onnxrt)
    assert mine.returncode == 1, mine.stderr
    line = f"mytool cut {bad} --node add --feed scaled -o cut.onnx"
    assert "First divergence: 'y', produced by node 'add' (Add)" in mine.stdout and f"Extract it: {line}" in mine.stdout
    assert json.loads(report.read_text())["layerwise"][0]["extract_command"] == line

    none = parity(*layerwise, env=only_onnxrt)
    assert none.returncode == 1 and "First divergence: 'y'" in none.stdout and "Extract it:" not in none.stdout
    assert json.loads(report.read_text())["layerwise"][0]["extract_command"] is None


ORIGIN_PLUGIN = '''
from parity import hookimpl


@hookimpl
def parity_node_origins(nodes):
    return {name: f"layer {meta['my.layer']}" for name, meta in nodes.items() if "my.layer" in meta}
'''


def test_hook_parity_node_origins(tmp_path):
    """A layerwise report names where the first divergent node came from, as a plugin reads the node's metadata_props;
    without metadata or without such a plugin it names none."""
    import core_models
    import onnx

    good, bad = core_models.affine(tmp_path / "good.onnx"), core_models.affine(tmp_path / "bad.onnx", bias=0.9)
    model = onnx.load(bad)
    for node in model.graph.node:
        node.metadata_props.add(key="my.layer", value=f"block_{node.name}")
    onnx.save(model, bad)
    (tmp_path / "origin.py").write_text(ORIGIN_PLUGIN)
    golden, report = tmp_path / "golden.npz", tmp_path / "report.json"
    ok(parity("run", good, "--onnxrt", "--onnx-outputs", "mark", "all", "--save-outputs", golden))
    layerwise = ("run", bad, "--onnxrt", "--onnx-outputs", "mark", "all", "--load-outputs", golden, "--report", report)

    mine = parity("--plugin", tmp_path / "origin.py", *layerwise)
    assert mine.returncode == 1, mine.stderr
    assert "First divergence: 'y', produced by node 'add' (Add) from ['scaled', 'bias'], origin: layer block_add:" in mine.stdout
    rows = {row["name"]: row for row in json.loads(report.read_text())["layerwise"][0]["tensors"]}
    assert rows["y"]["origin"] == "layer block_add" and rows["scaled"]["origin"] == "layer block_mul"

    none = parity(*layerwise, env={"PARITY_DISABLE_PLUGINS": "torch"})  # nobody reads 'my.layer'
    assert none.returncode == 1 and "First divergence: 'y'" in none.stdout and "origin:" not in none.stdout
    assert {row["origin"] for row in json.loads(report.read_text())["layerwise"][0]["tensors"]} == {None}


WATCH_PLUGIN = '''
import click
from parity import hookimpl
from parity.api import OptionSpec, RunWatcher


class Count(RunWatcher):
    def __init__(self):
        self.compared = 0

    def on_compared(self, index, pair, actual, reference):
        self.compared += 1

    def on_reported(self, run):
        print(f"count: {self.compared} comparison(s), exit code {run.code}")


@hookimpl
def parity_register_options(register):
    register(OptionSpec("count", ("run",), [click.Option(["--count"], is_flag=True, help="Count the comparisons.")]))


@hookimpl
def parity_watch_run(options):
    return Count() if options.get("count") else None
'''


def test_hook_parity_watch_run(tmp_path):
    """A stranger's report: its watcher is told of each comparison and of the end of the run (order and refusals:
    tests/test_run_watchers.py), and is made only when its option is given."""
    (tmp_path / "count.py").write_text(WATCH_PLUGIN)
    run = ("--plugin", tmp_path / "count.py", "run", IDENTITY, "--onnxrt", "--onnxrt", "--iterations", "3")
    counted = ok(parity(*run, "--count"))
    assert "count: 3 comparison(s), exit code 0" in counted.stdout
    assert "count:" not in ok(parity(*run)).stdout


def test_every_hook_has_a_test():
    from parity.plugins import hook_signatures

    missing = [name for name in hook_signatures() if not callable(globals().get(f"test_hook_{name}"))]
    assert not missing, f"hooks without a test_hook_<name> in {__file__}: {missing}"


# --- one-off modules: --plugin and PARITY_PLUGINS ----------------------------------------------------

METRIC_FILE = '''
import click
from parity import hookimpl
from parity.registry import ComparatorSpec


def factory(options):
    import numpy as np
    from parity.compare.result import OutputCheck

    limit = options.get("{name}_max") or 0.0
    return lambda out, a, b: OutputCheck(out, float(np.abs(a - b).max()) <= limit, "{name}", {{"diff": float(np.abs(a - b).max())}})


@hookimpl
def parity_register_comparators(register):
    register(ComparatorSpec("{name}", factory, options=(click.Option(["--{name}-max"], type=float),)))
'''


def metric_file(folder: Path, name: str) -> Path:
    path = folder / f"{name}.py"
    path.write_text(METRIC_FILE.format(name=name))
    return path


def test_plugin_option_is_repeatable_and_works_anywhere_on_the_line(tmp_path):
    first, second = metric_file(tmp_path, "first"), metric_file(tmp_path, "second")
    rows = json.loads(ok(parity("--plugin", first, f"--plugin={second}", "plugins", "--json")).stdout)
    assert {r["name"]: r["registered"] for r in rows if r["source"] == "file"} == {
        f"file:{first}": {"comparators": ["first"]},
        f"file:{second}": {"comparators": ["second"]},
    }
    # after the sub-command too: the option the plugin adds (--second-max) parses because the module loaded first
    run = parity("run", IDENTITY, "--onnxrt", "--onnxrt", "--compare-func", "first", "second", "--second-max", "0.5", "--plugin", second, "--plugin", first)
    assert "y: PASSED | second diff=0" in ok(run).stdout


def test_parity_plugins_environment_variable(tmp_path, toy):
    first = metric_file(tmp_path, "first")
    env = {"PARITY_PLUGINS": f"{first},{toy['plugin']}"}
    assert "hello you" in ok(parity("toy-hello", "you", env=env)).stdout
    run = ok(parity("run", IDENTITY, "--onnxrt", "--onnxrt", "--compare-func", "first", "exact", env=env))
    assert "first diff=0" in run.stdout and "exact" in run.stdout


def test_bad_plugin_files(tmp_path):
    assert "plugin file not found" in one_line_error(parity("--plugin", tmp_path / "nope.py", "plugins"))
    broken = tmp_path / "broken.py"
    broken.write_text("def oops(:\n")
    proc = ok(parity("--plugin", broken, "plugins", "--json"))  # isolated: a warning, everything else works
    assert "broken.py failed to load" in proc.stderr.replace(str(tmp_path) + "/", "")
    assert {r["name"]: r["status"] for r in json.loads(proc.stdout)}[f"file:{broken}"] == "failed"
    assert "failed to load" in one_line_error(parity("--plugin", broken, "plugins", env={"PARITY_STRICT_PLUGINS": "1"}))


# --- collisions: a clear error naming both distributions, never a silent override --------------------


def install(site: Path, dist: str, module: str, source: str) -> None:
    """The files an installer writes for a one-module distribution with a `parity` entry point."""
    (site / f"{module}.py").write_text(textwrap.dedent(source))
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[parity]\n{module} = {module}\n")


COMPARATOR = '''
from parity import hookimpl
from parity.registry import ComparatorSpec

@hookimpl
def parity_register_comparators(register):
    register(ComparatorSpec("{name}", lambda options: None))
'''

BACKEND = '''
from parity import hookimpl
from parity.registry import Backend

@hookimpl
def parity_register_backends(register):
    register(Backend("{name}", lambda request: None, flag="{flag}"))
'''


@pytest.mark.parametrize(
    ("sources", "message"),
    [
        ([COMPARATOR.format(name="dup"), COMPARATOR.format(name="dup")], "comparator 'dup' is registered by both"),
        ([BACKEND.format(name="a", flag="--same"), BACKEND.format(name="b", flag="--same")], "option --same is registered by both"),
        ([BACKEND.format(name="dup", flag="--one"), BACKEND.format(name="dup", flag="--two")], "backend 'dup' is registered by both"),
    ],
    ids=["metric-name", "backend-flag", "backend-name"],
)
def test_two_distributions_claiming_one_name(tmp_path, sources, message):
    for index, source in enumerate(sources):
        install(tmp_path, f"parity-claim{index}", f"claim{index}", source)
    env = {"PYTHONPATH": str(tmp_path)}
    line = one_line_error(parity("plugins", env=env))
    assert message in line and "parity-claim0" in line and "parity-claim1" in line
    # the fix the message suggests works
    ok(parity("plugins", env={**env, "PARITY_DISABLE_PLUGINS": "parity-claim1"}))


@pytest.mark.parametrize(
    ("source", "owner"),
    [
        (COMPARATOR.format(name="cosine"), "parity-metrics"),
        (BACKEND.format(name="ref2", flag="--onnx-ref"), "parity-onnx-reference"),
        (COMPARATOR.format(name="simple"), "parity"),
    ],
    ids=["contrib-metric", "contrib-flag", "core-metric"],
)
def test_claiming_a_name_of_an_installed_plugin(tmp_path, source, owner):
    install(tmp_path, "parity-copycat", "copycat", source)
    line = one_line_error(parity("run", IDENTITY, "--onnxrt", env={"PYTHONPATH": str(tmp_path)}))
    assert f"both {owner} and parity-copycat" in line or f"both parity-copycat and {owner}" in line


# --- hooks grow by optional arguments; old plugins keep working ---------------------------------------


def test_plugin_written_against_an_older_hook_signature_keeps_working():
    import parity_metrics.hooks

    class GrownSpecs:  # a future Parity passes one more argument to the same hook
        @pluggy.HookspecMarker("parity")
        def parity_register_comparators(self, register, options):
            """Register comparison metrics; ``options`` is new."""

    pm = pluggy.PluginManager("parity")
    pm.add_hookspecs(GrownSpecs)
    pm.register(parity_metrics.hooks, name="parity-metrics")
    pm.check_pending()  # the impl names fewer arguments than the spec: still valid
    registered = []
    pm.hook.parity_register_comparators(register=registered.append, options={"cosine_min": 0.5})
    assert sorted(spec.name for spec in registered) == ["cosine", "psnr-db", "rel-l2", "snr-db", "topk-agree"]
    # Parity's own caller (registration hooks are called plugin by plugin) passes only what each impl names
    from parity.plugins import _call_impl

    [impl] = pm.hook.parity_register_comparators.get_hookimpls()
    again = []
    _call_impl(impl, register=again.append, options={}, something_newer=1)
    assert [s.name for s in again] == [s.name for s in registered]


# --- registering imports nothing heavy, with the contrib packages installed ---------------------------

PROBE = """
import json, sys
from parity.cli import main
from parity.plugins import plugin_infos
code = main(sys.argv[1:])
heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('onnx', 'onnxruntime', 'tensorrt', 'torch', 'numpy'))
loaded = sorted(i.distribution for i in plugin_infos() if i.status == 'loaded' and i.distribution)
print(json.dumps({"code": code, "heavy": heavy, "loaded": loaded}))
"""


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"], ["plugins", "--json"]], ids=" ".join)
def test_registering_contrib_plugins_imports_nothing_heavy(argv):
    proc = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=60)
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["code"] == 0, proc.stderr
    assert set(CONTRIB) <= set(report["loaded"]), "install the contrib packages: pip install -r requirements.txt"
    heavy = [m for m in report["heavy"] if m.split(".")[0] != "numpy" or argv[0] != "plugins"]
    assert heavy == [], f"parity {' '.join(argv)} imported {heavy}"


def test_trace_shows_which_plugin_each_hook_call_belongs_to(tmp_path):
    first = metric_file(tmp_path, "first")
    proc = ok(parity("--plugin", first, "plugins", env={"PARITY_TRACE_PLUGINS": "1"}))
    traced = [line for line in proc.stderr.splitlines() if line.startswith("parity: trace:")]
    assert f"parity: trace: file:{first}: parity_register_comparators(register)" in traced
    assert "parity: trace: metrics: parity_register_comparators(register)" in traced
