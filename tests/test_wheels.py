"""Every distribution is fit to publish, and Parity works installed from its wheels (issue 14).

The fast checks read the pyproject.toml files: one licence (Apache-2.0, PEP 639 metadata, the same LICENSE text
beside each), one build requirement, one range for ``parity``, a README and a ``py.typed`` for each.

The slow ones build the wheels of the core, the five first-party plugins and the two contrib packages (from
copies of their sources, so no stale ``build/`` folder leaks into them), look inside them (LICENSE, py.typed,
every source file, real trove classifiers, ``twine check``), then install them as a user of the package index
would: not editable, into a fresh ``python -m venv``, with ``pip install "parity[all]" parity-onnx-reference
parity-metrics`` resolving every dependency. Nothing is downloaded: ``--no-index --find-links`` the built wheels,
and the third-party dependencies come from the environment running these tests, whose site-packages are mirrored
(symlinks) into a folder the venv puts on its path through a ``.pth`` file, without that environment's Parity
(its distributions, its editable finders and every ``.pth`` file are left out). bench/startup.py's wheel_install
does the same with ``pip install --target``. Then Parity's main job runs from the venv's ``parity`` script in a
temporary folder, and ``parity plugins`` must list every installed plugin.
"""

from __future__ import annotations

import email
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[1]
# distribution -> (source folder, import package)
DISTRIBUTIONS = {
    "parity": (".", "parity"),
    "parity-onnxrt": ("plugins/onnxrt", "parity_onnxrt"),
    "parity-surgeon": ("plugins/surgeon", "parity_surgeon"),
    "parity-reduce": ("plugins/reduce", "parity_reduce"),
    "parity-tactics": ("plugins/tactics", "parity_tactics"),
    "parity-trt": ("plugins/trt", "parity_trt"),
    "parity-reports": ("plugins/reports", "parity_reports"),
    "parity-polygraphy": ("plugins/polygraphy", "parity_polygraphy"),
    "parity-torch": ("plugins/torch", "parity_torch"),
    "parity-onnx-reference": ("contrib/parity-onnx-reference", "parity_onnx_reference"),
    "parity-metrics": ("contrib/parity-metrics", "parity_metrics"),
}
FIRST_PARTY_PLUGINS = ["onnxrt", "surgeon", "reduce", "tactics", "trt", "reports", "polygraphy", "torch"]
PLUGINS = [name for name in DISTRIBUTIONS if name != "parity"]
LIBRARIES: set[str] = set()  # distributions for scripts only (no entry point, nothing registered): none since parity-polygraphy registers its metrics and --pluginref
TEMPLATE = "contrib/parity-plugin-template"  # a module, not a package: no py.typed; built by tests/test_contrib_template.py
PARITY_RANGE = ">=0.1,<1"  # hooks change incompatibly only across majors (docs/plugins/README.md)
BUILD_REQUIRES = ["setuptools>=77"]  # PEP 639 license metadata (license = "SPDX", license-files)
MODEL = ROOT / "examples" / "models" / "tiny_cnn.onnx"
TIMEOUT = 300


def pyproject(folder: str) -> dict:
    return tomllib.loads((ROOT / folder / "pyproject.toml").read_text())


def run(*cmd: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=cwd, env=env, timeout=TIMEOUT)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


# ---------------------------------------------------------------------------------------------- the sources


@pytest.mark.parametrize("folder", [folder for folder, _ in DISTRIBUTIONS.values()] + [TEMPLATE])
def test_pyproject_is_fit_to_publish(folder):
    data = pyproject(folder)
    project = data["project"]
    where = f"{folder}/pyproject.toml"
    assert data["build-system"]["requires"] == BUILD_REQUIRES, where
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"], where
    assert (ROOT / folder / "LICENSE").read_bytes() == (ROOT / "LICENSE").read_bytes(), f"{folder}/LICENSE differs from ./LICENSE"
    assert (ROOT / folder / project["readme"]).is_file(), where
    assert not any(c.startswith("License ::") for c in project.get("classifiers", [])), f"{where}: PEP 639 replaces License classifiers"
    requirements = [Requirement(r) for r in [*project.get("dependencies", []), *sum(project.get("optional-dependencies", {}).values(), [])]]
    for req in requirements:  # the core's extras, plugins on plugins, everything on the core: one range
        if canonicalize_name(req.name).startswith("parity"):
            assert str(req.specifier) == str(Requirement(f"x{PARITY_RANGE}").specifier), f"{where}: {req}, expected {req.name}{PARITY_RANGE}"
    if folder != ".":
        assert any(r.name == "parity" for r in requirements), where


