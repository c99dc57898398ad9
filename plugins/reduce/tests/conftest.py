from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _workdir(tmp_path, monkeypatch):
    """Every test runs in its own directory (debug commands write parity_debug.onnx and state files there).
    The tests run ``parity`` through parity.testing's ``invoke``, which restores the CLI's settings after each call."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    yield tmp_path
    os.environ.pop("PARITY_DEBUG_ITERATION", None)


# A planted-fault check that starts fast (no onnx import): exit 1 iff every node named in argv[2:] is in the
# model argv[1]; a node's name is protobuf field 3 of NodeProto.
FAST_CHECK = """import sys
data = open(sys.argv[1], 'rb').read()
sys.exit(1 if all(b'\\x1a' + bytes([len(n)]) + n.encode() in data for n in sys.argv[2:]) else 0)
"""


@pytest.fixture()
def files(tmp_path):
    """The working directory holding a 60-node chain (chain.onnx) and the fast check (check.py)."""
    import onnx
    from parity_reduce.testing import chain

    onnx.save(chain(60), str(tmp_path / "chain.onnx"))
    (tmp_path / "check.py").write_text(FAST_CHECK)
    return tmp_path
