"""Bad-input run: 118 malformed or hostile inputs, each through the ``parity`` CLI in a fresh process.

    python bench/bad_input_run.py [--only SUBSTRING] [--keep DIR]

Builds every case in a temporary folder (or DIR with --keep, left in place), runs it, and prints one line per case
(``OK``/``BAD``, the exit code, what was wrong, the first ``parity: error:`` line) and a tally: cases, tracebacks
(a Python traceback, or Parity's "unexpected exception" line that points to --verbose), wrong exit codes (the
contract: 0 pass, 1 mismatch, 2 usage or bad input, 3 model or backend failure), and errors whose first line does
not name the offending file. Exits 1 if any case is bad.

Each child runs with a 6 GB address-space limit, so a reader that trusts a huge shape in a header fails fast
instead of swapping the machine.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parent.parent
PARITY = Path(sys.executable).parent / "parity"
MEMORY_LIMIT = 6_000_000 * 1024  # bytes of address space per child (as `ulimit -v 6000000`)
TIMEOUT = 120


def _tests_module(name: str):
    """A helper module of tests/ (model and file builders), without putting tests/ on sys.path."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "tests" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# the malformed-file builders the tests use (tests/bad_files.py)
bad_files = _tests_module("bad_files")
OUT, IN, npy, npy_header, archive, set_method = bad_files.OUT, bad_files.IN, bad_files.npy, bad_files.npy_header, bad_files.archive, bad_files.set_method
poly_array, poly_inputs, poly_outputs, poly_iteration, zip_bytes = (
    bad_files.poly_array, bad_files.poly_inputs, bad_files.poly_outputs, bad_files.poly_iteration, bad_files.zip_bytes)
ENTRIES = {"a/0.npy": npy()}


