"""``--save-report-html``: one self-contained HTML file showing where two runners start to disagree.

The file needs nothing at view time: its CSS, its script and every chart (inline SVG drawn here, no chart
library) are inside it, and it holds no ``http(s)`` address, so opening it makes no request. Every name that
comes from a model or a command line is escaped (:func:`html.escape` in the markup; the JSON the script reads
is embedded with ``<``, ``>`` and ``&`` written as ``\\u003c``...).

The renderer is driven by plain data (dicts, lists, numbers, strings), which each command builds from what it
already has, so plugins use it through :mod:`parity_reports.api` without knowing Parity's result classes:

``title`` (str), ``passed`` (bool or None), ``verdict`` (the badge's text), ``command`` (argv), ``facts``
([label, value] pairs), ``notes`` (str lines), ``warnings`` (str lines shown at the top, before any chart they put in
doubt: ``parity run``'s marking effects) and any of these sections:

* ``layerwise``: a list, one per compared pair: ``actual``, ``reference``, ``iteration``, ``first`` (the first
  divergent tensor's name, or None), ``tensors`` (topological order: ``name``, ``position``, ``passed``,
  ``max_abs``, ``max_rel``, ``node``, ``op_type``, ``message``, ``atol``, ``rtol``), optionally ``compared_of``
  (how many tensors the search could have compared) and ``samples`` ({tensor: sample}, see
  :func:`sample_errors`). Drawn as the error of every tensor along the network with the tolerance line and the
  first divergence marked, |error| against |reference| over all tensors' samples, and a table (built by the
  page's script: filter, search, click a row to find its point).
* ``outputs``: panels, one per tensor shown in detail: ``pair``, ``name``, ``passed``, ``message``, ``why``
  (what makes it worth a panel), ``max_abs``, ``max_rel`` and :func:`tensor_detail`'s fields (``atol``,
  ``rtol``, ``stat``, ``histogram``, ``sample``). Drawn as |error| against |reference| (log scales, the
  elementwise tolerance bound, points past fp16's largest value 65504 marked) and the decade histogram of
  |error|.
* ``isolation``: ``debug localize``'s single-node runs: ``node``, ``op_type``, ``tensor``, ``verdict``,
  ``own_max_abs``, ``own_max_rel``, ``full_max_abs``.
* ``precision``: ``fp32_nodes`` (names), ``op_types`` ({name: op}), ``candidates`` (count), ``low``.
* ``nodes``: a list of nodes with a ``heading``, ``caption``, ``nodes`` (names) and ``op_types``.
* ``search``: a debug search's history: ``what`` (the size's unit, e.g. "nodes kept fp32"), ``total``,
  ``result`` (the final size), ``good_means`` (text) and ``checks`` ([{``check``, ``size``, ``verdict``,
  ``label``, ``resumed``}]). Drawn as the candidate's size against the check number.

:func:`ReportCollector` gathers the per-tensor data during ``parity run`` and :func:`run_report_data` builds
``parity run``'s document; ``debug localize``, ``debug precision`` and ``debug reduce`` build theirs in their
plugins.
"""

from __future__ import annotations

import datetime
import functools
import html
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from parity import __version__
from parity.api import GraphInfo, write_text_atomic

FP16_MAX = 65504.0
SAMPLE_POINTS = 256  # per tensor: a uniform sample plus the extremes (sample_errors)
POOLED_POINTS = 4000  # the all-tensors scatter
MAX_PANELS_LAYERWISE = 8
MAX_PANELS = 48
MAX_LINE_POINTS = 4000
CHUNK = 1 << 18  # elements sampled at a time (float64 temporaries: a few MiB); tests shrink it to cross chunk boundaries
BEYOND_DECADES = 6  # a chart's scale reaches this many decades above the tolerance; larger errors show as beyond it

_OK, _FAIL, _FIRST, _SAT, _GREY = "#2e7d32", "#d32f2f", "#6a1b9a", "#ef6c00", "#9e9e9e"


# --- data: what a run gives the report --------------------------------------------------------------------


def _f(value: Any) -> float | None:
    """A number, or None when there is none (inf and NaN stay: the page shows them as measured)."""
    if value is None:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v


