"""Simulated flaky builds for the diff-tactics tests.

Each simulated build picks one tactic per layer at random (as TensorRT's timing noise does); a build is bad
when it picked a planted culprit, and ``label_noise`` flips some verdicts (a flaky ``--check``).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
from pathlib import Path

from parity_tactics.replay import Tactic, TacticReplay, TensorFormat

FLOAT = TensorFormat("FLOAT", (64, 16, 4, 1))
HALF = TensorFormat("HALF", (64, 16, 4, 1), 1, 2)


def layer_tactic(layer: int, choice: int, source: str = "algorithm-selector") -> Tactic:
    if source == "timing-cache":
        return Tactic(0x1000 * (layer + 1) + choice, timing_ms=0.01 * (choice + 1))
    return Tactic(tactic=1000 * layer + choice, implementation=-2147483642 + choice % 2, inputs=(FLOAT,), outputs=(HALF,))


def layer_key(layer: int, source: str = "algorithm-selector") -> str:
    return f"/block{layer}/Conv" if source == "algorithm-selector" else f"0x{layer + 1:032x}"


def simulate(
    builds: int,
    culprits: list[tuple[int, int]],
    layers: int = 12,
    choices: int = 3,
    label_noise: float = 0.0,
    seed: int = 0,
    source: str = "algorithm-selector",
) -> tuple[list[TacticReplay], list[TacticReplay]]:
    """Returns (good, bad) replays of ``builds`` simulated builds."""
    rng = random.Random(seed)
    good, bad = [], []
    for _ in range(builds):
        picks = [rng.randrange(choices) for _ in range(layers)]
        replay = TacticReplay(source=source, tensorrt="10.7.0" if source == "algorithm-selector" else "11.4.0.106")
        for layer, choice in enumerate(picks):
            replay.add(layer_key(layer, source), layer_tactic(layer, choice, source))
        is_bad = any(picks[layer] == choice for layer, choice in culprits)
        if rng.random() < label_noise:
            is_bad = not is_bad
        (bad if is_bad else good).append(replay)
    return good, bad


def write_sorted(root: Path, good: list[TacticReplay], bad: list[TacticReplay]) -> Path:
    """Lay replays out as ``debug build`` sorts them: root/good/*.json and root/bad/*.json."""
    for label, replays in (("good", good), ("bad", bad)):
        for index, replay in enumerate(replays):
            replay.save(root / label / f"replay_{index:03d}.json")
    return root


POLYGRAPHY_WRITER = textwrap.dedent(
    """
    # Runs in a subprocess: Polygraphy's own encoder writes the file. It checks dtypes against
    # tensorrt.DataType, so a minimal stand-in module supplies that enum; nothing else of TensorRT is touched.
    import enum, json, sys, types
    trt = types.ModuleType("tensorrt"); trt.__version__ = "10.7.0"
    class DataType(enum.Enum):
        FLOAT = 0
        HALF = 1
        INT8 = 2
    trt.DataType = DataType
    sys.modules["tensorrt"] = trt
    sys.modules["torch"] = None  # Polygraphy's JSON encoder imports torch (1.3 s) to look for tensors; replays hold none
    from polygraphy.backend.trt.algorithm_selector import Algorithm, TacticReplayData, TensorInfo
    spec = json.loads(sys.argv[2])
    replay = TacticReplayData()
    for name, (impl, tactic, ins, outs) in spec.items():
        info = lambda t: TensorInfo(DataType[t[0]], tuple(t[1]), t[2], t[3])
        replay.add(name, Algorithm(impl, tactic, [info(t) for t in ins], [info(t) for t in outs]))
    replay.save(sys.argv[1])
    """
)


def write_polygraphy_replay(path: Path, spec: dict) -> None:
    """Write a real Polygraphy 0.53 tactic replay: ``{layer: (impl, tactic, [inputs], [outputs])}``,
    tensor infos as ``(dtype, strides, vectorized_dim, components_per_element)``. Skips the calling test where
    Polygraphy is not installed (it is in requirements-dev.txt, not a dependency of Parity)."""
    import importlib.util

    import pytest

    if importlib.util.find_spec("polygraphy") is None:
        pytest.skip("Polygraphy is not installed (pip install -r requirements-dev.txt)")
    subprocess.run([sys.executable, "-c", POLYGRAPHY_WRITER, str(path), json.dumps(spec)], check=True, capture_output=True)