# ---------------------------------------------------------------------------------------------------- the cases
def build_cases(d: Path) -> list[tuple[str, list, int, str]]:
    """``(name, argv, expected exit code, text the first error line must contain)`` for every case."""
    from parity.results import save_inputs, save_results
    from parity.results.model import IterationResult, RunResults

    core_models = _tests_module("core_models")
    model = core_models.affine(d / "affine.onnx")  # IR version 10, opset 17
    good_in = d / "good_in.npz"
    save_inputs([{"x": np.ones((1, 4), np.float32)}], good_in)
    good_out = d / "good_out.npz"
    save_results(RunResults([("r", [IterationResult({"y": np.ones((1, 4), np.float32)}, 0.1, "r")])]), good_out)

    # Bad data files: name -> (path, how it is fed: "outputs" = --load-outputs, "inputs" = --load-inputs, "both").
    files: dict[str, tuple[Path, str]] = {}
    files["manifest_list"] = (archive(d / "manifest_list.npz", None, ENTRIES, raw_manifest="[1, 2]"), "outputs")
    files["manifest_str_version"] = (archive(d / "manifest_strver.npz", {**OUT, "version": "1"}, ENTRIES), "outputs")
    files["manifest_str_version_in"] = (archive(d / "manifest_strver_in.npz", {**IN, "version": "1"}, ENTRIES), "inputs")

    path = archive(d / "deflate.npz", OUT, ENTRIES, method=zipfile.ZIP_DEFLATED)
    data = bytearray(path.read_bytes())
    at = data.rfind(b"parity.json", 0, data.find(b"PK\x01\x02")) + len("parity.json")
    for k in range(at + 2, at + 12):  # flip bytes inside the deflated manifest
        data[k] ^= 0xFF
    path.write_bytes(bytes(data))
    files["corrupt_deflated_manifest"] = (path, "outputs")

    path = archive(d / "method.npz", OUT, ENTRIES)
    set_method(path, 77, first_only=False)  # a compression method no reader knows, on every member
    files["unsupported_method"] = (path, "outputs")
    path = d / "method_entry.npz"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("a/0.npy", npy(), compress_type=zipfile.ZIP_DEFLATED)
        z.writestr("parity.json", json.dumps(OUT))
    set_method(path, 77, first_only=True)  # ... on the array entry only
    files["unsupported_method_entry"] = (path, "outputs")

    files["poly_zip_payload"] = (poly_inputs(d / "poly_zip.json", poly_array(zip_bytes({"hello.txt": "hi"}))), "inputs")
    files["poly_empty_zip_payload"] = (poly_inputs(d / "poly_emptyzip.json", poly_array(zip_bytes({}))), "inputs")
    files["poly_nonlatin1"] = (poly_inputs(d / "poly_nonlatin1.json", {"array": "\u20ac\u4e2d not base64", "polygraphy_class": "ndarray"}), "inputs")
    bad_header = npy(header="{'descr': '<f4', 'fortran_order': False, 'shape': (1,4),,}")
    files["poly_bad_header"] = (poly_inputs(d / "poly_badheader.json", poly_array(bad_header)), "inputs")
    files["poly_bad_header2"] = (poly_inputs(d / "poly_badheader2.json", poly_array(npy_header("(1,4)", descr="zz9"))), "inputs")
    files["poly_huge_shape"] = (poly_inputs(d / "poly_huge.json", poly_array(npy_header("(4611686018427387904, 4)"))), "inputs")
    files["poly_huge_shape2"] = (poly_inputs(d / "poly_huge2.json", poly_array(npy_header("(100000, 100000, 100000)"))), "inputs")
    files["poly_neg_shape"] = (poly_inputs(d / "poly_neg.json", poly_array(npy_header("(-1, 4)"))), "inputs")
    huge_iteration = poly_iteration(poly_array(npy_header("(1000000, 1000000)", descr="<f8")))
    files["poly_out_huge"] = (poly_outputs(d / "poly_out_huge.json", [["r", [huge_iteration]]]), "outputs")
    run = ["r", [poly_iteration(poly_array(npy()))]]
    files["poly_dup_runner"] = (poly_outputs(d / "poly_dup.json", [run, run]), "both")
    files["parity_dup_runner"] = (archive(d / "dup.npz", {**OUT, "runs": OUT["runs"] * 2}, ENTRIES), "outputs")

    (d / "deep.json").write_text("[" * 100000 + "]" * 100000)
    files["deep_json"] = (d / "deep.json", "inputs")
    (d / "deep_obj.json").write_text('{"a":' * 50000 + "1" + "}" * 50000)
    files["deep_json_obj"] = (d / "deep_obj.json", "inputs")
    deep = '{"format": "parity", "version": 1, "kind": "outputs", "x": ' + "[" * 100000 + "]" * 100000 + "}"
    files["deep_manifest"] = (archive(d / "deep_manifest.npz", None, ENTRIES, raw_manifest=deep), "outputs")

    for name, shape in (
        ("huge", "(4611686018427387904, 4)"),
        ("huge2", "(100000, 100000, 100000)"),
        ("huge3", "(3037000500, 3037000500)"),
        ("neg", "(-1, 4)"),
        ("neg2", "(-2, -3)"),
    ):
        files[f"npy_{name}_out"] = (archive(d / f"npy_{name}_out.npz", OUT, {"a/0.npy": npy_header(shape)}), "outputs")
        files[f"npy_{name}_in"] = (archive(d / f"npy_{name}_in.npz", IN, {"a/0.npy": npy_header(shape)}), "inputs")
    structured = npy(np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")]))
    files["npy_struct_dtype"] = (archive(d / "npy_struct.npz", IN, {"a/0.npy": structured}), "inputs")
    runtime_str = {**OUT, "runs": [{"runner": "r", "iterations": [{"runtime": "fast", "outputs": {"y": "a/0.npy"}}]}]}
    files["manifest_runtime_str"] = (archive(d / "rt_str.npz", runtime_str, ENTRIES), "outputs")
    runner_int = {**OUT, "runs": [{"runner": 5, "iterations": [{"runtime": 0.1, "outputs": {"y": "a/0.npy"}}]}]}
    files["manifest_runner_int"] = (archive(d / "runner_int.npz", runner_int, ENTRIES), "inputs")  # an outputs file fed as inputs
    files["manifest_entry_int"] = (archive(d / "entry_int.npz", {**IN, "iterations": [{"x": 5}]}, ENTRIES), "inputs")

    cases: list[tuple[str, list, int, str]] = []
    for key, (path, fed_as) in files.items():
        if fed_as in ("outputs", "both"):
            cases.append((f"{key}/run-load-outputs", ["run", "--load-outputs", path, good_out], 2, path.name))
        if fed_as in ("inputs", "both"):
            cases.append((f"{key}/run-load-inputs", ["run", model, "--onnxrt", "--load-inputs", path], 2, path.name))
        cases.append((f"{key}/inspect-data", ["inspect", "data", path, "--all", "--histogram"], 2, path.name))
        cases.append((f"{key}/data-concat", ["data", "concat", path, path, "-o", d / "concat_out.npz"], 2, path.name))

    scripts = d / "scripts"
    scripts.mkdir()
    for name, source in (
        ("raises", "def load_data():\n    raise RuntimeError('no camera found')\n"),
        ("noniter", "def load_data():\n    return 5\n"),
        ("gen_raises", "def load_data():\n    yield {'x': __import__('numpy').ones((1, 4), 'float32')}\n    raise OSError('disk gone')\n"),
        ("import_raises", "raise ImportError('needs torch')\n"),
        ("returns_none", "def load_data():\n    pass\n"),
        ("syntax", "def load_data(:\n"),
    ):
        (scripts / f"{name}.py").write_text(source)
        cases.append((f"script_{name}", ["run", model, "--onnxrt", "--data-loader-script", scripts / f"{name}.py"], 2, f"{name}.py"))

    (d / "afile.txt").write_text("x")
    (d / "outdir").mkdir()
    cases.append(("save_outputs_under_file", ["run", model, "--onnxrt", "--save-outputs", d / "afile.txt" / "out.npz"], 2, "afile.txt"))
    cases.append(("save_inputs_under_file", ["run", model, "--onnxrt", "--save-inputs", d / "afile.txt" / "in.npz"], 2, "afile.txt"))
    cases.append(("save_outputs_dir", ["run", model, "--onnxrt", "--save-outputs", d / "outdir"], 2, "outdir"))
    cases.append(("concat_out_under_file", ["data", "concat", good_in, "-o", d / "afile.txt" / "o.npz"], 2, "afile.txt"))
    cases.append(("concat_out_dir", ["data", "concat", good_in, "-o", d / "outdir"], 2, "outdir"))

    ext = d / "ext"  # a model whose external data file is missing
    ext.mkdir()
    onnx.save(onnx.load(model), ext / "ext.onnx", save_as_external_data=True, all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
    (ext / "weights.bin").unlink()
    cases.append(("ext_missing/convert", ["convert", "--fp-to-fp16", ext / "ext.onnx", "-o", d / "ext_fp16.onnx"], 3, "weights.bin"))
    cases.append(("ext_missing/surgeon-sanitize", ["surgeon", "sanitize", ext / "ext.onnx", "-o", d / "ext_s.onnx"], 3, "weights.bin"))
    cases.append(("ext_missing/run", ["run", ext / "ext.onnx", "--onnxrt"], 3, "weights.bin"))
    cases.append(("ext_missing/inspect", ["inspect", "model", ext / "ext.onnx"], 0, ""))  # inspecting needs no weights
    return cases


# ---------------------------------------------------------------------------------------------------- running
def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_case(argv: list, want: int, must: str, cwd: Path) -> tuple[list[str], int, str]:
    """``(problems, exit code, first error line)`` of one case."""
    try:
        proc = subprocess.run(
            [str(PARITY), *map(str, argv)], capture_output=True, text=True, timeout=TIMEOUT, cwd=cwd, preexec_fn=_limit_memory, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        return ["TIMEOUT"], -1, f"no answer in {TIMEOUT} s"
    err = proc.stderr
    errors = [line for line in err.splitlines() if line.startswith("parity: error:")]
    first = errors[0] if errors else (err.strip().splitlines() or [""])[-1]
    problems = []
    if "Traceback" in err or "run with --verbose for the traceback" in err:
        problems.append("TRACEBACK")
    if proc.returncode != want:
        problems.append(f"CODE {proc.returncode}!={want}")
    if want and (not errors or must not in errors[0]):
        problems.append("UNNAMED")
    return problems, proc.returncode, first


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run only the cases whose name contains this")
    parser.add_argument("--keep", type=Path, help="build the cases in this (new) folder and keep it")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="parity-bad-input-") as tmp:
        d = args.keep or Path(tmp)
        if args.keep:
            d.mkdir(parents=True)
        cases = [c for c in build_cases(d) if args.only in c[0]]
        tally = {"traceback": 0, "code": 0, "unnamed": 0, "timeout": 0}
        bad = 0
        for name, argv, want, must in cases:
            problems, code, first = run_case(argv, want, must, d)
            tally["traceback"] += "TRACEBACK" in problems
            tally["code"] += any(p.startswith("CODE") for p in problems)
            tally["unnamed"] += "UNNAMED" in problems
            tally["timeout"] += "TIMEOUT" in problems
            bad += bool(problems)
            print(f"{'BAD' if problems else 'OK '} {name}: {code} {' '.join(problems)} | {first[:300]}", flush=True)

    print(
        f"cases {len(cases)}, tracebacks {tally['traceback']}, wrong exit codes {tally['code']}, "
        f"errors not naming the file {tally['unnamed']}, timeouts {tally['timeout']}; bad cases {bad}"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
