"""``--torch`` end to end, on programs the tests export (conftest ``programs``): a PyTorch program against its ONNX
export, final outputs and layer by layer, debug localize, the options, and one-line errors for bad files."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from parity.api import load_inputs, load_results  # noqa: E402

PAIR = ("cnn.onnx", "--onnxrt", "--torch", "--torch-model", "cnn.pt2")  # the export by onnxruntime against the program
MARK_ALL = ("--onnx-outputs", "mark", "all", "--torch-outputs", "mark", "all")


def run(parity_invoke, folder, *args):
    cwd = os.getcwd()
    os.chdir(folder)  # the files by their names, as a user types them
    try:
        return parity_invoke(*map(str, args))
    finally:
        os.chdir(cwd)


def one_line(result, code):
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == code and len(lines) == 1 and lines[0].startswith("parity: error: "), result
    assert "Traceback" not in result.stderr + result.stdout
    return lines[0]


@pytest.mark.parametrize(
    ("name", "data", "outputs"),
    [
        ("cnn", (), ("linear", "mean")),
        ("encoder", (), ("layer_norm_1",)),
        ("branchy", ("--val-range", "[0.5,1]"), ("getitem",)),  # x sums above 0: the first branch
        ("branchy", ("--val-range", "[-1,-0.5]"), ("getitem",)),  # the other branch
    ],
)
def test_the_onnx_export_computes_what_the_program_does(parity_invoke, programs, name, data, outputs):
    result = run(parity_invoke, programs, "run", f"{name}.onnx", "--onnxrt", "--torch", "--torch-model", f"{name}.pt2", *data)
    assert result.exit_code == 0, result
    assert "[onnxrt-0 vs torch-1] iteration 0: PASSED" in result.stdout
    for output in outputs:  # named as the graph signature names them, which is how the exporter names the ONNX outputs
        assert f"  {output}: PASSED" in result.stdout


def test_the_program_runs_alone_with_inputs_from_its_signature(parity_invoke, programs, tmp_path):
    saved = tmp_path / "in.npz"
    result = run(parity_invoke, programs, "run", "cnn.pt2", "--torch", "--save-inputs", saved, "--save-outputs", tmp_path / "out.npz")
    assert result.exit_code == 0, result
    [feed] = load_inputs(str(saved))
    assert list(feed) == ["x"] and feed["x"].shape == (1, 3, 8, 8) and feed["x"].dtype == np.float32
    [(_, [outputs])] = load_results(str(tmp_path / "out.npz"))
    assert sorted(outputs) == ["linear", "mean"]
    fed = run(parity_invoke, programs, "run", *PAIR, "--load-inputs", saved, "--load-outputs", tmp_path / "out.npz")
    assert fed.exit_code == 0 and "vs out.npz:torch-0] iteration 0: PASSED" in fed.stdout, fed  # the same inputs, the same outputs
    shown = run(parity_invoke, programs, "inspect", "model", "cnn.pt2")
    assert shown.exit_code == 0 and "torch.export program" in shown.stdout and "x float32[1,3,8,8]" in shown.stdout and "linear float32[1,5]" in shown.stdout


def test_symbolic_dims_stay_dynamic(parity_invoke, programs, tmp_path):
    shown = run(parity_invoke, programs, "inspect", "model", "dynamic.pt2")
    assert shown.exit_code == 0 and re.search(r"x float32\[s\d+,3\]", shown.stdout), shown  # not the example's 4
    saved = tmp_path / "in.npz"
    result = run(parity_invoke, programs, "run", "dynamic.pt2", "--torch", "--input-shapes", "x:[5,3]", "--save-inputs", saved)
    assert result.exit_code == 0, result
    assert load_inputs(str(saved))[0]["x"].shape == (5, 3)


def test_layerwise_every_matched_tensor_passes_and_the_rest_is_listed(parity_invoke, programs):
    result = run(parity_invoke, programs, "run", *PAIR, *MARK_ALL)
    assert result.exit_code == 0, result
    assert "Layerwise comparison (onnxrt-0 vs torch-1, iteration 0): 14 tensors in topological order: all within tolerance." in result.stdout
    assert "  getitem: PASSED" in result.stdout  # a BatchNormalization folded into its Conv: matched through the exporter's metadata
    # the convolutions the exporter folded BatchNormalization into have no ONNX value: listed, not compared
    assert "2 PyTorch tensors without an ONNX counterpart (conv2d_1, conv2d_3), 0 ONNX tensors without a PyTorch one" in result.stderr


@pytest.mark.parametrize(
    ("name", "tensor", "node", "module"),
    [
        ("cnn", "conv2d_2", "node_conv2d_2' (Conv)", "PyTorch module 'layer1.0.conv2' (Conv2d)"),
        ("encoder", "layer_norm", "node_layer_norm' (LayerNormalization)", "PyTorch module 'enc.norm1' (LayerNorm)"),
    ],
)
def test_a_broken_export_names_the_first_divergent_tensor_and_its_module(parity_invoke, programs, tmp_path, name, tensor, node, module):
    report = tmp_path / "report.json"
    args = ("run", f"{name}_bad.onnx", "--onnxrt", "--torch", "--torch-model", f"{name}.pt2", *MARK_ALL)
    result = run(parity_invoke, programs, *args, "--report", report)
    assert result.exit_code == 1, result
    assert f"First divergence: '{tensor}', produced by node '{node}" in result.stdout and f"origin: {module}:" in result.stdout
    [layerwise] = json.loads(report.read_text())["layerwise"]
    rows = {row["name"]: row for row in layerwise["tensors"]}
    assert layerwise["first"] == tensor and rows[tensor]["origin"] == module and not rows[tensor]["passed"]


def test_without_the_exporters_metadata_nothing_is_matched(parity_invoke, programs, tmp_path):
    import onnx

    model = onnx.load(programs / "cnn.onnx")
    for node in model.graph.node:
        del node.metadata_props[:]
    onnx.save(model, tmp_path / "plain.onnx")
    pt2 = str(programs / "cnn.pt2")
    final = run(parity_invoke, tmp_path, "run", "plain.onnx", "--onnxrt", "--torch", "--torch-model", pt2)
    assert final.exit_code == 0, final  # the outputs are named as the signature names them: no metadata needed
    marked = run(parity_invoke, tmp_path, "run", "plain.onnx", "--onnxrt", "--torch", "--torch-model", pt2, *MARK_ALL)
    assert "--torch-outputs: plain.onnx records no PyTorch origin in its nodes' metadata, so no tensor can be matched" in one_line(marked, 2)


def test_localize_with_the_program_as_reference(parity_invoke, programs):
    result = run(parity_invoke, programs, "debug", "localize", "cnn_bad.onnx", *PAIR[1:])
    assert result.exit_code == 1, result
    assert "First divergence: 'conv2d_2'" in result.stdout and "origin: PyTorch module 'layer1.0.conv2' (Conv2d)" in result.stdout
    assert "Node 'node_conv2d_2' (Conv) INTRODUCES the error" in result.stdout
    # a budget that cuts the model into segments: the program is fed its inputs only, and computes the boundaries itself
    small = run(parity_invoke, programs, "debug", "localize", "cnn_bad.onnx", *PAIR[1:], "--memory-budget", "1K")
    assert small.exit_code == 1 and "First divergence: 'conv2d_2'" in small.stdout, small


def test_named_outputs_and_unknown_names(parity_invoke, programs):
    result = run(parity_invoke, programs, "run", "cnn.onnx", "--onnxrt", "--torch", "--torch-model", "cnn.pt2", "--onnx-outputs", "relu_1", "--torch-outputs", "relu_1")
    assert result.exit_code == 0 and "  relu_1: PASSED" in result.stdout and "conv2d_2" not in result.stdout, result
    bad = run(parity_invoke, programs, "run", "cnn.onnx", "--onnxrt", "--torch", "--torch-model", "cnn.pt2", "--onnx-outputs", "relu_1", "--torch-outputs", "rleu_1")
    assert "--torch-outputs: no tensor 'rleu_1'" in one_line(bad, 2) and "did you mean" in bad.stderr
    alone = run(parity_invoke, programs, "run", "cnn.pt2", "--torch", "--torch", "--torch-outputs", "mark", "all")
    assert alone.exit_code == 0 and "  batch_norm: PASSED" in alone.stdout, alone  # the program as saved: its own node names


def test_fp16_and_bf16_autocast_take_effect(parity_invoke, programs, tmp_path):
    saved = tmp_path / "out.npz"
    result = run(parity_invoke, programs, "run", "cnn.pt2", "--torch", "--torch=dtype=fp16", "--save-outputs", saved)
    assert result.exit_code == 1 and "dtypes float32 vs float16" in result.stdout, result
    (_, [fp32]), (_, [fp16]) = load_results(str(saved))
    assert fp32["linear"].dtype == np.float32 and fp16["linear"].dtype == np.float16
    assert 0 < np.abs(fp16["linear"].astype(np.float32) - fp32["linear"]).max() < 1e-2
    bf16 = run(parity_invoke, programs, "run", "cnn.pt2", "--torch", "--torch", "--torch-dtype", "bf16", "--atol", "0.05", "--rtol", "0.05", "--save-outputs", saved)
    assert bf16.exit_code == 0, bf16  # --torch-dtype applies to both runners: they agree exactly with each other
    (_, [one]), (_, [two]) = load_results(str(saved))
    assert one["linear"].dtype == np.float32 and np.array_equal(one["linear"], two["linear"])
    assert not (one["linear"].view(np.uint32) & 0xFFFF).any()  # bfloat16 values: their float32 bits end in 16 zeros
    assert not np.array_equal(one["linear"], fp32["linear"])


def test_bad_devices_are_refused(parity_invoke, programs):
    line = one_line(run(parity_invoke, programs, "run", "cnn.pt2", "--torch", "--torch-device", "gpu"), 2)
    assert "--torch-device: 'gpu' is not a device this runner takes; give cpu, cuda or cuda:N" in line
    if not torch.cuda.is_available():
        line = one_line(run(parity_invoke, programs, "run", "cnn.pt2", "--torch", "--torch-device", "cuda"), 2)
        assert "--torch-device cuda: PyTorch sees no CUDA device here" in line


def test_torchscript_runs(parity_invoke, programs):
    result = run(parity_invoke, programs, "run", "cnn.onnx", "--onnxrt", "--torch", "--torch-model", "cnn_script.pt")
    assert result.exit_code == 0 and "  linear: PASSED" in result.stdout and "  mean: PASSED" in result.stdout, result  # named as MODEL's outputs
    alone = run(parity_invoke, programs, "run", "cnn_script.pt", "--torch", "--torch", "--input-shapes", "x:[1,3,8,8]")
    assert alone.exit_code == 0 and "  output_0: PASSED" in alone.stdout and "  output_1: PASSED" in alone.stdout, alone
    marked = run(parity_invoke, programs, "run", "cnn_script.pt", "--torch", "--input-shapes", "x:[1,3,8,8]", "--torch-outputs", "mark", "all")
    assert "--torch-outputs needs a torch.export program (.pt2)" in one_line(marked, 2)


def test_bad_files_are_one_line(parity_invoke, programs, tmp_path):
    missing = run(parity_invoke, programs, "run", "cnn.onnx", "--onnxrt", "--torch", "--torch-model", "missing.pt2")
    assert "--torch-model file not found: missing.pt2" in one_line(missing, 2)
    (tmp_path / "garbage.pt2").write_bytes(b"not a zip archive")
    assert "not a PyTorch program" in one_line(run(parity_invoke, tmp_path, "run", "garbage.pt2", "--torch"), 3)
    (tmp_path / "cut.pt2").write_bytes((programs / "cnn.pt2").read_bytes()[:4000])  # a truncated archive
    assert "cut.pt2: not a PyTorch program" in one_line(run(parity_invoke, tmp_path, "run", "cut.pt2", "--torch"), 3)
    torch.save({"w": torch.zeros(2)}, tmp_path / "weights.pt")
    assert "a torch.save checkpoint (weights or a pickled module), not a program" in one_line(run(parity_invoke, tmp_path, "run", "weights.pt", "--torch"), 3)


def test_which_file_the_runner_takes_is_said(parity_invoke, programs):
    line = one_line(run(parity_invoke, programs, "run", "cnn.onnx", "--onnxrt", "--torch"), 2)
    assert "--torch runs a PyTorch program and cnn.onnx is an ONNX model: give the program with --torch-model" in line
    line = one_line(run(parity_invoke, programs, "run", "cnn.onnx", "--onnxrt", "--torch-model", "cnn.pt2"), 2)
    assert "--torch-model applies to a PyTorch runner (--torch)" in line


def parity_process(code: str, *args: str, cwd=None) -> subprocess.CompletedProcess:
    """``parity ARGS`` in a fresh interpreter after ``code`` ran (what the process has imported is its own)."""
    script = f"import sys\n{code}\nfrom parity.cli import main\ncode = main({list(args)!r})\nprint('torch imported:', 'torch' in sys.modules)\nsys.exit(code)\n"
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_help_does_not_import_torch():
    for args in (["--help"], ["run", "--help"]):
        proc = parity_process("", *args)
        assert proc.returncode == 0 and "torch imported: False" in proc.stdout, proc.stderr


def test_without_torch_one_line_names_the_install(programs):
    proc = parity_process("sys.modules['torch'] = None  # as if PyTorch were not installed", "run", *PAIR, cwd=programs)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 3 and lines == ["parity: error: torch is not installed; install it with: pip install torch"], proc.stderr


@pytest.mark.gpu
def test_cuda_against_the_onnx_export(parity_invoke, programs):
    """On the GPU machine: the program on CUDA, timed (the kernels synchronised), against onnxruntime."""
    result = run(parity_invoke, programs, "run", *PAIR, "--torch-device", "cuda", "--warm-up", "2", "--atol", "1e-4")
    assert result.exit_code == 0 and "torch-1: 1 iteration(s), median inference" in result.stdout, result
    half = run(parity_invoke, programs, "run", "cnn.pt2", "--torch", "--torch=device=cuda,dtype=fp16", "--atol", "1e-2", "--rtol", "1e-2")
    assert half.exit_code == 0, half
    layerwise = run(parity_invoke, programs, "run", "cnn_bad.onnx", *PAIR[1:], "--torch-device", "cuda:0", *MARK_ALL, "--atol", "1e-4")
    assert layerwise.exit_code == 1 and "origin: PyTorch module 'layer1.0.conv2' (Conv2d)" in layerwise.stdout, layerwise


@pytest.mark.gpu
def test_a_program_exported_on_the_cpu_that_fails_on_cuda_says_where_it_was_exported(parity_invoke, tmp_path):
    """torch.export keeps the traced device's layouts: nn.TransformerEncoder exported on the CPU failed a view on
    CUDA (torch 2.11, the H100 machine). The one line says where the program was exported and what to do; a torch
    that runs it gives exit 0."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    torch.export.save(torch.export.export(model, (torch.randn(2, 16, 64),)), tmp_path / "enc.pt2")
    result = run(parity_invoke, tmp_path, "run", "enc.pt2", "--torch", "--torch-device", "cuda")
    if result.exit_code != 0:
        assert result.exit_code == 3 and len(result.stderr.strip().splitlines()) == 1, result
        assert "the program was exported on cpu" in result.stderr and "export it on cuda" in result.stderr, result
