"""TensorRT API conformance of the plugin against the 10.x/11.x name manifests (runs without TensorRT)."""

from __future__ import annotations

import pytest
from parity_trt import conformance
from parity_trt.versions import GATES, Gate
from trt_model.manifest import MANIFESTS as API_DIR


@pytest.fixture(scope="module")
def manifest() -> conformance.Manifest:
    if not (API_DIR / "tensorrt-api-matrix.tsv").is_file():
        pytest.skip(f"TensorRT API manifests not found at {API_DIR} (set PARITY_TRT_API_DIR)")
    return conformance.Manifest.load(API_DIR)


def test_manifests_cover_10_and_11(manifest):
    majors = {v.split(".")[0] for v in manifest.versions}
    assert {"10", "11"} <= majors


def test_plugin_uses_only_existing_or_gated_names(manifest):
    uses = conformance.collect_paths(conformance.plugin_sources())
    names = {u.name for u in uses}
    # the walk really sees the API the runner and builder depend on
    for expected in (
        "IExecutionContext.execute_async_v3",
        "IExecutionContext.set_input_shape",
        "IExecutionContext.set_tensor_address",
        "IExecutionContext.set_output_allocator",
        "IExecutionContext.set_debug_listener",
        "IBuilderConfig.set_memory_pool_limit",
        "IBuilderConfig.progress_monitor",
        "OnnxParser.parse_from_file",
        "ParserError.node_name",
        "IOutputAllocator.reallocate_output_async",
        "IDebugListener.process_debug_tensor",
        "IProgressMonitor.step_complete",
        "BuilderFlag.FP16",
        "INetworkDefinition.mark_unfused_tensors_as_debug_tensors",
        "ICudaEngine.create_engine_inspector",
    ):
        assert expected in names, expected
    assert conformance.check(uses, manifest) == []


def test_every_gate_matches_the_manifests(manifest):
    assert conformance.check([], manifest, GATES) == []
    assert GATES["BuilderFlag.FP16"].contains("10.16.1.11") and not GATES["BuilderFlag.FP16"].contains("11.0.0.114")


def _problems(source: str, manifest, gates=GATES) -> list[str]:
    return conformance.check(conformance.collect_source(source, "snippet.py"), manifest, gates)


def test_misspelled_and_invented_names_fail(manifest):
    source = """
import tensorrt as trt
def build(builder, network):
    config = builder.create_builder_config()
    config.set_flag(trt.BuilderFlag.FP17)
    config.set_memroy_pool_limit(trt.MemoryPoolType.WORKSPACE, 1)
    engine = builder.build_engine(network, config)
"""
    problems = _problems(source, manifest)
    assert any("BuilderFlag.FP17" in p for p in problems)
    assert any("IBuilderConfig.set_memroy_pool_limit" in p for p in problems)
    assert any("Builder.build_engine " in p for p in problems)  # removed before 10.0
    assert all("snippet.py:" in p for p in problems)


def test_name_missing_in_one_line_needs_a_gate(manifest):
    source = "import tensorrt as trt\nflag = trt.BuilderFlag.FP16\nsel = trt.IAlgorithmSelector\n"
    problems = _problems(source, manifest, gates={})
    assert any("BuilderFlag.FP16 is missing in TensorRT 11.0.0.114" in p for p in problems)
    assert any("IAlgorithmSelector" in p for p in problems)
    assert not any("BuilderFlag.FP16" in p for p in _problems("import tensorrt as trt\ntrt.BuilderFlag.FP16\n", manifest))


def test_wrong_gate_is_reported(manifest):
    problems = conformance.check([], manifest, {"BuilderFlag.FP16": Gate(since="11.0")})
    assert problems and "BuilderFlag.FP16" in problems[0]


def test_keywords_are_checked(manifest):
    assert _problems("def f(builder):\n    builder.create_network(flags=0)\n", manifest) == []
    problems = _problems("def f(builder):\n    builder.create_network(flag=0)\n", manifest)
    assert problems and "no argument 'flag'" in problems[0]


def test_string_names_and_interface_overrides_are_checked(manifest):
    source = """
import tensorrt as trt
from parity_trt.versions import require
require(trt, "BuilderFlag.FP32", "x")
class Alloc(trt.IOutputAllocator):
    def reallocate_output_async(self, tensor_name, memory, size, alignment, stream): ...
    def reallocate_outputs(self): ...
"""
    problems = _problems(source, manifest)
    assert any("BuilderFlag.FP32" in p for p in problems)
    assert any("IOutputAllocator.reallocate_outputs" in p for p in problems)
    assert not any("reallocate_output_async" in p for p in problems)
