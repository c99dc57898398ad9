"""parity_polygraphy.backend.trt's tactic replay (TensorInfo, Algorithm, TacticReplayData, TacticRecorder,
TacticReplayer) against Parity's behavioural model of TensorRT (NOT TensorRT), with files written by the real
Polygraphy 0.53.6 (installed next to it) read back, and the other way round."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import namedtuple
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "trt" / "tests"))  # trt_model lives with parity-trt's tests
from parity_polygraphy.backend.trt import Algorithm, TacticRecorder, TacticReplayData, TacticReplayer, TensorInfo  # noqa: E402
from parity_polygraphy.comparator import IterationResult, RunResults  # noqa: E402
from parity_polygraphy.exception import PolygraphyException  # noqa: E402
from parity_polygraphy.json import from_json, load_json, save_json, to_json  # noqa: E402
from trt_model.install import install, uninstall  # noqa: E402
from trt_model.manifest import versions  # noqa: E402

# What a user fakes TensorRT's IAlgorithmContext / IAlgorithm with (as Polygraphy's own tests do)
Context = namedtuple("Context", ["name", "num_inputs", "num_outputs"])
Variant = namedtuple("Variant", ["implementation", "tactic"])
FakeAlgorithm = namedtuple("FakeAlgorithm", ["algorithm_variant", "io_info"])
FakeAlgorithm.get_algorithm_io_info = lambda self, index: self.io_info[index]
IOInfo = namedtuple("IOInfo", ["dtype", "strides"])  # before TensorRT 8.6: no vectorisation fields


@pytest.fixture(params=versions())
def trt(request, monkeypatch):
    yield install(monkeypatch, request.param)
    uninstall()


@pytest.fixture
def trt11(monkeypatch):
    yield install(monkeypatch, versions()[-1])
    uninstall()


def selector_versions() -> list[str]:
    return [v for v in versions() if v.startswith("10.")]  # IAlgorithmSelector is gone from TensorRT 11


def make_replay(trt: Any, tactic: int = -7) -> TacticReplayData:
    info = TensorInfo(trt.float32, (6, 3, 1), -1, 1)
    half = TensorInfo(trt.float16, [4, 1], None, None)
    algo = Algorithm(implementation=3, tactic=tactic, inputs=[info, half], outputs=[info])
    return TacticReplayData().add("conv", algo).add("relu", Algorithm(1, 2, [half], [half]))


POLYGRAPHY_REPLAY = """
import sys
import tensorrt as trt
from polygraphy.backend.trt import Algorithm, TacticReplayData, TensorInfo
info = TensorInfo(trt.float32, (6, 3, 1), -1, 1)
half = TensorInfo(trt.float16, [4, 1], None, None)
algo = Algorithm(implementation=3, tactic=int(sys.argv[2]), inputs=[info, half], outputs=[info])
replay = TacticReplayData().add("conv", algo).add("relu", Algorithm(1, 2, [half], [half]))
"""


def polygraphy(code: str, *args: str) -> str:
    """Run ``code`` with the real Polygraphy 0.53.6 in a fresh process (it keeps the first TensorRT it imports; the
    fixture's environment gives that process the same modelled version); what it prints, less its log lines."""
    # Polygraphy's JSON encoder and decoder import torch (1.3 s) to look for its tensors; replay files hold none
    code = "import sys; sys.modules['torch'] = None\n" + code
    out = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True, text=True).stdout
    return "".join(line for line in out.splitlines(keepends=True) if not line.startswith(("[I] ", "[W] ")))


def test_polygraphy_replay_files_load_and_parity_writes_the_same_text(trt, tmp_path) -> None:
    path = tmp_path / "replay.json"
    printed = polygraphy(POLYGRAPHY_REPLAY + "replay.save(sys.argv[1]); print(replay)", str(path), "-7")
    loaded = TacticReplayData.load(str(path))  # written by Polygraphy 0.53.6
    assert isinstance(loaded, TacticReplayData) and loaded == make_replay(trt)
    assert list(loaded) == ["conv", "relu"]
    assert loaded["conv"].inputs[1] == TensorInfo(trt.float16, (4, 1), None, None)
    assert loaded["conv"].inputs[0].dtype is trt.DataType.FLOAT
    assert make_replay(trt).to_json() == path.read_text()  # byte for byte
    assert isinstance(load_json(str(path)), TacticReplayData)
    assert str(loaded) == printed.rstrip("\n")  # printed as Polygraphy prints it
    assert str(loaded).splitlines()[:2] == ["Layer: conv", "    Algorithm: " + str(loaded["conv"])]
    assert repr(loaded["conv"].inputs[0]) == "TensorInfo(DataType.FLOAT, (6, 3, 1), -1, 1)"


def test_parity_replay_files_load_in_polygraphy(trt, tmp_path) -> None:
    path = tmp_path / "sub" / "replay.json"
    make_replay(trt, tactic=2**62).save(str(path))  # folders made, as Polygraphy does
    assert sorted(os.listdir(path.parent)) == ["replay.json"]  # written atomically: no temporary file left
    check = POLYGRAPHY_REPLAY + "assert TacticReplayData.load(sys.argv[1]) == replay; print('same')"
    assert polygraphy(check, str(path), str(2**62)) == "same\n"


