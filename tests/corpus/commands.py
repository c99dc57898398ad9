"""Every command, run on one corpus model: the argument lists, what each writes, and how a written model is
judged. The corpus test (tests/test_corpus_commands.py) and the matrix script (``python tests/corpus/commands.py``,
which prints what each command does on each model) share these definitions.

Invariant: a command that exits 0 after writing a model wrote one that passes ``onnx.checker`` with full
shape inference and loads in onnxruntime; any exit leaves one short error line and no traceback.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corpus import MODELS, CorpusModel, model_path  # noqa: E402

ORT_PAIR = ("--onnxrt", "--onnxrt=graph-optimization-level=disable")


@dataclass(frozen=True)
class Command:
    name: str
    argv: Callable[[CorpusModel, Path, Path], list[str]]  # (model, model path, workdir) -> parity arguments
    writes: tuple[str, ...] = ()  # models (relative to workdir) the command promises on exit 0
    ok_codes: tuple[int, ...] = (0,)  # exit codes that are a correct answer on this corpus


def middle_tensor(path: Path) -> str:
    """A float tensor computed half-way through the top-level graph (an extraction target)."""
    import onnx

    model = onnx.load(str(path))
    inferred = onnx.shape_inference.infer_shapes(model)
    floats = {v.name for v in inferred.graph.value_info if v.type.tensor_type.elem_type == onnx.TensorProto.FLOAT}
    nodes = [n for n in model.graph.node if n.op_type not in ("Constant", "If", "Loop", "Scan")]
    for node in nodes[len(nodes) // 2 :]:
        for out in node.output:
            if out in floats:
                return out
    return model.graph.output[0].name


# fails while the candidate still holds the model's last non-Constant node: a cheap check whose minimal model is known
# (it reads the candidate's op types without onnx, under python -S: a twelfth of the time a check importing onnx took)
ONNX_WIRE = Path(__file__).resolve().with_name("onnx_wire.py")


def reduce_data_args(model: CorpusModel) -> list[str]:
    """The model's data options in debug reduce's spelling (it freezes shapes with --model-input-shapes)."""
    return ["--model-input-shapes" if a == "--input-shapes" else a for a in model.run_args]


def report_args(work: Path) -> list[str]:
    return ["--save-report-html", str(work / "r.html"), "--save-model-explorer", str(work / "me.json")]


def last_op(path: Path) -> str:
    import onnx

    return [n.op_type for n in onnx.load(str(path)).graph.node if n.op_type != "Constant"][-1]


COMMANDS: dict[str, Command] = {
    c.name: c
    for c in [
        Command("inspect model", lambda m, p, w: ["inspect", "model", str(p), "--show", "layers", "attrs"]),
        Command("run onnxrt x2", lambda m, p, w: ["run", str(p), *ORT_PAIR, *m.run_args]),
        Command("localize x2", lambda m, p, w: ["debug", "localize", str(p), *ORT_PAIR, *m.run_args, "--extract-to", str(w / "node.onnx")], ok_codes=(0, 1)),
        Command(
            "run layerwise reports",
            lambda m, p, w: ["run", str(p), *ORT_PAIR, *m.run_args, "--onnx-outputs", "mark", "all", *report_args(w)],
            ok_codes=(0, 1),
        ),
        Command("check lint", lambda m, p, w: ["check", "lint", str(p)], ok_codes=(0, 1)),
        Command("convert fp16", lambda m, p, w: ["convert", "--fp-to-fp16", str(p), "-o", str(w / "fp16.onnx")], ("fp16.onnx",)),
        Command("sanitize fold", lambda m, p, w: ["surgeon", "sanitize", "--fold-constants", str(p), "-o", str(w / "folded.onnx")], ("folded.onnx",)),
        Command("extract middle", lambda m, p, w: ["surgeon", "extract", str(p), "--outputs", f"{middle_tensor(p)}:auto", "-o", str(w / "sub.onnx")], ("sub.onnx",)),
        Command(
            "debug reduce",
            lambda m, p, w: [
                "debug", "reduce", str(p), *reduce_data_args(m), "-o", str(w / "min.onnx"), "--repro", str(w / "repro"),
                "--check", sys.executable, "-S", str(ONNX_WIRE), "parity_debug.onnx", last_op(p),
            ],  # fmt: skip
            ("min.onnx",),
        ),
    ]
}


def assert_loadable(path: Path) -> None:
    """The invariant for written models: onnx.checker with full shape inference, then an onnxruntime session."""
    import onnx
    import onnxruntime as ort

    onnx.checker.check_model(str(path), full_check=True)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])


def run(command: Command, model: CorpusModel, workdir: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    workdir.mkdir(parents=True, exist_ok=True)
    argv = ["parity", *command.argv(model, model_path(model.name), workdir)]
    return subprocess.run(argv, capture_output=True, text=True, cwd=workdir, timeout=timeout, stdin=subprocess.DEVNULL)


def outcome(command: Command, model: CorpusModel, workdir: Path) -> str:
    """One cell of the matrix: exit code, and for writers whether the model loads, or the first error line."""
    proc = run(command, model, workdir)
    cell = f"exit {proc.returncode}"
    if "Traceback" in proc.stderr:
        return cell + ", TRACEBACK"
    if proc.returncode == 0:
        for written in command.writes:
            try:
                assert_loadable(workdir / written)
            except Exception as exc:  # noqa: BLE001 - the cell reports it
                return cell + f", BROKEN {written}: {str(exc).splitlines()[0][:80]}"
        return cell + (", loads" if command.writes else "")
    return cell + ": " + (proc.stderr.strip().splitlines() or [""])[-1][:100]


if __name__ == "__main__":
    import tempfile

    names = sys.argv[1:] or list(MODELS)
    print("| model | " + " | ".join(COMMANDS) + " |")
    print("|---" * (len(COMMANDS) + 1) + "|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            cells = [outcome(c, MODELS[name], Path(tmp) / name / c.name.replace(" ", "_")) for c in COMMANDS.values()]
            print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
