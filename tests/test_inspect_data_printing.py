"""``parity inspect data --show-values`` with ``--num-items`` and ``--line-width`` (Polygraphy's flags): how many
values each dimension shows at its ends, how wide the lines are, -1 for no limit, refused without --show-values."""

from __future__ import annotations

import numpy as np
import pytest

from parity.results import save_inputs


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "inputs.json"
    save_inputs([{"X": np.arange(2 * 24 * 24, dtype=np.float32).reshape(1, 2, 24, 24)}], path)
    return path


def _rows(out: str) -> list[list[str]]:
    """The values of each printed row of the array (the lines that hold numbers)."""
    rows = []
    for line in out.splitlines()[3:]:  # header, iteration, tensor summary
        items = [e for e in line.strip().strip("[]").split() if e != "..."]
        if items:
            rows.append(items)
    return rows


@pytest.mark.parametrize("num_items, per_row", [(1, 2), (2, 4), (12, 24), (-1, 24)])
def test_num_items_sets_the_values_shown_per_row(main, saved, num_items, per_row):
    code, out, err = main("inspect", "data", saved, "--show-values", "--line-width=-1", f"--num-items={num_items}")
    assert code == 0, err
    rows = _rows(out)
    assert rows and all(len(r) == per_row for r in rows)
    # -1 shows every row too: 2 channels of 24
    assert len(rows) == (48 if num_items in (12, -1) else 2 * 2 * num_items)


def test_default_summarizes_and_line_width_wraps(main, saved):
    code, out, _ = main("inspect", "data", saved, "--show-values")
    assert code == 0 and all(len(r) == 6 for r in _rows(out))  # 3 at each end
    code, out, _ = main("inspect", "data", saved, "--show-values", "-n", "-1", "--line-width", "40")
    assert code == 0
    assert max(len(line) for line in out.splitlines()[3:]) <= 40 + 6  # the values' indent comes on top


@pytest.mark.parametrize("args, message", [
    (["--num-items", "2"], "--num-items shapes printed values: give --show-values too"),
    (["--show-values", "--num-items", "0"], "--num-items 0: give a positive count, or -1 for no limit"),
    (["--show-values", "--line-width", "-5"], "--line-width -5: give a positive count, or -1 for no limit"),
])
def test_bad_limits_are_refused(main, saved, args, message):
    code, out, err = main("inspect", "data", saved, *args)
    assert code == 2 and out == ""
    assert err.strip() == f"parity: error: {message}"
