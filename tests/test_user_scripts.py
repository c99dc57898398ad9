"""Users' ``file.py[:function]`` scripts: one loader (parity.util.scripts) for every option that takes one."""

from __future__ import annotations

import sys

import pytest

from parity.api import load_user_function, split_script_spec
from parity.errors import BackendError, ExitCode, UsageError


def test_script_specs():
    assert split_script_spec("net.py", "load_network", "--x") == ("net.py", "load_network")
    assert split_script_spec("net.py:make", "load_network", "--x") == ("net.py", "make")
    assert split_script_spec("../api/example.py:calib_data", "load_data", "--x") == ("../api/example.py", "calib_data")
    assert split_script_spec("C:\\dir\\net.py", "f", "--x") == ("C:\\dir\\net.py", "f")
    with pytest.raises(UsageError, match="write file.py"):
        split_script_spec(":f", "g", "--x")


def test_loads_the_named_function_and_its_neighbour_modules(tmp_path):
    (tmp_path / "helper_mod_for_scripts.py").write_text("VALUE = 7\n")
    (tmp_path / "s.py").write_text("from helper_mod_for_scripts import VALUE\ndef make():\n    return VALUE\n")
    path_before = list(sys.path)
    assert load_user_function(f"{tmp_path / 's.py'}:make", "other", "--x")() == 7
    assert sys.path == path_before


def test_failures_are_one_line_usage_errors_naming_the_option_and_file(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(UsageError, match=r"--x: .*bad.py failed to import: RuntimeError: boom"):
        load_user_function(str(bad), "f", "--x")
    ok = tmp_path / "ok.py"
    ok.write_text("def load_data():\n    pass\n")
    with pytest.raises(UsageError, match="has no function 'load_dta'.*load_data"):
        load_user_function(f"{ok}:load_dta", "f", "--x")
    with pytest.raises(UsageError, match="no such file"):
        load_user_function(str(tmp_path / "missing.py"), "f", "--x")


def test_a_missing_backend_library_is_that_backends_error_not_a_bad_script(tmp_path):
    """A script written for a backend whose library is absent (TensorRT here) says that library is missing,
    exit 3, as the backend would; any other missing module is the script's problem, exit 2."""
    script = tmp_path / "net.py"
    script.write_text("import parity_no_such_backend_lib.sub as lib\ndef load_network():\n    pass\n")
    with pytest.raises(BackendError) as info:
        load_user_function(str(script), "load_network", "--x", missing={"parity_no_such_backend_lib": "pip install it"})
    assert str(info.value) == "parity_no_such_backend_lib is not installed; install it with: pip install it"
    assert info.value.exit_code == ExitCode.FAILURE
    with pytest.raises(UsageError, match="No module named 'parity_no_such_backend_lib'"):
        load_user_function(str(script), "load_network", "--x")


def test_the_data_loader_script_and_the_trt_network_script_share_it(tmp_path, parity_invoke):
    """Through the CLI: a TensorRT network script on a machine without TensorRT gets TensorRT's line (exit 3)."""
    pytest.importorskip("parity_trt")
    if "tensorrt" in sys.modules or __import__("importlib.util").util.find_spec("tensorrt"):
        pytest.skip("TensorRT is installed here")
    script = tmp_path / "example.py"
    script.write_text("import tensorrt as trt\ndef load_network():\n    pass\n")
    result = parity_invoke("inspect", "model", script, "--trt-network-func", "load_network")
    assert result.exit_code == 3, result.stderr
    assert result.stdout == "" and result.stderr.strip().splitlines() == [
        "parity: error: tensorrt is not installed; install it with: pip install 'parity-trt[tensorrt]' "
        "(or pip install tensorrt; needs an NVIDIA GPU and driver)"
    ]