def sample_errors(actual: Any, reference: Any, points: int = SAMPLE_POINTS, seed: int = 0, atol: float | None = None, rtol: float | None = None) -> dict[str, Any] | None:
    """A sample of (|reference|, |actual - reference|) pairs of one tensor, in bounded memory (chunk by chunk).

    Kept: ``points * 3/8`` elements drawn uniformly; the ``points / 8`` largest finite errors; the ``points / 8``
    largest finite |reference| values; given ``atol`` and ``rtol``, the ``points / 4`` elements furthest past the
    elementwise bound ``max(atol, rtol * |reference|)`` (those out of tolerance, however small their error); and
    up to ``points / 8`` elements whose error is not finite (an fp16 overflow gives inf). Counted over the whole
    tensor: ``count``, ``over_fp16`` (|reference| > 65504) and ``nonfinite`` (NaN or infinite errors). None when
    the shapes differ or the tensor is empty."""
    a = np.asarray(actual)
    b = np.asarray(reference)
    if a.shape != b.shape or a.size == 0:
        return None
    a, b = a.reshape(-1), b.reshape(-1)
    n = a.size
    k_top = max(1, points // 8)
    k_past = max(1, points // 4)
    k_bad = max(1, points // 8)
    bounded = atol is not None and rtol is not None and math.isfinite(atol) and math.isfinite(rtol)
    rng = np.random.default_rng(seed)
    uniform = np.arange(n) if n <= points else np.sort(rng.choice(n, size=max(1, points * 3 // 8), replace=False))
    empty = (np.empty(0, np.int64), np.empty(0))
    top_err, top_ref, top_past = empty, empty, empty
    bad: list[np.ndarray] = []
    nbad = over = nonfinite = 0
    for start in range(0, n, CHUNK):
        stop = min(start + CHUNK, n)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            x = np.asarray(a[start:stop], dtype=np.float64)
            y = np.asarray(b[start:stop], dtype=np.float64)
            err = np.abs(x - y)
            ref = np.abs(y)
            finite = np.isfinite(err)
            past = err / np.maximum(max(atol or 0.0, 0.0), (rtol or 0.0) * ref) if bounded else None
        over += int(np.count_nonzero(ref > FP16_MAX))
        if not finite.all():
            where = np.flatnonzero(~finite)
            nonfinite += where.size
            if nbad < k_bad:
                bad.append(where[: k_bad - nbad] + start)
                nbad += min(where.size, k_bad - nbad)
        top_err = _merge_top(top_err, np.where(finite, err, -1.0), start, k_top)
        top_ref = _merge_top(top_ref, np.where(np.isfinite(ref), ref, -1.0), start, k_top)
        if past is not None:
            out = finite & np.isfinite(past) & (err > (atol or 0.0)) & (past > 1.0)  # out of tolerance (elementwise)
            top_past = _merge_top(top_past, np.where(out, past, -1.0), start, k_past)
    kept = [top[0][top[1] >= 0] for top in (top_err, top_ref, top_past)]
    chosen = np.unique(np.concatenate([uniform, *kept, *bad]).astype(np.int64))
    with np.errstate(invalid="ignore", over="ignore"):
        x = np.asarray(a[chosen], dtype=np.float64)
        y = np.asarray(b[chosen], dtype=np.float64)
        err = np.abs(x - y)
    return {
        "ref": np.abs(y).tolist(),
        "err": err.tolist(),
        "count": int(n),
        "over_fp16": over,
        "nonfinite": nonfinite,
        "uniform": int(uniform.size),
    }


def _top(values: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest ``values`` (any order). A threshold from a strided subsample leaves a few
    candidates for the exact selection: about 10x faster than ``argpartition`` over the whole chunk, which made a
    layerwise report of DenseNet-121 (1746 tensors) take half as long again as the run."""
    n = values.size
    if n <= 8 * k:
        return np.arange(n)
    sub = values[:: max(1, n // (256 * k))]
    want = max(1, (4 * k * sub.size) // n)  # about 4k of the n values should reach the threshold
    threshold = np.partition(sub, sub.size - want)[sub.size - want]
    above = np.flatnonzero(values > threshold)
    if above.size > k:
        return above[np.argpartition(values[above], above.size - k)[above.size - k :]]
    ties = np.flatnonzero(values == threshold)  # many equal values (all-zero errors): any of them will do
    if above.size + ties.size < k:  # an unlucky subsample: select over everything
        return np.argpartition(values, n - k)[n - k :]
    return np.concatenate([above, ties[: k - above.size]])


def _merge_top(current: tuple[np.ndarray, np.ndarray], values: np.ndarray, start: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest of ``current`` and this chunk's ``values`` (indices offset by ``start``)."""
    part = _top(values, k)
    idx = np.concatenate([current[0], part + start])
    val = np.concatenate([current[1], values[part]])
    if val.size > k:
        keep = np.argpartition(val, val.size - k)[val.size - k :]
        idx, val = idx[keep], val[keep]
    return idx, val


def tensor_detail(checks: Sequence[Any], actual: Any = None, reference: Any = None, sample: bool = True) -> dict[str, Any]:
    """What a panel needs of one tensor beyond its row: tolerances and statistic of the first check that has
    them (the ``simple`` metric's), its NaN and infinite-mismatch counts (``nan``, ``inf``), the decade histogram
    of |error| (``OutputCheck.details``) and, given the arrays, :func:`sample_errors`."""
    out: dict[str, Any] = {"atol": None, "rtol": None, "stat": None, "histogram": [], "sample": None, "nan": 0, "inf": 0}
    values = next((c.values for c in checks if "max_abs" in (getattr(c, "values", None) or {})), {})
    out["nan"] = int((values.get("nan_actual") or 0) + (values.get("nan_reference") or 0))
    out["inf"] = int(values.get("inf_mismatches") or 0)
    for check in checks:
        thresholds = getattr(check, "thresholds", None) or {}
        if "atol" in thresholds and out["atol"] is None:
            out["atol"], out["rtol"], out["stat"] = _f(thresholds.get("atol")), _f(thresholds.get("rtol")), thresholds.get("check_error_stat")
        details = getattr(check, "details", None) or {}
        if details.get("abs_histogram") and not out["histogram"]:
            out["histogram"] = [[str(label), int(count)] for label, count in details["abs_histogram"]]
    if sample and actual is not None and reference is not None:
        elementwise = out["stat"] in (None, "elemwise")
        out["sample"] = sample_errors(actual, reference, atol=out["atol"] if elementwise else None, rtol=out["rtol"] if elementwise else None)
    return out


class ReportCollector:
    """Watches ``parity run`` (:class:`parity_reports.watcher.ReportWatcher`'s ``on_compared``) and keeps, per compared pair, the
    details of the iteration the reports show (the first failing one, else the first): per tensor, what
    :func:`tensor_detail` gives. Earlier iterations' details are dropped, so memory stays bounded."""

    def __init__(self, samples: bool = True) -> None:
        self.samples = samples
        self.pairs: dict[tuple[str, str], dict[str, Any]] = {}

    def on_compared(self, index: int, pair: Any, actual: Mapping[str, Any], reference: Mapping[str, Any]) -> None:
        comparison = pair.iterations[-1]  # this iteration's, just compared
        key = (pair.actual, pair.reference)
        kept = self.pairs.get(key)
        if kept is not None and (not kept["passed"] or comparison.passed):
            return
        by_name: dict[str, list[Any]] = {}
        for check in comparison.checks:
            if check.metric != "missing":
                by_name.setdefault(check.name, []).append(check)
        tensors = {name: tensor_detail(checks, actual.get(name), reference.get(name), self.samples) for name, checks in by_name.items()}
        self.pairs[key] = {"iteration": index, "passed": comparison.passed, "tensors": tensors}

    def details(self, actual: str, reference: str, iteration: int) -> dict[str, Any]:
        kept = self.pairs.get((actual, reference))
        return kept["tensors"] if kept is not None and kept["iteration"] == iteration else {}


def layerwise_section(report: Mapping[str, Any], details: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """A ``layerwise`` section from a first-divergence report's JSON (``DivergenceReport.to_json()``) and the
    tensors' details ({name: :func:`tensor_detail`})."""
    details = details or {}
    tensors = []
    for t in report.get("tensors", []):
        d = details.get(t["name"], {})
        tensors.append(
            {**{k: t.get(k) for k in ("name", "position", "passed", "max_abs", "max_rel", "node", "op_type", "message")}, "atol": d.get("atol"), "rtol": d.get("rtol")}
        )
    return {
        "actual": report.get("actual"),
        "reference": report.get("reference"),
        "iteration": report.get("iteration", 0),
        "first": report.get("first"),
        "tensors": tensors,
        "samples": {name: d["sample"] for name, d in details.items() if d.get("sample")},
    }


def layerwise_panels(section: Mapping[str, Any], details: Mapping[str, Mapping[str, Any]], outputs: Iterable[str] = ()) -> list[dict[str, Any]]:
    """The tensors of a layerwise section worth a panel: the first divergence, the model's outputs, and those with
    the most |reference| values beyond fp16's range or the largest failing errors (at most 8)."""
    rows = {t["name"]: t for t in section["tensors"]}
    chosen: dict[str, str] = {}
    if section.get("first") in rows:
        chosen[section["first"]] = "first divergence"
    for name in outputs:
        if name in rows and name not in chosen:
            chosen[name] = "model output"
    saturated = sorted(((d["sample"]["over_fp16"], name) for name, d in details.items() if name in rows and d.get("sample") and d["sample"]["over_fp16"]), reverse=True)
    for _, name in saturated[:3]:
        chosen.setdefault(name, "|reference| beyond fp16's 65504")
    failing = sorted(((_num(rows[n]["max_abs"]), n) for n in rows if not rows[n]["passed"]), reverse=True)
    for _, name in failing:
        if len(chosen) >= MAX_PANELS_LAYERWISE:
            break
        chosen.setdefault(name, "largest failing error")
    pair = f"{section['actual']} vs {section['reference']}"
    return [_panel(pair, rows[name], details.get(name, {}), why) for name, why in list(chosen.items())[:MAX_PANELS_LAYERWISE]]


def _panel(pair: str, row: Mapping[str, Any], detail: Mapping[str, Any], why: str = "") -> dict[str, Any]:
    return {
        "pair": pair,
        "name": row["name"],
        "passed": row["passed"],
        "message": row.get("message") or "",
        "why": why,
        "node": row.get("node"),
        "op_type": row.get("op_type"),
        "max_abs": row.get("max_abs"),
        "max_rel": row.get("max_rel"),
        **{k: detail.get(k) for k in ("atol", "rtol", "stat", "histogram", "sample")},
    }


def run_report_data(
    summary: Any, code: int, layerwise: Sequence[Any] | None, collector: ReportCollector | None, model: str | None, argv: Sequence[str]
) -> dict[str, Any]:
    """``parity run``'s document: facts, per pair the layerwise section (outputs marked) and panels."""

    facts: list[list[Any]] = [["model", model or "(none: saved outputs only)"], ["iterations", summary.iterations]]
    for runner, times in summary.runtimes.items():
        if times:
            facts.append([f"{runner} median inference", f"{sorted(times)[len(times) // 2] * 1000:.3f} ms"])
    facts.append(["exit code", int(code)])
    data: dict[str, Any] = {
        "title": "parity run",
        "passed": bool(summary.passed),
        "verdict": "PASSED" if summary.passed else "FAILED",
        "command": list(argv),
        "facts": facts,
        "layerwise": [],
        "outputs": [],
        "notes": [],
    }
    marking = getattr(summary, "marking", None) or []  # marking outputs changed a runner's own outputs (compare/marking.py)
    if marking:
        data["warnings"] = [effect.message() for effect in marking]
    if summary.validation:
        data["notes"] += [f"--validate: {v.runner} iteration {v.iteration} output '{v.output}' has {v.nan} NaN and {v.inf} Inf" for v in summary.validation]
    outputs: list[str] = []
    if layerwise and model:
        try:
            outputs = GraphInfo.from_onnx(model).outputs
        except Exception:  # an engine: its outputs are not known here
            outputs = []
    for report in layerwise or ():
        details = collector.details(report.actual, report.reference, report.iteration) if collector else {}
        section = layerwise_section(report.to_json(), details)
        data["layerwise"].append(section)
        data["outputs"] += layerwise_panels(section, details, outputs)
    if layerwise is None:
        for pair in summary.accuracy:
            if not pair.iterations:
                continue
            it = next((i for i in pair.iterations if not i.passed), pair.iterations[0])
            details = collector.details(pair.actual, pair.reference, it.iteration) if collector else {}
            seen: dict[str, list[Any]] = {}
            for check in it.checks:
                if check.metric != "missing":
                    seen.setdefault(check.name, []).append(check)
            for name, checks in list(seen.items())[:MAX_PANELS]:
                values = next((c.values for c in checks if "max_abs" in c.values), {})
                failed = [c for c in checks if not c.passed]
                row = {
                    "name": name,
                    "passed": not failed,
                    "message": failed[0].message if failed else "",
                    "max_abs": values.get("max_abs"),
                    "max_rel": values.get("max_rel"),
                }
                detail = details.get(name) or tensor_detail(checks, sample=False)
                data["outputs"].append(_panel(f"{pair.actual} vs {pair.reference} (iteration {it.iteration})", row, detail, "output"))
            if len(seen) > MAX_PANELS:
                data["notes"].append(f"{pair.actual} vs {pair.reference}: {len(seen)} outputs; the first {MAX_PANELS} are shown")
    if collector is None or not collector.pairs:
        data["notes"].append("no arrays were sampled (saved outputs compared with each other): the charts of |error| against |reference| are empty")
    return data


# --- rendering --------------------------------------------------------------------------------------------


def write_html_report(path: Any, data: Mapping[str, Any]) -> None:
    """Render ``data`` (see the module docstring) and write it atomically to ``path``."""
    write_text_atomic(path, render_html(data))


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _num(value: Any) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return math.nan
    return v


def _g(value: Any, digits: int = 3) -> str:
    v = _num(value)
    if math.isnan(v):
        return "-" if value is None else "NaN"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:.{digits}g}"


def _jsonable(value: Any) -> Any:
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item"):
        return _jsonable(value.item())
    return value


def script_json(value: Any) -> str:
    """JSON that is safe inside ``<script>``: no ``</script>``, ``<!--`` or line separators can close it."""
    text = json.dumps(_jsonable(value), allow_nan=False, separators=(",", ":"))
    for raw, safe in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(raw, safe)
    return text


def render_html(data: Mapping[str, Any]) -> str:
    """The whole page as one string."""
    title = str(data.get("title") or "parity report")
    passed = data.get("passed")
    verdict = str(data.get("verdict") or ("PASSED" if passed else "FAILED" if passed is False else "DONE"))
    badge = "pass" if passed else "fail" if passed is False else "info"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}: {esc(verdict)}</title>",
        f"<style>{_CSS}</style></head>",
        '<body data-rendered="0">',
        f'<header><h1>{esc(title)} <span class="badge {badge}">{esc(verdict)}</span></h1>',
    ]
    command = data.get("command") or []
    if command:
        parts.append(f'<p class="cmd"><code>{esc(" ".join(str(a) for a in command))}</code></p>')
    when = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %z")
    facts = [*(data.get("facts") or []), ["written", f"{when} by Parity {__version__}"]]
    parts.append('<table class="facts">' + "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in facts) + "</table>")
    warnings = data.get("warnings") or []
    if warnings:
        parts.append('<ul class="warnings">' + "".join(f"<li>{esc(w)}</li>" for w in warnings) + "</ul>")
    sections = _sections(data)
    if len(sections) > 1:
        parts.append("<nav>" + " ".join(f'<a href="#{sid}">{esc(label)}</a>' for sid, label, _ in sections) + "</nav>")
    parts.append("</header><main>")
    for sid, label, body in sections:
        parts.append(f'<section id="{sid}"><h2>{esc(label)}</h2>{body}</section>')
    notes = data.get("notes") or []
    if notes:
        parts.append('<section id="notes"><h2>Notes</h2><ul>' + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul></section>")
    parts.append("</main>")
    parts.append('<noscript><p class="note">The tensor tables are built by the page\'s script; the charts above need none.</p></noscript>')
    table_data = [{"first": s.get("first"), "tensors": s.get("tensors", [])} for s in data.get("layerwise") or []]
    parts.append(f'<script type="application/json" id="parity-data">{script_json({"layerwise": table_data})}</script>')
    parts.append(f"<script>{_JS}</script></body></html>")
    return "\n".join(parts) + "\n"


def _sections(data: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    out = []
    for i, section in enumerate(data.get("layerwise") or []):
        label = f"Along the network: {section.get('actual')} vs {section.get('reference')}"
        out.append((f"layerwise-{i}", label, _layerwise_html(i, section)))
    if data.get("outputs"):
        out.append(("outputs", "Error against reference magnitude, per tensor", "".join(_panel_html(p) for p in data["outputs"])))
    if data.get("isolation"):
        out.append(("isolation", "Nodes run alone on the reference's inputs", _isolation_html(data["isolation"])))
    if data.get("precision"):
        out.append(("precision", "Nodes that must stay fp32", _precision_html(data["precision"])))
    if data.get("nodes"):
        out.append(("nodes", str(data["nodes"].get("heading") or "Nodes"), _nodes_html(data["nodes"])))
    if data.get("search"):
        out.append(("search", "Search history", _search_html(data["search"])))
    return out


# --- sections ---------------------------------------------------------------------------------------------


def _layerwise_html(index: int, section: Mapping[str, Any]) -> str:
    tensors = section.get("tensors") or []
    first = section.get("first")
    failing = sum(1 for t in tensors if not t.get("passed"))
    head = f"{len(tensors)} tensors compared in topological order (iteration {esc(section.get('iteration', 0))})"
    if section.get("compared_of"):
        head += f" of {esc(section['compared_of'])} candidates"
    out = []
    if first is None:
        out.append(f'<p class="verdict ok">{head}: all within tolerance.</p>')
    else:
        row = next((t for t in tensors if t["name"] == first), {})
        node = f', produced by node <b class="name">{esc(row.get("node"))}</b> ({esc(row.get("op_type"))})' if row.get("node") else ""
        out.append(
            f'<p class="verdict bad">{head}, {failing} out of tolerance. First divergence: tensor <b class="name">{esc(first)}</b>{node}'
            f" at position {esc(row.get('position'))}" + (f": {esc(row.get('message'))}" if row.get("message") else "") + "</p>"
        )
    out.append(
        '<p class="caption">Each point is one tensor (hover for its name). A tensor fails when some element exceeds both atol and rtol, '
        "so a point above the atol line can still pass; red points failed. The dashed line is the tolerance; the purple line marks the first divergence.</p>"
    )
    out.append(_network_chart(index, tensors, first, "max_abs", "atol", "max |error| (absolute)"))
    out.append(_network_chart(index, tensors, first, "max_rel", "rtol", "max relative error"))
    samples = section.get("samples") or {}
    if samples:
        pooled = _pool(samples, {t["name"]: t for t in tensors})
        out.append(
            "<h3>|error| against |reference|, every compared tensor</h3>"
            f'<p class="caption">Samples of {len(samples)} tensors pooled ({len(pooled["ref"])} points): per tensor a uniform sample plus its largest errors, largest '
            "|reference| values and the elements furthest out of tolerance. Orange triangles have |reference| above 65504, the largest finite "
            "fp16 value: an fp16 tensor cannot hold them.</p>"
        )
        same = set(pooled["tol"])
        atol, rtol = next(iter(same)) if len(same) == 1 else (None, None)
        out.append(_scatter_svg(pooled, atol, rtol, "elemwise", f"all-{index}", (_W, 340)))
    out.append(
        f'<h3>Tensors</h3><div class="controls"><label><input type="checkbox" class="only-failing" data-pair="{index}"> failing only</label> '
        f'<input type="search" class="filter" data-pair="{index}" placeholder="filter by tensor, node or op"> <span class="count" data-pair="{index}"></span></div>'
        f'<div class="table-wrap"><table class="tensors" data-pair="{index}"><thead><tr><th>#</th><th>verdict</th><th>max abs</th><th>max rel</th>'
        f"<th>atol</th><th>tensor</th><th>node (op)</th></tr></thead><tbody></tbody></table></div>"
    )
    return "".join(out)


def _pool(samples: Mapping[str, Mapping[str, Any]], rows: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Every tensor's sample in one, thinned evenly to at most POOLED_POINTS (points past 65504 and non-finite
    errors kept first), with each point's own tolerance."""
    ref: list[float] = []
    err: list[float] = []
    tol: list[tuple[float | None, float | None]] = []
    names: list[str] = []
    over = nonfinite = 0
    for name, s in samples.items():
        row = rows.get(name, {})
        over += s.get("over_fp16", 0)
        nonfinite += s.get("nonfinite", 0)
        for r, e in zip(s["ref"], s["err"]):
            ref.append(r)
            err.append(e)
            tol.append((row.get("atol"), row.get("rtol")))
            names.append(name)
    n = len(ref)
    if n > POOLED_POINTS:
        special = [i for i in range(n) if not math.isfinite(err[i]) or ref[i] > FP16_MAX]
        rest = [i for i in range(n) if math.isfinite(err[i]) and ref[i] <= FP16_MAX]
        room = max(0, POOLED_POINTS - len(special[: POOLED_POINTS // 2]))
        step = max(1, math.ceil(len(rest) / room)) if room else len(rest) + 1
        keep = sorted(special[: POOLED_POINTS // 2] + rest[::step])
        ref, err, tol, names = [ref[i] for i in keep], [err[i] for i in keep], [tol[i] for i in keep], [names[i] for i in keep]
    return {"ref": ref, "err": err, "tol": tol, "names": names, "over_fp16": over, "nonfinite": nonfinite, "count": None}


def _panel_html(p: Mapping[str, Any]) -> str:
    state = "ok" if p.get("passed") else "bad"
    head = f'<h3><span class="name">{esc(p.get("name"))}</span> <span class="tag {state}">{"passed" if p.get("passed") else "FAILED"}</span>'
    if p.get("why"):
        head += f' <span class="why">{esc(p["why"])}</span>'
    head += "</h3>"
    where = f"{esc(p.get('pair'))}"
    if p.get("node"):
        where += f'; produced by <span class="name">{esc(p["node"])}</span> ({esc(p.get("op_type"))})'
    stats = f"max abs {_g(p.get('max_abs'))}, max rel {_g(p.get('max_rel'))}"
    if p.get("atol") is not None:
        stats += f"; atol {_g(p.get('atol'))}, rtol {_g(p.get('rtol'))}" + (f" ({esc(p.get('stat'))})" if p.get("stat") else "")
    lines = [f'<div class="panel">{head}<p class="caption">{where}. {stats}.' + (f" {esc(p['message'])}." if p.get("message") else "") + "</p>"]
    sample = p.get("sample")
    charts = []
    if sample:
        s = {**sample, "tol": [(p.get("atol"), p.get("rtol"))] * len(sample["ref"])}
        charts.append(_scatter_svg(s, p.get("atol"), p.get("rtol"), p.get("stat"), _slug(p.get("name"))))
    if p.get("histogram"):
        charts.append(_histogram_svg(p["histogram"], p.get("atol")))
    if charts:
        lines.append('<div class="charts">' + "".join(charts) + "</div>")
    else:
        lines.append('<p class="note">No error data for this tensor (its metric measured none).</p>')
    if sample:
        notes = [
            f"{sample['count']} elements; {len(sample['ref'])} sampled ({sample.get('uniform', 0)} uniformly, plus the largest errors, "
            "the largest |reference| values and those furthest out of tolerance)"
        ]
        if sample.get("over_fp16"):
            notes.append(f"{sample['over_fp16']} element(s) with |reference| > 65504 (fp16 saturates)")
        if sample.get("nonfinite"):
            notes.append(f"{sample['nonfinite']} element(s) with a NaN or infinite error")
        lines.append(f'<p class="caption">{esc("; ".join(notes))}.</p>')
    lines.append("</div>")
    return "".join(lines)


def _isolation_html(rows: Sequence[Mapping[str, Any]]) -> str:
    body = "".join(
        f'<tr class="{"bad" if r.get("verdict") in ("introduces", "input overflow") else ""}"><td class="name">{esc(r.get("node"))}</td><td>{esc(r.get("op_type"))}</td>'
        f'<td class="name">{esc(r.get("tensor"))}</td><td>{esc(r.get("verdict"))}</td>'
        f"<td>{_g(r.get('own_max_abs'))}</td><td>{_g(r.get('own_max_rel'))}</td><td>{_g(r.get('full_max_abs'))}</td></tr>"
        for r in rows
    )
    return (
        '<p class="caption">"introduces": still out of tolerance when fed the reference\'s own inputs; '
        '"propagates": within tolerance alone, so its inputs\' errors grow through it.</p>'
        '<div class="table-wrap"><table class="plain"><thead><tr><th>node</th><th>op</th><th>tensor</th><th>verdict</th>'
        "<th>alone: max abs</th><th>alone: max rel</th><th>in the model: max abs</th></tr></thead>"
        f"<tbody>{body}</tbody></table></div>"
    )


def _precision_html(p: Mapping[str, Any]) -> str:
    nodes = p.get("fp32_nodes") or []
    ops = p.get("op_types") or {}
    total = p.get("candidates")
    low = p.get("low", "float16")
    share = f" of {esc(total)} candidate nodes" if total is not None else ""
    out = [f'<p class="verdict {"bad" if nodes else "ok"}">{len(nodes)}{share} must stay fp32 for the check to pass; the others run in {esc(low)}.</p>']
    if total:
        width = 600
        filled = 0 if not total else max(2 if nodes else 0, round(width * len(nodes) / total))
        out.append(
            f'<svg class="chart" width="{width + 20}" height="34" role="img" aria-label="fp32 share"><rect x="10" y="8" width="{width}" height="18" fill="#bbdefb"/>'
            f'<rect x="10" y="8" width="{filled}" height="18" fill="{_FAIL}"><title>{len(nodes)} fp32</title></rect></svg>'
        )
    if nodes:
        rows = "".join(f'<tr><td class="name">{esc(n)}</td><td>{esc(ops.get(n, ""))}</td></tr>' for n in nodes)
        out.append(f'<div class="table-wrap"><table class="plain fp32"><thead><tr><th>node kept fp32</th><th>op</th></tr></thead><tbody>{rows}</tbody></table></div>')
    return "".join(out)


def _nodes_html(p: Mapping[str, Any]) -> str:
    nodes = p.get("nodes") or []
    ops = p.get("op_types") or {}
    rows = "".join(f'<tr><td class="name">{esc(n)}</td><td>{esc(ops.get(n, ""))}</td></tr>' for n in nodes)
    caption = f'<p class="caption">{esc(p["caption"])}</p>' if p.get("caption") else ""
    return caption + f'<div class="table-wrap"><table class="plain"><thead><tr><th>node</th><th>op</th></tr></thead><tbody>{rows}</tbody></table></div>'


def _search_html(s: Mapping[str, Any]) -> str:
    checks = s.get("checks") or []
    what = s.get("what", "candidate size")
    out = [
        f'<p class="caption">{len(checks)} check(s). Each point is one check: the size of its candidate ({esc(what)}) against the check number. '
        f"{esc(s.get('good_means', ''))}</p>",
        _history_svg(checks, s.get("total"), s.get("result"), what),
    ]
    return "".join(out)


# --- SVG charts -------------------------------------------------------------------------------------------

_W, _H = 1200, 280  # drawn at the page's width (CSS): about 1 px a unit on a laptop
_L, _R, _T, _B = 70, 20, 34, 44  # _T: two label rows above the plot (legend; first divergence)


_BAND = 0.9  # decades between an axis's end and its band of zeros (or of inf/NaN): room for both labels


class _LogAxis:
    """log10 axis over whole decades, with a band below for zeros and one above for inf/NaN. At most ``decades``
    decades are drawn, the top ones: smaller values (subnormal references, rounding noise) join the zeros' band,
    labelled ``<1eN`` then. Given ``cap``, values above it (a relative error of 1e38 where the reference is
    near zero) join the top band, labelled ``>1eN``, so the scale stays where the tolerance is; given ``floor``,
    values below it join the bottom band."""

    def __init__(
        self, values: Iterable[float], a: float, b: float, extra: Iterable[float] = (), decades: int = 16, cap: float | None = None, floor: float | None = None
    ) -> None:
        pos = [v for v in (*values, *extra) if v is not None and math.isfinite(v) and v > 0]
        lo, hi = (min(pos), max(pos)) if pos else (1e-8, 1.0)
        self.beyond = cap is not None and hi > cap
        if self.beyond:
            hi = cap  # type: ignore[assignment]
        self.dhi = math.ceil(math.log10(hi))
        self.dlo = math.floor(math.log10(lo))
        self.cut = self.dlo < self.dhi - decades  # values below 10**dlo join the bottom band
        if self.cut:
            self.dlo = self.dhi - decades
        if floor is not None and floor > 0 and self.dlo < math.floor(math.log10(floor)):
            self.dlo, self.cut = math.floor(math.log10(floor)), True
        self.dhi = max(self.dhi, self.dlo + 1)
        self.a, self.b = a, b  # screen coordinates of the bottom band and the inf band

    def _span(self) -> float:
        return self.dhi - self.dlo + 2 * _BAND  # a band each side

    def top(self, v: float) -> bool:
        """Whether ``v`` sits in the top band (inf, NaN, or beyond the cap)."""
        return v is None or math.isnan(v) or v == math.inf or (self.beyond and v > 10.0**self.dhi)

    def __call__(self, v: float) -> float:
        if self.top(v):
            d = self.dhi + _BAND
        elif v <= 0 or math.log10(v) < self.dlo:
            d = self.dlo - _BAND
        else:
            d = math.log10(v)
        return self.a + (d - (self.dlo - _BAND)) / self._span() * (self.b - self.a)

    def ticks(self) -> list[tuple[float, str]]:
        n = self.dhi - self.dlo
        step = 1 if n <= 10 else 2 if n <= 20 else 4 if n <= 40 else 10
        out = [(self(10.0**d), f"1e{d}") for d in range(self.dlo, self.dhi + 1, step)]
        return [(self(0.0), f"<1e{self.dlo}" if self.cut else "0"), *out, (self(math.inf), f">1e{self.dhi}" if self.beyond else "inf/NaN")]

    def label_width(self) -> float:
        """Pixels the widest tick label takes (10 px text)."""
        return max(_text_width(text, 10) for _, text in self.ticks())


def _text_width(text: str, size: float) -> float:
    """A generous estimate of a label's width in pixels (system-ui at ``size`` px: about 0.62 em a character)."""
    return 0.62 * size * len(str(text))


def _meaningful(tolerances: Iterable[float]) -> tuple[float | None, float | None]:
    """The range of errors worth a scale around these tolerances: up to 6 decades above the largest and 10 below
    the smallest; (None, None) when there is no tolerance."""
    tols = [t for t in tolerances if math.isfinite(t) and t > 0]
    if not tols:
        return None, None
    return 10.0 ** (math.ceil(math.log10(max(tols))) + BEYOND_DECADES), 10.0 ** (math.floor(math.log10(min(tols))) - 10)


def _line(x1: float, y1: float, x2: float, y2: float, cls: str) -> str:
    return f'<line x1="{x1:.1f}" x2="{x2:.1f}" y1="{y1:.1f}" y2="{y2:.1f}" class="{cls}"/>'


def _text(x: float, y: float, text: Any, cls: str = "tick", anchor: str = "start", rotate: bool = False) -> str:
    """An escaped SVG label; ``rotate``: vertical, reading upwards (a y-axis title)."""
    turn = f' transform="rotate(-90 {x:.1f} {y:.1f})"' if rotate else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" class="{cls}" text-anchor="{anchor}"{turn}>{esc(text)}</text>'


def _svg_open(width: int, height: int, label: str, kind: str) -> str:
    return f'<svg class="chart {kind}" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{esc(label)}">'


def _y_axis(axis: _LogAxis, x0: float, x1: float, label: str, y_top: float = _T, y_bottom: float = _H - _B) -> str:
    """Grid lines and tick labels right of the title, which sits clear of the widest label (they never overlap)."""
    out = []
    for y, text in axis.ticks():
        out.append(
            f'<line x1="{x0}" x2="{x1}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/><text x="{x0 - 6}" y="{y + 4:.1f}" class="tick" text-anchor="end">{esc(text)}</text>'
        )
    title_x = max(12.0, x0 - 6 - axis.label_width() - 10)
    out.append(_text(title_x, (y_top + y_bottom) / 2, label, "axis-label", "middle", rotate=True))
    return "".join(out)


def _plot_area(x0: float, y0: float, x1: float, y1: float) -> str:
    """The area the data is drawn in (the tests read its geometry)."""
    return f'<rect x="{x0:.1f}" y="{y0:.1f}" width="{x1 - x0:.1f}" height="{y1 - y0:.1f}" class="plot-area"/>'


def _beyond_band(axis: _LogAxis, x0: float, x1: float, count: int, largest: float) -> str:
    """The shaded top band of values beyond the scale's cap, labelled with how many and the largest."""
    if not axis.beyond:
        return ""
    yb = axis(math.inf)
    h = abs(axis(10.0**axis.dhi) - yb)
    text = f"beyond 1e{axis.dhi}: {count} tensor(s)" + (f", up to {_g(largest)}" if math.isfinite(largest) else "") + " (and inf/NaN)"
    return f'<rect x="{x0}" y="{yb - h / 2:.1f}" width="{x1 - x0}" height="{h:.1f}" class="beyond"/>' + _text(x0 + 6, yb + 4, text, "legend beyond-label")


def _network_chart(index: int, tensors: Sequence[Mapping[str, Any]], first: str | None, key: str, tol_key: str, label: str) -> str:
    """One point per tensor at its position in the topological order (the ``#`` of the text and the table): the
    error ``key`` on a log axis clipped to a meaningful range around the tolerance (errors far beyond it sit in a
    labelled top band), the tolerance ``tol_key`` as a dashed step line, failing tensors red, the first divergence
    marked."""
    n = len(tensors)
    if not n:
        return '<p class="note">No tensor was compared.</p>'
    values = [_num(t.get(key)) for t in tensors]
    if all(math.isnan(v) for v in values):
        return f'<p class="note">The metrics measured no {esc(label)}.</p>'
    keep = list(range(n))
    thinned = ""
    if n > MAX_LINE_POINTS:
        step = math.ceil(n / MAX_LINE_POINTS)
        keep = [i for i in range(n) if i % step == 0 or not tensors[i].get("passed") or tensors[i]["name"] == first]
        thinned = f" ({len(keep)} of {n} drawn: every failing tensor and every {step}th passing one)"
    tols = [_num(t.get(tol_key)) for t in tensors]
    cap, floor = _meaningful(tols)
    y = _LogAxis(values, _H - _B, _T + 8, extra=[v for v in tols if v > 0], cap=cap, floor=floor)  # the top band inside the plot
    x0, x1 = max(_L + 10, y.label_width() + 34), _W - _R  # one left edge for both charts unless a label is unusually wide
    positions = [int(_num(t.get("position"))) if not math.isnan(_num(t.get("position"))) else i for i, t in enumerate(tensors)]
    lo, hi = min(positions), max(positions)

    def px(position: float) -> float:
        return x0 + (position - lo + 0.5) / (hi - lo + 1) * (x1 - x0)

    out = [_svg_open(_W, _H, label, "network"), _plot_area(x0, _T, x1, _H - _B), _y_axis(y, x0, x1, label)]
    over = [values[i] for i in range(n) if y.beyond and math.isfinite(values[i]) and values[i] > 10.0**y.dhi]
    out.append(_beyond_band(y, x0, x1, len(over), max(over, default=math.nan)))
    out.append(f'<line x1="{x0}" x2="{x1}" y1="{_H - _B}" y2="{_H - _B}" class="axis"/>')
    step = _tick_step(hi - lo + 1)
    for p in range(-(-lo // step) * step, hi + 1, step):  # round positions: multiples of the step
        out.append(f'<text x="{px(p):.1f}" y="{_H - _B + 16}" class="tick" text-anchor="middle">{p}</text>')
    out.append(
        f'<text x="{(x0 + x1) / 2:.0f}" y="{_H - 6}" class="axis-label" text-anchor="middle">tensor position in topological order (# in the table){esc(thinned)}</text>'
    )
    # tolerance: a step line over the tensors that have one, each step from midway to its neighbours
    path, prev = [], None
    for i, t in enumerate(tols):
        if math.isnan(t):
            prev = None
            continue
        yy = y(t) if t > 0 else y(0.0)
        xa = px((positions[i - 1] + positions[i]) / 2) if i else px(positions[i] - 0.5)
        xb = px((positions[i] + positions[i + 1]) / 2) if i + 1 < n else px(positions[i] + 0.5)
        path.append(f"{'L' if prev is not None else 'M'}{xa:.1f},{yy:.1f} L{xb:.1f},{yy:.1f}")
        prev = t
    if path:
        out.append(f'<path d="{" ".join(path)}" class="tol"><title>{esc(tol_key)}</title></path>')
        out.append(f'<text x="{x1}" y="{_T - 20}" class="legend" text-anchor="end">dashed: {esc(tol_key)}</text>')
    segments, current = [], []  # the trend joins positive finite values on the scale; a zero, a gap or the band breaks it
    for i in keep:
        if values[i] > 0 and math.isfinite(values[i]) and not y.top(values[i]):
            current.append(f"{px(positions[i]):.1f},{y(values[i]):.1f}")
        elif current:
            segments.append(current)
            current = []
    segments.append(current)
    out += [f'<polyline points="{" ".join(seg)}" class="trend"/>' for seg in segments if len(seg) > 1]
    first_i = next((i for i, t in enumerate(tensors) if t["name"] == first), None)
    if first_i is not None:
        fx = px(positions[first_i])
        out.append(f'<line x1="{fx:.1f}" x2="{fx:.1f}" y1="{_T}" y2="{_H - _B}" class="first-line" data-position="{positions[first_i]}"/>')
        anchor = "start" if fx < (x0 + x1) / 2 else "end"
        dx = 4 if anchor == "start" else -4
        text = f"first divergence: #{positions[first_i]} {_short(first, 60)}"
        out.append(f'<text x="{fx + dx:.1f}" y="{_T - 6}" class="first-label" text-anchor="{anchor}">{esc(text)}</text>')
    for i in keep:
        t, v = tensors[i], values[i]
        if math.isnan(v) and t.get("passed"):
            continue
        cls = "first" if i == first_i else "ok" if t.get("passed") else "bad"
        r = 4.5 if i == first_i else 2.6
        where = f" <- {t.get('node')} ({t.get('op_type')})" if t.get("node") else ""
        beyond = " (beyond the scale)" if y.top(v) and math.isfinite(v) else ""
        tip = f"#{positions[i]} {t['name']}{where}: {label} {_g(v)}{beyond}, {tol_key} {_g(tols[i])}, {'ok' if t.get('passed') else 'FAIL'}"
        out.append(
            f'<circle cx="{px(positions[i]):.1f}" cy="{y(v):.1f}" r="{r}" class="pt {cls}" data-pair="{index}" data-t="{i}" data-position="{positions[i]}">'
            f"<title>{esc(tip)}</title></circle>"
        )
    out.append("</svg>")
    return "".join(out)


def _tick_step(n: int) -> int:
    """A round step (1, 2, 5 x 10^k) giving about 10 ticks over ``n`` values."""
    raw = n / 10
    mag = 10 ** math.floor(math.log10(raw)) if raw >= 1 else 1
    return int(next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw))


def _x_ticks(n: int) -> list[int]:
    return [0] if n <= 1 else list(range(0, n, _tick_step(n)))


def _scatter_svg(sample: Mapping[str, Any], atol: Any, rtol: Any, stat: Any, slug: str, size: tuple[int, int] = (420, 300)) -> str:
    """|error| (y) against |reference| (x), log scales: zeros in the bottom/left band, inf/NaN errors in the top
    band; points past 65504 (fp16's largest finite value) orange; the elementwise bound max(atol, rtol*|ref|)
    dashed, points above it red."""
    refs = [_num(v) for v in sample["ref"]]
    errs = [_num(v) for v in sample["err"]]
    tols = sample.get("tol") or [(atol, rtol)] * len(refs)
    width, height = size
    r, t, b = 14, 14, 44
    y = _LogAxis(errs, height - b, t, extra=[_num(v) for v, _ in tols if v is not None])
    left = max(64, y.label_width() + 30)  # the tick labels and the title beside them never overlap
    x = _LogAxis(refs, left, width - r, extra=[FP16_MAX] if any(v > FP16_MAX / 100 for v in refs if math.isfinite(v)) else [])
    out = [
        _svg_open(width, height, f"error against reference magnitude {slug}", "scatter wide" if width >= _W else "scatter"),
        _plot_area(left, t, width - r, height - b),
    ]
    for yy, text in y.ticks():
        out.append(_line(left, yy, width - r, yy, "grid") + _text(left - 5, yy + 4, text, "tick", "end"))
    for xx, text in x.ticks()[0 if any(v <= 0 for v in refs) else 1 : -1]:  # "0" only when a point sits there
        out.append(_line(xx, t, xx, height - b, "grid") + _text(xx, height - b + 14, text, "tick", "middle"))
    out.append(f'<text x="{(left + width - r) / 2:.0f}" y="{height - 8}" class="axis-label" text-anchor="middle">|reference| (log)</text>')
    out.append(_text(max(12.0, left - 5 - y.label_width() - 9), (t + height - b) / 2, "|error| (log)", "axis-label", "middle", rotate=True))
    a_tol, r_tol = _num(atol), _num(rtol)
    if stat in (None, "elemwise") and not math.isnan(a_tol) and not math.isnan(r_tol):
        pts = []
        for k in range(0, 121):
            d = x.dlo + (x.dhi - x.dlo) * k / 120
            v = 10.0**d
            pts.append(f"{x(v):.1f},{y(max(a_tol, r_tol * v)):.1f}")
        out.append(f'<polyline points="{" ".join(pts)}" class="tol"><title>elementwise bound: max(atol, rtol x |reference|)</title></polyline>')
    if 10.0**x.dlo <= FP16_MAX <= 10.0**x.dhi:
        fx = x(FP16_MAX)
        out.append(_line(fx, t, fx, height - b, "fp16-line") + _text(fx - 3, t + 10, "fp16 max 65504", "legend sat", "end"))
    over = 0
    for i, (rv, ev) in enumerate(zip(refs, errs)):
        at, rt = (_num(tols[i][0]), _num(tols[i][1])) if i < len(tols) else (math.nan, math.nan)
        bound = max(at, rt * rv) if not (math.isnan(at) or math.isnan(rt)) else math.nan
        fails = not math.isfinite(ev) or (not math.isnan(bound) and ev > at and ev > rt * rv)
        saturated = rv > FP16_MAX
        over += saturated
        cls = "sat" if saturated else "bad" if fails else "ok"
        name = sample.get("names", [None] * len(refs))[i] if sample.get("names") else None
        tip = (f"{name}: " if name else "") + f"|reference| {_g(rv, 4)}, |error| {_g(ev, 4)}"
        cx, cy = x(rv), y(ev)
        if saturated:
            out.append(
                f'<path d="M{cx:.1f},{cy - 4:.1f} L{cx + 4:.1f},{cy + 3:.1f} L{cx - 4:.1f},{cy + 3:.1f} Z" class="pt sat"><title>{esc(tip)} (beyond fp16)</title></path>'
            )
        else:
            out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="2.2" class="pt {cls}"><title>{esc(tip)}</title></circle>')
    legend = "green: within tolerance, red: out of it, dashed: the elementwise bound" if stat in (None, "elemwise") else "red: NaN/inf error"
    if over:
        legend += f"; orange triangles: |reference| > 65504 ({over} sampled)"
    out.append("</svg>")
    return '<figure class="chart-fig">' + "".join(out) + f"<figcaption>{esc(legend)}</figcaption></figure>"


@functools.lru_cache(maxsize=1)
def _decade_order() -> list[str]:
    """Every label :func:`parity.api.decade_labels` can give, in order (given more counts than decades, it labels them all)."""
    from parity.api import decade_labels

    return [label for label, _ in decade_labels(np.ones(64, dtype=np.int64))]


def _bin_low(label: str) -> float:
    """The lower edge of a decade label: ``[1e-03,1e-02)`` -> 0.001; ``0`` -> 0; ``NaN/Inf`` -> inf."""
    if label == "0":
        return 0.0
    if label.startswith("NaN"):
        return math.inf
    text = label.strip("[(>=)")
    try:
        return float(text.split(",")[0]) if not label.startswith("(") else 0.0
    except ValueError:
        return math.nan


def _histogram_svg(histogram: Sequence[Sequence[Any]], atol: Any) -> str:
    """Bars per decade of |error| (count on a log scale); bins at or above atol orange-red."""
    counts = {str(label): int(count) for label, count in histogram}
    full = _decade_order()
    order = list(counts)
    if counts and all(label in full for label in counts):  # every decade between the first and the last bin
        idx = [full.index(label) for label in counts]
        order = full[min(idx) : max(idx) + 1]
    width, height = 420, 300
    left, r, t, b = 56, 10, 14, 90
    n = len(order)
    top = max(counts.values()) if counts else 1
    scale = math.log10(top + 1) or 1.0
    bw = (width - left - r) / max(n, 1)
    a_tol = _num(atol)
    out = [_svg_open(width, height, "histogram of absolute error", "histogram")]
    for k in range(0, int(math.ceil(scale)) + 1):
        yy = height - b - k / scale * (height - t - b)
        if yy < t - 1:
            break
        out.append(_line(left, yy, width - r, yy, "grid") + _text(left - 4, yy + 4, f"{10**k:g}", "tick", "end"))
    for i, label in enumerate(order):
        c = counts.get(label, 0)
        h = math.log10(c + 1) / scale * (height - t - b)
        low = _bin_low(label)
        above = not math.isnan(a_tol) and (low >= a_tol or math.isinf(low))
        cls = "bar bad" if above else "bar"
        xx = left + i * bw
        out.append(f'<rect x="{xx + 1:.1f}" y="{height - b - h:.1f}" width="{max(bw - 2, 1):.1f}" height="{h:.1f}" class="{cls}"><title>{esc(label)}: {c}</title></rect>')
        if c:
            out.append(f'<text x="{xx + bw / 2:.1f}" y="{height - b - h - 3:.1f}" class="tick" text-anchor="middle">{c}</text>')
        cx = xx + bw / 2
        out.append(f'<text x="{cx:.1f}" y="{height - b + 10}" class="tick" text-anchor="end" transform="rotate(-50 {cx:.1f} {height - b + 10})">{esc(label)}</text>')
    out.append(f'<text x="{(left + width - r) / 2:.0f}" y="{height - 4}" class="axis-label" text-anchor="middle">|error| per decade (count, log scale)</text>')
    out.append("</svg>")
    caption = "bars at or above atol in red" if not math.isnan(a_tol) else ""
    return '<figure class="chart-fig">' + "".join(out) + f"<figcaption>decade histogram of |error|{'; ' + caption if caption else ''}</figcaption></figure>"


def _count_ticks(top: float) -> list[int]:
    """1, 2, 5, 10, 20, 50... up to ``top`` (at most about 10 labels: 1, 10, 100... beyond)."""
    out = [m * 10**k for k in range(0, max(1, math.ceil(math.log10(max(top, 1)))) + 1) for m in (1, 2, 5) if m * 10**k <= top]
    return out if len(out) <= 10 else [v for v in out if str(v).startswith("1")]


def _history_svg(checks: Sequence[Mapping[str, Any]], total: Any, result: Any, what: str) -> str:
    """Candidate size (y, log scale: a search halves it, so the last checks' sizes differ where it matters)
    against check number (x): good green, bad red, unresolved grey; resumed hollow. A size of 0 sits in a band
    below 1."""
    if not checks:
        return '<p class="note">No check ran.</p>'
    sizes = [c.get("size") for c in checks]
    top = max([s for s in sizes if isinstance(s, (int, float))] + [_num(total) if total is not None else 0, 1])
    dtop = math.log10(top) * 1.06 + 0.05  # headroom above the top line
    n = len(checks)
    labels = _count_ticks(top)
    x0, x1, y0, y1 = max(_L, _text_width(str(max(labels)), 10) + 34), _W - _R, _H - _B, _T

    def px(i: int) -> float:
        return x0 + (i + 0.5) / n * (x1 - x0)

    def py(v: float) -> float:
        d = math.log10(v) if v >= 1 else -0.4  # 0 (or a fraction): a band below 1, inside the plot
        return y0 + (d + 0.6) / (dtop + 0.6) * (y1 - y0)

    out = [_svg_open(_W, _H, "search history", "history"), _plot_area(x0, y1, x1, y0)]
    for k in labels:
        out.append(
            f'<line x1="{x0}" x2="{x1}" y1="{py(k):.1f}" y2="{py(k):.1f}" class="grid"/><text x="{x0 - 6}" y="{py(k) + 4:.1f}" class="tick" text-anchor="end">{k}</text>'
        )
    if any(isinstance(v, (int, float)) and v < 1 for v in sizes):
        out.append(f'<text x="{x0 - 6}" y="{py(0) + 4:.1f}" class="tick" text-anchor="end">0</text>')
    for i in _x_ticks(n):
        out.append(f'<text x="{px(i):.1f}" y="{y0 + 16}" class="tick" text-anchor="middle">{i + 1}</text>')
    out.append(f'<text x="{(x0 + x1) / 2:.0f}" y="{_H - 6}" class="axis-label" text-anchor="middle">check number</text>')
    title_x = max(12.0, x0 - 6 - _text_width(str(max(labels)), 10) - 10)
    out.append(_text(title_x, (y0 + y1) / 2, f"{what} (log)", "axis-label", "middle", rotate=True))
    if total is not None:
        out.append(_line(x0, py(_num(total)), x1, py(_num(total)), "tol") + _text(x1 - 4, py(_num(total)) - 4, f"all candidates: {total}", "legend", "end"))
    if result is not None:
        ry = py(_num(result))
        below = total is not None and abs(ry - py(_num(total))) < 14  # the two labels would overlap: this one under its line
        out.append(_line(x0, ry, x1, ry, "first-line") + _text(x1 - 4, ry + 13 if below else ry - 4, f"result: {result}", "first-label", "end"))
    line = " ".join(f"{px(i):.1f},{py(s):.1f}" for i, s in enumerate(sizes) if isinstance(s, (int, float)))
    out.append(f'<polyline points="{line}" class="trend"/>')
    for i, c in enumerate(checks):
        s = c.get("size")
        if not isinstance(s, (int, float)):
            continue
        verdict = str(c.get("verdict"))
        cls = {"good": "ok", "bad": "bad"}.get(verdict, "grey")
        fill = " hollow" if c.get("resumed") else ""
        tip = f"check {i + 1}: {c.get('label') or s} -> {verdict}" + (" (from the state file)" if c.get("resumed") else "")
        out.append(f'<circle cx="{px(i):.1f}" cy="{py(s):.1f}" r="3.5" class="pt {cls}{fill}" data-size="{s}"><title>{esc(tip)}</title></circle>')
    out.append("</svg>")
    return (
        '<figure class="chart-fig">' + "".join(out) + "<figcaption>log scale; green: good, red: bad, grey: unresolved, hollow: replayed from the state file</figcaption>"
        "</figure>"
    )


def _short(text: Any, n: int) -> str:
    s = str(text)
    return s if len(s) <= n else s[: n - 1] + "\u2026"


def _slug(text: Any) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in str(text))[:40]


_CSS = """
:root{--ok:#2e7d32;--bad:#d32f2f;--first:#6a1b9a;--sat:#ef6c00;--fg:#1f1f1f;--muted:#5f6368;--line:#e0e0e0}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);margin:0;background:#fafafa}
header{background:#fff;border-bottom:1px solid var(--line);padding:14px 24px}
main{padding:0 24px 40px}
h1{font-size:20px;margin:0 0 6px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid var(--line);padding-bottom:4px}h3{font-size:15px;margin:18px 0 6px}
.badge{font-size:13px;padding:2px 8px;border-radius:10px;vertical-align:middle;color:#fff}
.badge.pass{background:var(--ok)}.badge.fail{background:var(--bad)}.badge.info{background:#546e7a}
.cmd code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;background:#f1f3f4;padding:3px 6px;border-radius:4px;word-break:break-all}
table.facts{border-collapse:collapse;font-size:13px}table.facts th{text-align:left;color:var(--muted);font-weight:500;padding:1px 12px 1px 0}
nav a{margin-right:14px;color:#1a73e8;text-decoration:none}
.verdict{padding:8px 12px;border-radius:6px}.verdict.ok{background:#e8f5e9}.verdict.bad{background:#fdecea}
.name{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;word-break:break-all}
.warnings{margin:10px 0 0;padding:8px 12px 8px 28px;background:#fff4e5;border-left:4px solid var(--sat);color:#5d3200}
.caption,.note,figcaption{color:var(--muted);font-size:12.5px;margin:4px 0}
svg.chart{background:#fff;border:1px solid var(--line);border-radius:4px;display:block;max-width:100%;height:auto}
svg.chart.network,svg.chart.history,svg.chart.scatter.wide{width:100%}
.charts{display:flex;flex-wrap:wrap;gap:12px}.chart-fig{margin:0}
.plot-area{fill:none;stroke:none}.beyond{fill:#fff3e0}.beyond-label{fill:var(--sat)}
.grid{stroke:#eee;stroke-width:1}.axis{stroke:#999}.tick{font-size:10px;fill:#666}.axis-label{font-size:11px;fill:#444}.legend{font-size:10.5px;fill:#555}
.tol{stroke:#1565c0;stroke-dasharray:5 3;fill:none;stroke-width:1.3}.trend{stroke:#bdbdbd;fill:none;stroke-width:1}
.first-line{stroke:var(--first);stroke-width:1.5;stroke-dasharray:3 2}.first-label{font-size:11px;fill:var(--first);font-weight:600}
.fp16-line{stroke:var(--sat);stroke-width:1.3;stroke-dasharray:2 2}.legend.sat{fill:var(--sat)}
.pt.ok{fill:var(--ok)}.pt.bad{fill:var(--bad)}.pt.first{fill:var(--first);stroke:#fff;stroke-width:1.5}.pt.sat{fill:var(--sat)}.pt.grey{fill:#9e9e9e}
.pt.hollow{fill:#fff;stroke:#757575}.pt.sel{stroke:#000;stroke-width:2.5}
.bar{fill:#90a4ae}.bar.bad{fill:#e57373}
.panel{background:#fff;border:1px solid var(--line);border-radius:6px;padding:8px 14px;margin:12px 0}
.tag{font-size:11px;padding:1px 6px;border-radius:8px;color:#fff}.tag.ok{background:var(--ok)}.tag.bad{background:var(--bad)}
.why{font-size:12px;color:var(--first);font-weight:500}
.controls{margin:6px 0}.controls input[type=search]{width:280px;padding:3px 6px}
.table-wrap{max-height:420px;overflow:auto;border:1px solid var(--line);background:#fff}
table.tensors,table.plain{border-collapse:collapse;width:100%;font-size:12.5px}
table.tensors th,table.plain th{position:sticky;top:0;background:#f5f5f5;text-align:left;padding:3px 8px;border-bottom:1px solid var(--line)}
table.tensors td,table.plain td{padding:2px 8px;border-bottom:1px solid #f0f0f0;font-family:ui-monospace,SFMono-Regular,Menlo,monospace}
tr.fail td{background:#fff5f5}tr.fail td.v{color:var(--bad);font-weight:600}tr.first td{background:#f3e5f5;font-weight:600}tr.bad td{background:#fff5f5}
tr.sel td{outline:1px solid #000}
"""

_JS = r"""
(function(){
  "use strict";
  var data = JSON.parse(document.getElementById("parity-data").textContent);
  function fmt(v){
    if(v===null||v===undefined) return "-"; if(typeof v==="string") return v; if(v===0) return "0";
    return Number(v).toPrecision(3).replace(/\.?0+e/,"e").replace(/(\.\d*?)0+$/,"$1").replace(/\.$/,"");
  }
  function cell(tr, text, cls){ var td=document.createElement("td"); td.textContent=text; if(cls) td.className=cls; tr.appendChild(td); return td; }
  function select(pair, i){
    document.querySelectorAll(".pt.sel").forEach(function(e){ e.classList.remove("sel"); });
    document.querySelectorAll('.pt[data-pair="'+pair+'"][data-t="'+i+'"]').forEach(function(e){ e.classList.add("sel"); });
    document.querySelectorAll("tr.sel").forEach(function(e){ e.classList.remove("sel"); });
    var row=document.querySelector('table.tensors[data-pair="'+pair+'"] tr[data-t="'+i+'"]'); if(row) row.classList.add("sel");
  }
  data.layerwise.forEach(function(section, pair){
    var table=document.querySelector('table.tensors[data-pair="'+pair+'"]'); if(!table) return;
    var body=table.tBodies[0], rows=[];
    section.tensors.forEach(function(t, i){
      var tr=document.createElement("tr"); tr.dataset.t=i;
      tr.className = t.name===section.first ? "first fail" : (t.passed ? "" : "fail");
      cell(tr, String(t.position)); cell(tr, t.passed ? "ok" : "FAIL", "v"); cell(tr, fmt(t.max_abs)); cell(tr, fmt(t.max_rel)); cell(tr, fmt(t.atol));
      cell(tr, t.name, "tensor-name"); cell(tr, t.node ? t.node+" ("+t.op_type+")" : "");
      if(t.message) tr.title=t.message;
      tr.addEventListener("click", function(){ select(pair, i); });
      body.appendChild(tr); rows.push({tr:tr, t:t, text:(t.name+" "+(t.node||"")+" "+(t.op_type||"")).toLowerCase()});
    });
    var only=document.querySelector('.only-failing[data-pair="'+pair+'"]'), filter=document.querySelector('.filter[data-pair="'+pair+'"]');
    var count=document.querySelector('.count[data-pair="'+pair+'"]');
    function apply(){
      var q=(filter.value||"").toLowerCase(), shown=0;
      rows.forEach(function(r){ var ok=(!only.checked||!r.t.passed)&&(!q||r.text.indexOf(q)>=0); r.tr.style.display=ok?"":"none"; shown+=ok?1:0; });
      count.textContent=shown+" of "+rows.length+" shown";
    }
    only.addEventListener("change", apply); filter.addEventListener("input", apply); apply();
    document.querySelectorAll('.pt[data-pair="'+pair+'"]').forEach(function(p){
      p.addEventListener("click", function(){
        var i=p.getAttribute("data-t"); select(pair, i);
        var row=table.querySelector('tr[data-t="'+i+'"]'); if(row) row.scrollIntoView({block:"center"});
      });
    });
    var first=table.querySelector("tr.first"); if(first){ var wrap=table.parentNode; wrap.scrollTop=Math.max(0, first.offsetTop-wrap.clientHeight/3); }
  });
  document.body.setAttribute("data-rendered", "1");
})();
"""
