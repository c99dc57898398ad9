"""The HTML report's charts where it fails (issue 26), read in headless Chromium as drawn: the tolerance line inside
the plot area whatever the largest error (1e38 where the reference is near zero), errors far beyond it in a
labelled band, the first-divergence marker at the position the table gives, tick labels clear of the axis titles,
the page's width used, and the search history on a log scale (tests/browser.py's ``geometry``)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from browser import geometry
from parity_reports.html_report import render_html

RTOL, ATOL = 1e-3, 1e-3
# positions with gaps (constants and inputs are not compared): the chart's x index and the table's # differ unless
# both use the position
POSITIONS = [3, 5, 8, 13, 21, 34, 55]
MAX_REL = [1e-4, 2e-4, 0.5, 1e38, math.inf, 3.0, 5e-4]
MAX_ABS = [1e-5, 2e-5, 0.2, 4.0, math.inf, 0.3, 1e-6]


def layerwise_page(tmp_path: Path, long_names: bool = False) -> Path:
    tensors = []
    for k, (position, rel, ab) in enumerate(zip(POSITIONS, MAX_REL, MAX_ABS)):
        name = f"/backbone/stage{k}/block/conv_{'x' * 80 if long_names else ''}/Conv_output_0"
        passed = rel <= RTOL or ab <= ATOL
        tensors.append({"name": name, "position": position, "passed": passed, "max_abs": ab, "max_rel": rel, "node": f"conv{k}", "op_type": "Conv",
                        "message": "" if passed else "out of tolerance", "atol": ATOL, "rtol": RTOL})  # fmt: skip
    first = tensors[2]["name"]
    section = {"actual": "fp16", "reference": "fp32", "iteration": 0, "first": first, "tensors": tensors, "samples": {}}
    page = tmp_path / "report.html"
    page.write_text(render_html({"title": "parity run", "passed": False, "layerwise": [section]}))
    return page


def chart(found: dict[str, Any], label: str) -> dict[str, Any]:
    (only,) = [c for c in found["charts"] if c["label"] == label]
    return only


def inside(inner: dict[str, float], outer: dict[str, float], margin: float = 0.5) -> bool:
    return (
        inner["x"] >= outer["x"] - margin and inner["y"] >= outer["y"] - margin
        and inner["x"] + inner["w"] <= outer["x"] + outer["w"] + margin and inner["y"] + inner["h"] <= outer["y"] + outer["h"] + margin
    )  # fmt: skip


def overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"] and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]


def x_to_position(c: dict[str, Any], x: float) -> float:
    """The position a screen x reads as on the chart's own x axis (its numeric tick labels under the plot)."""
    bottom = c["plot"]["y"] + c["plot"]["h"]
    ticks = sorted((float(t["text"]), t["box"]["x"] + t["box"]["w"] / 2) for t in c["ticks"] if t["box"]["y"] > bottom and t["text"].isdigit())
    (p1, x1), (p2, x2) = ticks[0], ticks[-1]
    return p1 + (x - x1) * (p2 - p1) / (x2 - x1)


def test_tolerance_line_stays_in_the_plot_and_huge_errors_are_beyond(chromium, tmp_path):
    found = geometry(chromium, layerwise_page(tmp_path))
    rel = chart(found, "max relative error")
    plot = rel["plot"]
    (tol,) = rel["tol"]
    assert inside(tol, plot)
    # not squashed into the band of zeros: the rtol line sits well above the x axis and below the top band
    assert plot["y"] + 25 < tol["y"] < plot["y"] + plot["h"] - 25, (tol, plot)
    ticks = {t["text"]: t["box"]["y"] + t["box"]["h"] / 2 for t in rel["ticks"]}
    assert "1e-3" in ticks and abs(ticks["1e-3"] - tol["y"]) < 6  # the line is drawn at 1e-3 on the axis's own labels
    beyond = [t for t in ticks if t.startswith(">1e")]
    assert beyond and int(beyond[0][3:]) <= 4  # 1e38 is not on the scale: the scale ends 6 decades above rtol
    assert any(label["text"].startswith("beyond 1e") for label in rel["labels"])
    top = min(p["y"] for p in rel["points"])
    assert abs(top - ticks[beyond[0]]) < 3  # 1e38 and inf sit in that band
    dots = sorted(p["y"] for p in rel["points"])
    assert dots[-1] - dots[0] > 0.5 * plot["h"]  # and the other points spread over the plot