def test_from_trt_splits_inputs_from_outputs(trt) -> None:
    infos = [IOInfo(trt.float32, [8, 1]), IOInfo(trt.int8, [2, 1]), IOInfo(trt.float16, [1])]
    algo = Algorithm.from_trt(Context("mm", 2, 1), FakeAlgorithm(Variant(5, -3), infos))
    assert (algo.implementation, algo.tactic) == (5, -3)
    assert algo.inputs == (TensorInfo(trt.float32, (8, 1), None, None), TensorInfo(trt.int8, (2, 1), None, None))
    assert algo.outputs == (TensorInfo(trt.float16, (1,), None, None),)
    assert str(algo) == ("(Implementation: 5, Tactic: -3) | Inputs: (TensorInfo(DataType.FLOAT, (8, 1), None, None), "
                         "TensorInfo(DataType.INT8, (2, 1), None, None)) | Outputs: (TensorInfo(DataType.HALF, (1,), None, None),)")
    assert hash(algo) == hash(Algorithm.from_trt(Context("mm", 2, 1), FakeAlgorithm(Variant(5, -3), infos)))
    assert len({algo, Algorithm(5, -3, algo.inputs, algo.outputs), Algorithm(5, -2, algo.inputs, algo.outputs)}) == 2


def test_equality_compares_every_field(trt) -> None:
    info = TensorInfo(trt.float32, (1, 2), -1, 1)
    assert info != TensorInfo(trt.float32, (1, 2), 0, 2) and info != TensorInfo(trt.float16, (1, 2), -1, 1)
    assert info != "TensorInfo" and Algorithm(1, 2, [info], []) != Algorithm(1, 2, [], [info])
    assert Algorithm(1, 2, [info], [info]) == Algorithm(1, 2, (info,), (info,))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda trt: TensorInfo("float32", (1,), -1, 1), "'dtype' must be an instance of DataType"),
        (lambda trt: TensorInfo(trt.float32, 3, -1, 1), "'strides' must be an instance of Sequence"),
        (lambda trt: TensorInfo(trt.float32, (1,), "0", 1), "'vectorized_dim' must be an instance of int"),
        (lambda trt: Algorithm(1, 2, [TensorInfo(trt.float32, (1,), -1, 1)], ["x"]), r"'outputs\[0\]' must be an instance of TensorInfo"),
        (lambda trt: TacticReplayData().add("conv", "tactic 3"), "Unsupported value type"),
        (lambda trt: TacticReplayData().add(3, Algorithm(1, 2, [], [])), "Unsupported key type"),
    ],
)
def test_wrong_types_are_refused(trt, make, message) -> None:
    with pytest.raises(PolygraphyException, match=message):
        make(trt)


def test_json_of_another_type_is_refused(trt11) -> None:
    with pytest.raises(PolygraphyException, match="JSON cannot be decoded into a TacticReplayData"):
        TacticReplayData.from_json(RunResults().to_json())
    with pytest.raises(PolygraphyException, match="JSON cannot be decoded into a TacticReplayData"):
        TacticReplayData.from_json(to_json({"replay": {}}))


def test_unknown_data_type_in_a_file_is_named(trt11) -> None:
    text = make_replay(trt11).to_json().replace("DataType.HALF", "DataType.FLOAT99")
    with pytest.raises(PolygraphyException, match=r"Unknown TensorRT data type in tactic replay data: DataType\.FLOAT99"):
        from_json(text)


def test_save_and_load_through_open_files(trt11, tmp_path) -> None:
    replay = make_replay(trt11)
    with open(tmp_path / "r.json", "w+") as f:
        replay.save(f)
        assert TacticReplayData.load(f) == replay  # read from the start, as Polygraphy does
    save_json(replay, tmp_path / "s.json")
    assert from_json((tmp_path / "s.json").read_text()) == replay
    # the other JSON type of Polygraphy's util/test_serde.py, saved and loaded through one open file the same way
    results = RunResults([("runner0", [IterationResult({"out": np.ones((1, 2), dtype=np.float32)}, runner_name="runner0")])])
    with open(tmp_path / "results.json", "w+") as f:
        results.save(f)
        assert RunResults.load(f) == results


def test_importing_the_module_does_not_import_tensorrt() -> None:
    code = "import sys, parity_polygraphy.backend.trt as t; t.TacticReplayData(); assert 'tensorrt' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_selectors_are_refused_on_tensorrt_11(trt11) -> None:
    for make in (TacticRecorder, TacticReplayer):
        with pytest.warns(DeprecationWarning), pytest.raises(PolygraphyException, match="not available on TensorRT version 11"):
            make(TacticReplayData())


