"""mypy over parity_trt and parity_tactics against typed stubs of each TensorRT version in ``shared/trt-api/``.

The stubs (tests/stubs/generate.py) are a model of TensorRT's Python API built from the name manifests, not TensorRT.
They catch, per version: calls with the wrong arity or keyword names, attributes and enum members the version lacks,
a property called like a method or a method read as a value, assignments to read-only properties, and a missing
``None`` check on the returns the binding sources document as Optional (generate.OPTIONAL_RETURNS).

How the check is made honest without requiring Parity to be fully typed:

- Parity reaches TensorRT through ``trt = import_trt()`` (typed ``ModuleType``, so everything is ``Any``) and passes
  TensorRT objects as ``Any`` parameters. The test type-checks a rewritten COPY of the two packages (line numbers
  preserved): ``X = import_trt()`` becomes ``import tensorrt as X``; a function parameter named ``trt`` is renamed so
  the body sees a module-level ``import tensorrt as trt`` (appended at the end of the file); and parameters annotated
  ``Any`` or not at all whose names always mean one TensorRT type in these packages (``PARAM_TYPES``) are annotated
  with it. Nothing in the repository is changed.
- mypy runs with ``--check-untyped-defs --follow-imports=silent`` twice per version's stubs: once against a
  permissive ``tensorrt`` stub where every name is ``Any`` (the baseline: Parity's own typing gaps), and once
  against the version's stubs. Only errors that appear with the version's stubs and not in the baseline are
  failures, so every reported error is caused by what the version's TensorRT API declares.
- Version-guarded code (``versions.has``/``require``/``lookup`` or a ``major(trt)`` check) may name things a
  version lacks: such errors must be listed in ``ALLOWED`` with the reason; an entry that matches nothing in any
  version fails too, so the list cannot go stale.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from trt_model.manifest import MANIFESTS as API_DIR
from trt_model.manifest import versions as manifest_versions

pytest.importorskip("mypy")

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
VERSIONS = manifest_versions()
PACKAGES = {"parity_trt": REPO / "plugins/trt/parity_trt", "parity_tactics": REPO / "plugins/tactics/parity_tactics"}

sys.path.insert(0, str(HERE / "stubs"))
from generate import generate  # noqa: E402

# Parameter names that, in these two packages, always hold one TensorRT type (only applied where the parameter is
# annotated Any or not annotated).
PARAM_TYPES = {
    "builder": "Builder",
    "network": "INetworkDefinition",
    "config": "IBuilderConfig",
    "engine": "ICudaEngine",
    "context": "IExecutionContext",
    "profile": "IOptimizationProfile",
    "inspector": "EngineInspector",
    "parser": "OnnxParser",
}
# files where a PARAM_TYPES name means something else (None: all of them)
PARAM_TYPES_SKIP: dict[str, set[str] | None] = {
    "options.py": None,
    "cli.py": None,
    "hooks.py": None,
    "factory.py": None,
    "script.py": None,
    "conformance.py": None,
    "trt_tactics.py": {"context"},  # an IAlgorithmContext there
}

# (file, substring of mypy's message) -> why the error is allowed on the versions listed. Only for code that runs
# behind a version check.
_BEFORE_10_8 = ("10.0.1", "10.7.0")
_V11 = ("11.0.0.114", "11.4.0.106")
_CACHE_LINE = "runs only on the timing-cache mechanism: resolve_mechanism picks it only where every CACHE_PROBES name exists (trt_tactics.LINE_OF)"
_SELECTOR_LINE = "runs only on the algorithm-selector mechanism: resolve_mechanism picks it only where IAlgorithmSelector exists (trt_tactics.LINE_OF)"
_CALIB = (
    "self.calibrator is set only by Calibrator(), which versions.require()s IInt8EntropyCalibrator2; "
    "_precision requires IBuilderConfig.int8_calibrator before _profiles runs"
)
ALLOWED: dict[tuple[str, str], tuple[tuple[str, ...], str]] = {
    ("parity_tactics/trt_tactics.py", '"EDITABLE_TIMING_CACHE"'): (_BEFORE_10_8, _CACHE_LINE),
    ("parity_tactics/trt_tactics.py", '"TimingCacheKey"'): (_BEFORE_10_8, _CACHE_LINE),
    ("parity_tactics/trt_tactics.py", '"TimingCacheValue"'): (_BEFORE_10_8, _CACHE_LINE),
    ("parity_tactics/trt_tactics.py", "IAlgorithmSelector"): (_V11, _SELECTOR_LINE),
    ("parity_tactics/trt_tactics.py", '"algorithm_selector"'): (_V11, _SELECTOR_LINE),
    ("parity_trt/inspect.py", '"device_memory_size_v2"'): (("10.0.1",), "device_memory() reads it only if versions.has(trt, 'ICudaEngine.device_memory_size_v2')"),
    ("parity_trt/inspect.py", 'has no attribute "device_memory_size"'): (
        _V11,
        "device_memory()'s fallback, reached only when device_memory_size_v2 is absent (before 10.7)",
    ),
    ("parity_trt/network.py", '"mark_unfused_tensors_as_debug_tensors"'): (
        ("10.0.1", "10.7.0", "10.8.0.43"),
        "called right after versions.require(trt, 'INetworkDefinition.mark_unfused_tensors_as_debug_tensors', ...)",
    ),
    ("parity_trt/runner.py", '"unfused_tensors_debug_state"'): (
        ("10.0.1", "10.7.0", "10.8.0.43"),
        "TrtRunner._prepare sets it only if versions.has(trt, 'IExecutionContext.unfused_tensors_debug_state')",
    ),
    ("parity_trt/calibrator.py", "IInt8LegacyCalibrator"): (_V11, "Calibrator() versions.require()s IInt8EntropyCalibrator2 and its base class first"),
    ("parity_trt/config.py", '"set_quantization_flag"'): (_V11, "after versions.require(trt, 'QuantizationFlag', '--quantization-flags')"),
    ("parity_trt/config.py", '"clear_quantization_flag"'): (_V11, "after versions.require(trt, 'QuantizationFlag', '--quantization-flags')"),
    ("parity_trt/network.py", '"precision"'): (_V11, "set_layer_precisions versions.require()s ILayer.precision first"),
    ("parity_trt/network.py", '"ATTENTION_INPUT"'): (_BEFORE_10_8 + ("10.8.0.43",), "after versions.require(trt, 'IAttention.decomposable', ...)"),
    ("parity_trt/network.py", '"IAttentionInputLayer"'): (_BEFORE_10_8 + ("10.8.0.43",), "after versions.require(trt, 'IAttention.decomposable', ...)"),
    ("parity_trt/runner.py", '"set_device_memory"'): (("10.0.1",), "after versions.require(trt, 'IExecutionContext.set_device_memory', ...)"),
    ("parity_trt/config.py", '"int8_calibrator"'): (_V11, "after versions.require(trt, 'IBuilderConfig.int8_calibrator', ...)"),
    ("parity_trt/config.py", '"set_calibration_profile"'): (_V11, _CALIB),
}

MYPY_FLAGS = [
    "--check-untyped-defs",
    "--follow-imports=silent",
    "--ignore-missing-imports",
    "--no-error-summary",
    "--show-error-codes",
    "--no-color-output",
    "--hide-error-context",
    "--python-version=3.11",
]

# Third-party packages mypy need not read: names from them are Any. Following imports silently, mypy otherwise parses
# 2,900 modules for the baseline (1,400 of PyTorch, reached through optional imports), 15 of the file's 30 s; without
# them 550, and every version reports the same errors (checked when this list was made).
SKIPPED_PACKAGES = (
    "torch", "IPython", "prompt_toolkit", "matplotlib", "onnxscript", "onnx_ir", "PIL", "markdown_it", "jedi", "sympy",
    "ray", "filelock", "wcwidth", "pygments", "networkx", "jinja2", "fsspec",
)  # fmt: skip

_ASSIGN = re.compile(r"^(\s*)(\w+) = import_trt\(\)\s*$")
_DEF = re.compile(r"^(\s*)(async\s+)?def \w+\(")


def _rewrite(text: str, skip: set[str]) -> str:
    lines = text.splitlines()
    uses_param = False
    out = []
    for line in lines:
        m = _ASSIGN.match(line)
        if m:
            line = f"{m.group(1)}import tensorrt as {m.group(2)}"
        elif _DEF.match(line):
            new = re.sub(r"\btrt(\s*:\s*(ModuleType|Any))?(?=\s*[,)=])", "_trt_module: Any", line)
            uses_param |= new != line
            line = new
            for name, cls in PARAM_TYPES.items():
                if name not in skip:
                    line = re.sub(rf"\b{name}(\s*:\s*Any)?(?=\s*[,)])", f"{name}: tensorrt.{cls}", line)
        out.append(line)
    tail = ["import tensorrt", "from typing import Any"]
    if uses_param:
        tail.append("import tensorrt as trt")
    return "\n".join(out + tail) + "\n"


def _copy_rewritten(dest: Path) -> None:
    for pkg, src in PACKAGES.items():
        for path in src.rglob("*.py"):
            target = dest / pkg / path.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            text = path.read_text()
            if path.name not in ("_trt.py", "versions.py"):
                skip = PARAM_TYPES_SKIP.get(path.name, set())
                text = _rewrite(text, set(PARAM_TYPES) if skip is None else skip)
            target.write_text(text)


def _permissive_stub(dest: Path) -> Path:
    (dest / "tensorrt").mkdir(parents=True)
    (dest / "tensorrt" / "__init__.pyi").write_text("from typing import Any\ndef __getattr__(name: str) -> Any: ...\n")
    return dest


def _config(dest: Path) -> Path:
    """A mypy config that skips :data:`SKIPPED_PACKAGES` (its own file: mypy would also read one in a parent folder)."""
    path = dest / "mypy.ini"
    path.write_text("[mypy]\n[mypy-" + ",".join(f"{name}.*" for name in SKIPPED_PACKAGES) + "]\nfollow_imports = skip\n")
    return path


def _mypy(src: Path, stubs: Path, cache: Path) -> set[str]:
    env = {**os.environ, "MYPYPATH": os.pathsep.join([str(stubs), str(src)])}
    config = ["--config-file", str(_config(cache.parent))]
    cmd = [sys.executable, "-m", "mypy", *MYPY_FLAGS, *config, "--cache-dir", str(cache), "-p", "parity_trt", "-p", "parity_tactics"]
    proc = subprocess.run(cmd, cwd=src, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    errors = set()
    for line in proc.stdout.splitlines():
        if ": error:" in line and line.startswith(("parity_trt", "parity_tactics")):
            errors.add(line)
    return errors


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, list[str]]:
    if not API_DIR.is_dir():
        pytest.skip(f"no TensorRT API manifests at {API_DIR}")
    root = tmp_path_factory.mktemp("typed")
    src = root / "src"
    _copy_rewritten(src)
    cache = root / "cache"
    baseline = _mypy(src, _permissive_stub(root / "any"), cache)
    out = {}
    for version in VERSIONS:
        stubs = generate(version, API_DIR, root / version)
        out[version] = sorted(_mypy(src, stubs, cache) - baseline)
    return out


def _allowed(version: str, error: str) -> bool:
    path = error.split(":", 1)[0]
    return any(path == f and msg in error and version in vs for (f, msg), (vs, _) in ALLOWED.items())


@pytest.mark.parametrize("version", VERSIONS)
def test_trt_calls_type_check_against_version(results, version):
    unexpected = [e for e in results[version] if not _allowed(version, e)]
    assert not unexpected, f"TensorRT {version}:\n" + "\n".join(unexpected)


def test_allowlist_entries_are_used(results):
    used = defaultdict(set)
    for version, errors in results.items():
        for (f, msg), (versions, _) in ALLOWED.items():
            if version in versions and any(e.split(":", 1)[0] == f and msg in e for e in errors):
                used[(f, msg)].add(version)
    stale = {k: sorted(set(v[0]) - used[k]) for k, v in ALLOWED.items() if set(v[0]) - used[k]}
    assert not stale, f"ALLOWED entries that no longer match on these versions: {stale}"


def test_stubs_catch_what_they_promise(tmp_path):
    """The stubs are strict where the manifests are: a probe file with one known misuse per line."""
    if not API_DIR.is_dir():
        pytest.skip(f"no TensorRT API manifests at {API_DIR}")
    stubs = generate("10.16.1.11", API_DIR, tmp_path / "stubs")
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import tensorrt as trt\n"
        "b = trt.Builder(trt.Logger())\n"
        "b.create_network(0, 1)\n"  # 3: arity
        "b.platform_has_tf32()\n"  # 4: property called
        "b.num_DLA_cores = 2\n"  # 5: read-only property
        "c = b.create_builder_config()\n"
        "c.get_timing_cache().serialize()\n"  # 7: Optional return
        "trt.BuilderFlag.NOPE\n"  # 8: no such enum member
        "n = b.create_network\n"
        "n.num_layers\n"  # 10: method read as a value
    )
    env = {**os.environ, "MYPYPATH": str(stubs)}
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", *MYPY_FLAGS, "--cache-dir", str(tmp_path / "cache"), str(probe)],
        env=env, capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    lines = {int(m.group(1)) for m in re.finditer(r"probe\.py:(\d+): error", proc.stdout)}
    assert lines == {3, 4, 5, 7, 8, 10}, proc.stdout