def test_first_divergence_marker_is_at_the_tables_position(chromium, tmp_path):
    found = geometry(chromium, layerwise_page(tmp_path))
    position = int(found["first_row"][0])  # the table's '#' column
    assert position == POSITIONS[2]
    for label in ("max |error| (absolute)", "max relative error"):
        c = chart(found, label)
        (marker,) = [p for p in c["points"] if "first" in p["cls"]]
        assert abs(x_to_position(c, marker["x"]) - position) < 0.5, (label, marker)
        # every point reads as its own position on the axis, not its index in the list
        for p in c["points"]:
            assert abs(x_to_position(c, p["x"]) - int(p["position"])) < 0.5
        assert any(f"#{position} " in t["text"] for t in c["labels"] if "first-label" in t["cls"])


def test_labels_never_overlap_and_charts_use_the_page_width(chromium, tmp_path):
    found = geometry(chromium, layerwise_page(tmp_path, long_names=True), width=1400)
    content = found["main"]["w"] - 48  # main's padding: 24 px a side
    for c in found["charts"]:
        plot = c["plot"]
        assert c["box"]["w"] >= 0.97 * content, (c["label"], c["box"], content)
        labels = [t["box"] for t in c["labels"]]
        for tick in c["ticks"]:
            assert not any(overlap(tick["box"], b) for b in labels), (c["label"], tick)
            if tick["box"]["y"] < plot["y"] + plot["h"]:  # a y tick: left of the plot, inside the chart
                assert tick["box"]["x"] + tick["box"]["w"] <= plot["x"] and tick["box"]["x"] >= c["box"]["x"], (c["label"], tick)
        for a in range(len(labels)):  # titles, legends and the first-divergence label: apart, inside the chart
            assert inside(labels[a], c["box"]), (c["label"], c["labels"][a])
            for b in range(a + 1, len(labels)):
                assert not overlap(labels[a], labels[b]), (c["labels"][a], c["labels"][b])


def test_search_history_is_on_a_log_scale(chromium, tmp_path):
    """A reduce halves its candidate: on a linear scale the last checks (sizes 4, 2, 1) sat flat at the bottom."""
    sizes = [1000, 500, 250, 125, 62, 31, 16, 8, 4, 2, 1]
    checks = [{"check": 0, "size": 0, "verdict": "bad", "label": "no node"}]  # the empty candidate, checked first
    checks += [{"check": k, "size": s, "verdict": "good" if k % 2 else "bad", "label": f"{s} nodes"} for k, s in enumerate(sizes, 1)]
    page = tmp_path / "reduce.html"
    page.write_text(render_html({"title": "debug reduce", "passed": True, "search": {"what": "nodes kept", "total": 1000, "result": 1, "checks": checks}}))
    found = geometry(chromium, page)
    (history,) = [c for c in found["charts"] if "history" in c["cls"]]
    ys = {int(p["size"]): p["y"] for p in history["points"]}
    assert len(ys) == len(sizes) + 1
    gaps = [ys[b] - ys[a] for a, b in zip(sizes, sizes[1:])]  # each halving: the same step down the page
    assert min(gaps) > 0.8 * max(gaps) and min(gaps) > 8, gaps
    for p in history["points"]:  # 0 in its band under 1, inside the plot and above the check numbers
        assert inside({"x": p["x"], "y": p["y"], "w": 0, "h": 0}, history["plot"]), p
    assert ys[0] - ys[1] > 8
    bottom = history["plot"]["y"] + history["plot"]["h"]
    assert all(t["box"]["y"] >= bottom - 0.5 for t in history["ticks"] if t["box"]["x"] > history["plot"]["x"])  # check numbers under the plot