# --- TacticRecorder / TacticReplayer in builds of the model (TensorRT 10.x) -----------------------------------
def build(trt: Any, selector: Any) -> dict[str, str] | None:
    """Build a three-layer network with ``selector`` as the config's algorithm selector: the engine's tactic per
    layer name (its inspector's TacticValue), or None if the build failed."""
    builder = trt.Builder(trt.Logger(trt.Logger.ERROR))
    network = builder.create_network(0)
    x, y = (network.add_input(name, trt.float32, (1, 3, 8, 8)) for name in "xy")
    add = network.add_elementwise(x, y, trt.ElementWiseOperation.SUM)
    add.name = "add"
    first = network.add_identity(add.get_output(0))
    first.name = "copy"
    second = network.add_identity(first.get_output(0))
    second.name = "copy_again"
    network.mark_output(second.get_output(0))
    config = builder.create_builder_config()
    config.algorithm_selector = selector
    config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        return None
    inspector = trt.Runtime(trt.Logger(trt.Logger.ERROR)).deserialize_cuda_engine(plan).create_engine_inspector()
    layers = (json.loads(inspector.get_layer_information(i, trt.LayerInformationFormat.JSON)) for i in range(3))
    return {layer["Name"]: layer["TacticValue"] for layer in layers}


@pytest.fixture(params=selector_versions())
def trt10(request, monkeypatch):
    yield install(monkeypatch, request.param)
    uninstall()


def test_recorder_records_every_layer_and_the_replayer_replays_it(trt10, tmp_path) -> None:
    path = tmp_path / "replay.json"
    with pytest.warns(DeprecationWarning, match="TacticRecorder is deprecated"):
        recorder = TacticRecorder(str(path))
    assert build(trt10, recorder)
    recorded = TacticReplayData.load(str(path))
    assert list(recorded) == ["add", "copy", "copy_again"] and recorded == recorder.data
    assert polygraphy("from polygraphy.backend.trt import TacticReplayData as T; import sys; print(list(T.load(sys.argv[1])))",
                      str(path)) == "['add', 'copy', 'copy_again']\n"  # Polygraphy reads it

    with pytest.warns(DeprecationWarning):
        replayer = TacticReplayer(str(path))
    assert build(trt10, replayer)  # every recorded tactic was offered and chosen again

    in_memory = TacticReplayData()
    with pytest.warns(DeprecationWarning):
        assert build(trt10, TacticRecorder(in_memory))
    assert in_memory == recorded


def test_replayer_forces_a_tactic_that_is_not_the_default(trt10, capsys) -> None:
    class Offered(trt10.IAlgorithmSelector):
        """Records the choices TensorRT offers for each layer, then lets it choose (the default)."""

        def __init__(self) -> None:
            trt10.IAlgorithmSelector.__init__(self)
            self.offered: dict[str, list[Algorithm]] = {}

        def select_algorithms(self, context: Any, choices: Any) -> list[int]:
            self.offered[context.name] = [Algorithm.from_trt(context, c) for c in choices]
            return list(range(len(choices)))

        def report_algorithms(self, contexts: Any, choices: Any) -> None:
            self.reported = dict(zip((c.name for c in contexts), zip(contexts, choices)))
            self.chosen = {c.name: Algorithm.from_trt(c, a) for c, a in zip(contexts, choices)}

    probe = Offered()
    assert build(trt10, probe)
    other = next(a for a in probe.offered["add"] if a != probe.chosen["add"])  # the model offers 2-3 per layer
    with pytest.warns(DeprecationWarning):
        replayer = TacticReplayer(TacticReplayData().add("add", other))
    tactics = build(trt10, replayer)
    assert tactics is not None and tactics["add"] == f"0x{other.tactic & (2**64 - 1):016x}"  # the engine has it
    # and report_algorithms found it chosen (it raises, TensorRT printing that, otherwise)
    out, err = capsys.readouterr()
    assert "TensorRT selected a tactic different" not in out + err and "Exception caught" not in err

    with pytest.warns(DeprecationWarning):
        replayer = TacticReplayer(TacticReplayData().add("add", other))
    context, default = probe.reported["add"]
    with pytest.raises(PolygraphyException, match="TensorRT selected a tactic different"):  # the check itself
        replayer.report_algorithms([context], [default])


def test_replayer_falls_back_for_new_layers_and_refuses_missing_tactics(trt10) -> None:
    algo = FakeAlgorithm(Variant(6, 0), [TensorInfo(trt10.float32, (1, 2), -1, 1)] * 2)
    replay = TacticReplayData().add("conv", Algorithm.from_trt(Context("conv", 1, 1), algo))
    with pytest.warns(DeprecationWarning):
        replayer = TacticReplayer(replay)
    other = FakeAlgorithm(Variant(6, 1), algo.io_info)
    assert replayer.select_algorithms(Context("conv", 1, 1), [other, algo]) == [1]
    assert replayer.select_algorithms(Context("new", 1, 1), [other, algo, other]) == [0, 1, 2]
    with pytest.raises(PolygraphyException, match="was not provided by TensorRT as a choice"):
        replayer.select_algorithms(Context("conv", 1, 1), [other])
    with pytest.raises(PolygraphyException, match="TensorRT selected a tactic different"):
        replayer.report_algorithms([Context("conv", 1, 1)], [other])
