"""The lock (constraints.txt) covers every dependency Parity's distributions declare, and each pinned version
satisfies the declared range, so a fresh machine installs the versions the suite passed with."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[1]
GPU_ONLY = {"tensorrt", "tensorrt-cu12", "tensorrt-cu13", "cuda-python"}  # extras of parity-trt for GPU machines; the README's commands do not install them
PYPROJECTS = [ROOT / "pyproject.toml", *sorted(ROOT.glob("plugins/*/pyproject.toml")), *sorted(ROOT.glob("contrib/parity-*/pyproject.toml"))]


def lock() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version
    return pins


def declared() -> list[tuple[Path, Requirement]]:
    out = []
    for path in PYPROJECTS:
        project = tomllib.loads(path.read_text())["project"]
        groups = [project.get("dependencies", []), *project.get("optional-dependencies", {}).values()]
        out += [(path, Requirement(r)) for group in groups for r in group]
    for name in ("requirements.txt", "requirements-dev.txt"):
        for line in (ROOT / name).read_text().splitlines():
            line = line.split("#")[0].strip()
            if line and not line.startswith("-"):
                out.append((ROOT / name, Requirement(line)))
    return out


def test_every_third_party_dependency_is_pinned_within_its_declared_range():
    pins = lock()
    for path, req in declared():
        name = canonicalize_name(req.name)
        if name.startswith("parity") or name in GPU_ONLY:
            continue
        assert name in pins, f"{path.relative_to(ROOT)}: {req} is not in constraints.txt"
        assert req.specifier.contains(pins[name], prereleases=True), f"{path.relative_to(ROOT)}: lock pins {name}=={pins[name]}, outside {req}"


def test_requirements_install_through_the_lock():
    assert "-c constraints.txt" in (ROOT / "requirements.txt").read_text().splitlines()
    assert "-r requirements.txt" in (ROOT / "requirements-dev.txt").read_text().splitlines()


def test_declared_floors_are_the_measured_ones():
    # onnx 1.15 / onnxruntime 1.17 fail the quick start; 1.16 / 1.18 were measured as the real floor
    for path, req in declared():
        floor = {"onnx": "1.16", "onnxruntime": "1.18"}.get(canonicalize_name(req.name))
        if floor:
            assert f">={floor}" in str(req.specifier), f"{path.relative_to(ROOT)}: {req} should declare >={floor}"


def test_tensorrt_extras_pin_cuda_python_to_the_wheels_cuda_major():
    extras = tomllib.loads((ROOT / "plugins" / "trt" / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for name, reqs in extras.items():
        parsed = {canonicalize_name(Requirement(r).name): Requirement(r) for r in reqs}
        wheels = [n for n in parsed if n.startswith("tensorrt")]
        if not wheels:
            continue
        assert len(wheels) == 1 and wheels[0] in ("tensorrt-cu12", "tensorrt-cu13"), f"{name}: name the CUDA flavour, not {wheels}"
        major = int(wheels[0][-2:])
        cuda = parsed["cuda-python"].specifier
        assert cuda.contains(f"{major}.0") and not cuda.contains(f"{major + 1}.0") and not cuda.contains(f"{major - 1}.9"), f"{name}: {cuda}"
