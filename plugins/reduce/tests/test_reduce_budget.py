"""--max-checks / --max-time: the reducer stops within the budget with the best model so far in -o; the
staged mode's first phase reaches a planted fault in no more checks than Polygraphy-style bisect."""

from __future__ import annotations

import onnx
import onnxruntime as ort
import pytest
from parity_reduce.reducer import Reducer
from parity_reduce.testing import chain


def _fails_with(*names):
    return lambda m: all(n in {node.name for node in m.graph.node} for n in names)


def _valid(path):
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return model


@pytest.mark.parametrize("mode", ["staged", "dichotomic"])
@pytest.mark.parametrize("budget", [1, 3, 7])
def test_max_checks_stops_with_a_valid_model(tmp_path, mode, budget):
    out = tmp_path / "best.onnx"
    model = chain(64)
    result = Reducer(model, _fails_with("n10", "n50"), mode=mode, max_checks=budget, save_best=out, warn=lambda _: None).run()
    assert result.checks <= budget
    written = _valid(out)
    assert 0 < len(written.graph.node) <= len(model.graph.node)
    assert {"n10", "n50"} <= {n.name for n in written.graph.node}
    assert len(written.graph.node) == len(result.nodes)


def test_each_improvement_is_written(tmp_path):
    out = tmp_path / "best.onnx"
    sizes = []
    reducer = Reducer(chain(64), _fails_with("n20"), mode="staged", save_best=out)
    save = reducer._saver()
    reducer._saver = lambda: lambda subset: (save(subset), sizes.append(len(onnx.load(str(out)).graph.node)))
    result = reducer.run()
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] == 1 == len(result.nodes)
    assert _valid(out).graph.node[0].name == "n20"


def test_max_time_keeps_best(tmp_path):
    out = tmp_path / "best.onnx"
    result = Reducer(chain(32), _fails_with("n5"), mode="staged", max_time=1e-9, save_best=out, warn=lambda _: None).run()
    assert len(_valid(out).graph.node) == len(result.nodes) <= 32


@pytest.mark.parametrize("n,fault", [(100, "n37"), (257, "n200"), (64, "n0"), (64, "n63")])
def test_staged_first_phase_no_more_checks_than_bisect(n, fault):
    def checks(mode):
        result = Reducer(chain(n), _fails_with(fault), mode=mode).run()
        return result.checks, result.nodes

    staged, bisect = checks("staged"), checks("bisect")
    assert staged[1] == [fault] and len(staged[1]) <= len(bisect[1])
    # A fault at the very first node: the suffix search proves it is the first needed node, then one
    # check of it alone; bisect's inputs phase has nothing left to search there (one check fewer).
    assert staged[0] <= bisect[0] + (fault == "n0")


def test_cli_max_checks(tmp_path, monkeypatch):
    import sys

    from parity.testing import invoke

    monkeypatch.chdir(tmp_path)
    onnx.save(chain(40), "m.onnx")
    (tmp_path / "check.py").write_text("import sys, onnx\nsys.exit(1 if 'n30' in {n.name for n in onnx.load(sys.argv[1]).graph.node} else 0)\n")
    rc, _, err = invoke(
        "debug",
        "reduce",
        "m.onnx",
        "-o",
        "out.onnx",
        "--mode",
        "staged",
        "--max-checks",
        "4",
        "--no-repro",
        "--no-resume",
        "--check",
        sys.executable,
        "check.py",
        "parity_debug.onnx",
    )
    assert rc == 0, err
    assert 0 < len(_valid(tmp_path / "out.onnx").graph.node) <= 40
