"""docs/python-api.md is the Python API's reference (issue 15): every name each first-party package exports has a
row in its package's table, and every row names something that exists."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "python-api.md"
PACKAGES = ["parity", "parity_onnxrt", "parity_trt", "parity_surgeon", "parity_reduce", "parity_tactics", "parity_torch"]


def rows(package: str) -> set[str]:
    """The names in the first column of the ``### `package` `` table."""
    text = DOC.read_text(encoding="utf-8")
    section = re.search(rf"^### `{package}`\n(.*?)(?=^#|\Z)", text, re.S | re.M)
    assert section, f"docs/python-api.md has no section for {package}"
    return set(re.findall(r"^\| `([A-Za-z_][A-Za-z_0-9]*)` \|", section.group(1), re.M))


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exported_name_has_a_row_and_every_row_exists(package):
    module = pytest.importorskip(package)
    exported = {name for name in module.__all__ if not name.startswith("__")}
    documented = rows(package)
    assert not exported - documented, f"{package} exports names docs/python-api.md does not list: {sorted(exported - documented)}"
    assert not documented - exported, f"docs/python-api.md lists names {package} does not export: {sorted(documented - exported)}"
    for name in documented:
        assert getattr(importlib.import_module(package), name) is not None
