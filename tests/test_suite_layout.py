"""The whole suite collects: pytest's default (rootdir) import mode imports test files by basename, so two test files
with one name in different folders stop the run at collection (plugins/trt and plugins/polygraphy each had a
test_cuda.py)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_test_file_basenames_are_unique():
    seen: dict[str, list[str]] = defaultdict(list)
    for top in ("tests", "plugins", "contrib"):
        for path in (ROOT / top).rglob("test_*.py"):
            if "build" not in path.relative_to(ROOT).parts:
                seen[path.name].append(str(path.relative_to(ROOT)))
    assert not {name: paths for name, paths in seen.items() if len(paths) > 1}