@pytest.mark.parametrize("name", PLUGINS + ["parity"])
def test_package_has_py_typed_in_its_package_data(name):
    folder, package = DISTRIBUTIONS[name]
    source = ROOT / folder / ("core" if name == "parity" else "") / package
    assert (source / "py.typed").is_file()
    assert "py.typed" in pyproject(folder)["tool"]["setuptools"]["package-data"][package]


def test_core_extras_install_the_first_party_plugins():
    extras = pyproject(".")["project"]["optional-dependencies"]
    for name in FIRST_PARTY_PLUGINS:
        assert [Requirement(r).name for r in extras[name]] == [f"parity-{name}"], name
    assert sorted(Requirement(r).name for r in extras["all"]) == sorted(f"parity-{name}" for name in FIRST_PARTY_PLUGINS)
    # parity[all] must install anywhere: TensorRT (NVIDIA's index, GPU machines) stays an extra of parity-trt
    trt = pyproject("plugins/trt")["project"]["dependencies"]
    assert not any(canonicalize_name(Requirement(r).name).startswith(("tensorrt", "cuda")) for r in trt), trt
    # ... and PyTorch an extra of parity-torch: users bring the build of their machine (CPU, a CUDA flavour)
    torch = pyproject("plugins/torch")["project"]["dependencies"]
    assert not any(canonicalize_name(Requirement(r).name) in ("torch", "onnxscript") for r in torch), torch


# ----------------------------------------------------------------------------------------------- the wheels


