"""One size parser for every option that takes a size (--pool-limit, --memory-budget, --fold-size-threshold)."""

from __future__ import annotations

import pytest

from parity.api import UsageError, parse_size


@pytest.mark.parametrize(("text", "size"), [("16M", 16 << 20), ("1g", 1 << 30), ("1024", 1024), ("1.5GiB", 3 << 29), ("512MB", 512 << 20), (" 2 T ", 2 << 40), (7, 7)])
def test_sizes(text, size):
    assert parse_size(text, "--x") == size


def test_each_option_keeps_its_wording():
    with pytest.raises(UsageError, match=r"^--pool-limit: cannot read size 'lots'; write e.g. 16M, 1G or 1048576$"):
        parse_size("lots", "--pool-limit")
    with pytest.raises(UsageError, match=r"^--memory-budget: cannot read '1X'; write a size such as 512M$"):
        parse_size("1X", "--memory-budget", "{option}: cannot read '{text}'; write a size such as 512M")


def test_the_plugins_use_the_core_parser():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "plugins"
    for path in (root / "trt" / "parity_trt" / "options.py", root / "surgeon" / "parity_surgeon" / "localizer.py", root / "surgeon" / "parity_surgeon" / "cli.py"):
        assert "def parse_size" not in path.read_text(), path
