"""The plugin docs cannot drift from the code: every hook signature, control and contrib option is
documented, and the tutorial's plugin, copied out of the page, works."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "plugins"
TINY_CNN = ROOT / "examples" / "models" / "tiny_cnn.onnx"


def text(name: str) -> str:
    return (DOCS / name).read_text()


def test_every_hook_signature_is_documented():
    from parity.plugins import hook_signatures

    reference = text("hooks.md")
    headings = re.findall(r"^## (\w+)$", reference, re.M)
    for name, signature in hook_signatures().items():
        assert signature in reference, f"docs/plugins/hooks.md lacks the signature {signature}"
        assert name in headings, f"docs/plugins/hooks.md has no '## {name}' section"
    assert [h for h in headings if h.startswith("parity_")] == list(hook_signatures()), "one section per hook, in hookspecs order"


def test_every_loading_control_is_documented():
    import parity.plugins

    controls = set(re.findall(r"PARITY_[A-Z_]+", parity.plugins.__doc__ + Path(parity.plugins.__file__).read_text()))
    docs = text("README.md") + text("troubleshooting.md")
    assert controls and not [c for c in sorted(controls) if c not in docs]


def test_contrib_metrics_and_options_are_documented():
    from parity.plugins import get_registry

    registry = get_registry()
    readme = text("README.md")
    ours = [spec for (kind, name), owner in registry.owners.items() if owner == "parity-metrics" for spec in [registry.comparators[name]]]
    assert ours, "pip install -e contrib/parity-metrics"
    for spec in ours:
        assert f"`{spec.name}`" in readme
        for option in spec.options:
            assert f"`{option.opts[0]}`" in readme


def tutorial_module(tmp_path: Path) -> Path:
    block = re.search(r"Replace `parity_maxrel.py` with:\n\n```python\n(.*?)```", text("tutorial.md"), re.S)
    assert block, "the tutorial's plugin module moved: update this test"
    path = tmp_path / "parity_maxrel.py"
    path.write_text(block.group(1))
    return path


@pytest.mark.parametrize(("limit", "code"), [("1e-4", 0), ("1e-12", 1), ("-1", 2)])
def test_tutorial_plugin_works_as_written(tmp_path, limit, code):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARITY_")}
    module = tutorial_module(tmp_path)
    args = ["--plugin", module, "run", TINY_CNN, "--onnxrt", "--onnx-ref", "--input-shapes", "x:[4,3,16,16]", "--compare-func", "maxrel", "--maxrel-max", limit]
    proc = subprocess.run([sys.executable, "-m", "parity", *map(str, args)], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == code, proc.stdout + proc.stderr
    if code < 2:
        assert "probs: " + ("PASSED" if code == 0 else "FAILED") + " | maxrel max_rel=" in proc.stdout
    else:
        assert proc.stderr.strip() == "parity: error: --compare-func maxrel: --maxrel-max must be >= 0, got -1.0"


def test_tutorial_python_api_snippet(tmp_path):
    import importlib.util

    import numpy as np

    from parity import Comparator, IterationResult, RunResults, plugins

    module = tutorial_module(tmp_path)
    plugins.add_plugin_files([str(module)])
    spec = importlib.util.spec_from_file_location("parity_maxrel", module)
    maxrel = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(maxrel)
    x = np.linspace(1, 2, 8, dtype=np.float32)
    results = RunResults([("a", [IterationResult({"y": x * 1.0001})]), ("b", [IterationResult({"y": x})])])
    assert Comparator.compare_accuracy(results, compare_func="maxrel")  # default 1e-3
    assert not Comparator.compare_accuracy(results, compare_func=maxrel.make_compare({"maxrel_max": 1e-5}))