def _copy_sources(folder: str, dest: Path) -> Path:
    """What the build reads, without build/, *.egg-info, caches or tests (the root: pyproject, README, LICENSE, core/)."""
    ignore = shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "tests", ".*")
    src = ROOT / folder
    if folder == ".":
        dest.mkdir(parents=True)
        for name in ("pyproject.toml", "README.md", "LICENSE"):
            shutil.copy2(src / name, dest / name)
        shutil.copytree(src / "core", dest / "core", ignore=ignore)
        return dest
    return Path(shutil.copytree(src, dest, ignore=ignore))


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("wheels")
    sources = [_copy_sources(folder, tmp / "src" / name) for name, (folder, _) in DISTRIBUTIONS.items()]
    out = tmp / "dist"
    run(sys.executable, "-m", "pip", "--isolated", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", out, *sources)
    built = {canonicalize_name(p.name.split("-")[0]): p for p in out.glob("*.whl")}
    assert sorted(built) == sorted(DISTRIBUTIONS), sorted(built)
    return built


def _metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as z:
        return email.message_from_bytes(z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(DISTRIBUTIONS))
def test_wheel_ships_license_py_typed_and_every_source_file(wheels, name):
    folder, package = DISTRIBUTIONS[name]
    with zipfile.ZipFile(wheels[name]) as z:
        names = z.namelist()
        licenses = [n for n in names if re.fullmatch(r"[^/]+\.dist-info/licenses/LICENSE", n)]
        assert licenses, f"{wheels[name].name} has no LICENSE: {names}"
        assert z.read(licenses[0]) == (ROOT / "LICENSE").read_bytes()
        assert f"{package}/py.typed" in names
        source = ROOT / folder / ("core" if name == "parity" else "")
        expected = {p.relative_to(source).as_posix() for p in (source / package).rglob("*.py") if "__pycache__" not in p.parts}
        assert expected <= set(names), f"{wheels[name].name} lacks {sorted(expected - set(names))}"


@pytest.mark.slow
@pytest.mark.parametrize("name", list(DISTRIBUTIONS))
def test_wheel_metadata(wheels, name):
    meta = _metadata(wheels[name])
    assert meta["License-Expression"] == "Apache-2.0" and meta.get_all("License-File") == ["LICENSE"]
    assert meta["Description-Content-Type"] == "text/markdown" and len(meta.get_payload()) > 200, "no long description"
    classifiers = meta.get_all("Classifier") or []
    assert classifiers
    trove = pytest.importorskip("trove_classifiers", reason="trove-classifiers is not installed (requirements-dev.txt)")
    unknown = [c for c in classifiers if c not in trove.classifiers or c in trove.deprecated_classifiers]
    assert not unknown, f"{name}: PyPI rejects these classifiers: {unknown}"


@pytest.mark.slow
def test_twine_check_passes(wheels):
    if importlib.util.find_spec("twine") is None:
        pytest.skip("twine is not installed (it is in requirements-dev.txt): cannot check the wheels' metadata as PyPI would")
    proc = run(sys.executable, "-m", "twine", "check", "--strict", *wheels.values())
    assert proc.stdout.count("PASSED") == len(wheels), proc.stdout


def _mirror_without_parity(dest: Path) -> Path:
    """This environment's site-packages as symlinks, without Parity's distributions, editable finders or .pth files."""
    dest.mkdir()
    sites = [Path(p) for p in sys.path if p.endswith(("site-packages", "dist-packages")) and Path(p).is_dir()]
    for site in sites:
        for entry in site.iterdir():
            name = entry.name
            own = re.match(r"parity([-_.]|$)", name) or name.startswith(("__editable__", "__editable___"))
            if own or name.endswith(".pth") or name == "__pycache__" or (dest / name).exists():
                continue
            (dest / name).symlink_to(entry)
    return dest


@pytest.fixture(scope="module")
def venv(wheels, tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("venv")
    base = getattr(sys, "_base_executable", sys.executable)
    run(base, "-m", "venv", "--without-pip", tmp / "venv")
    python = tmp / "venv" / "bin" / "python"
    purelib = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    (purelib / "zz_third_party.pth").write_text(f"{_mirror_without_parity(tmp / 'third_party')}\n")
    folder = wheels["parity"].parent
    # pip resolves parity[all] and the contrib packages from the wheels, their dependencies from the mirror
    run(sys.executable, "-m", "pip", "--isolated", "--python", python, "install", "-q", "--no-index", "--find-links", folder,
        "parity[all]", "parity-onnx-reference", "parity-metrics")
    return tmp / "venv"


def _env() -> dict[str, str]:
    """Nothing of the checkout: no PYTHONPATH, no plugin selection or one-off plugins from the caller."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTHONPATH", "PYTHONHOME", "PARITY_"))}


@pytest.mark.slow
def test_installed_packages_come_from_the_venv(venv, tmp_path):
    packages = [package for _, package in DISTRIBUTIONS.values()]
    code = f"import importlib, json; print(json.dumps({{p: importlib.import_module(p).__file__ for p in {packages!r}}}))"
    files = json.loads(run(venv / "bin" / "python", "-c", code, cwd=tmp_path, env=_env()).stdout)
    for package, file in files.items():
        assert Path(file).resolve().is_relative_to(venv.resolve()), f"{package} imported from {file}, not the venv"


@pytest.mark.slow
def test_main_job_runs_from_the_installed_wheels(venv, tmp_path):
    shutil.copy2(MODEL, tmp_path / MODEL.name)
    proc = run(venv / "bin" / "parity", "run", MODEL.name, "--onnxrt", "--input-shapes", "x:[4,3,16,16]", cwd=tmp_path, env=_env())
    assert "PASSED" in proc.stdout, proc.stdout + proc.stderr
    where = run(venv / "bin" / "python", "-c", "import parity; print(parity.__file__)", cwd=tmp_path, env=_env()).stdout.strip()
    assert Path(where).resolve().is_relative_to(venv.resolve()), where


@pytest.mark.slow
def test_parity_plugins_lists_the_installed_plugins(venv, tmp_path):
    rows = json.loads(run(venv / "bin" / "parity", "plugins", "--json", cwd=tmp_path, env=_env()).stdout)
    found = {row["distribution"]: row for row in rows if row["source"] == "entry-point"}
    assert sorted(found) == sorted(set(PLUGINS) - LIBRARIES), sorted(found)
    for name, row in found.items():
        assert row["status"] == "loaded" and row["version"] == "0.1.0", row
        assert row["registered"], f"{name} registered nothing"
