"""A sweep's pictures (PNG bytes for the parent run's artifacts): history, importances, Pareto front, batch size.

Drawn on ``matplotlib.figure.Figure`` directly (the Agg canvas, no pyplot), as ``analysis/plots.py``:
no global backend state, no display. Each function takes the results rows (``search.results_rows``)
and draws only measured numbers; an empty picture says why it is empty.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.figure import Figure

__all__ = ["batch_png", "history_png", "importance_png", "pareto_front", "pareto_png"]

_OK, _BEST, _OTHER, _FRONT = "#2b6cb0", "#dd6b20", "#a0aec0", "#c53030"
Row = Mapping[str, Any]


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return buf.getvalue()


def _empty(fig: Figure, ax: Any, why: str) -> bytes:
    ax.text(0.5, 0.5, why, ha="center", va="center", wrap=True, transform=ax.transAxes)
    ax.set_axis_off()
    return _png(fig)


def _ok(rows: Sequence[Row]) -> list[Row]:
    return [r for r in rows if r.get("status") == "ok" and r.get("samples_per_s") is not None]


def history_png(rows: Sequence[Row], title: str) -> bytes:
    """Samples/s per trial in the order run, the best so far as a step line; OOM and pruned trials marked."""
    fig = Figure(figsize=(7, 3.6))
    ax = fig.subplots()
    ax.set_title(f"{title}: optimization history", fontsize=10)
    ran = sorted((r for r in rows if r.get("status") not in ("skipped", None)), key=lambda r: r["trial"])
    ok = _ok(ran)
    if not ok:
        return _empty(fig, ax, "no trial finished ok")
    ax.scatter([r["trial"] for r in ok], [r["samples_per_s"] for r in ok], s=16, color=_OK, label="ok")
    best, xs, ys = 0.0, [], []
    for r in ran:
        if r in ok:
            best = max(best, r["samples_per_s"])
        if best:
            xs.append(r["trial"])
            ys.append(best)
    ax.step(xs, ys, where="post", color=_BEST, label="best so far")
    for status, marker in (("oom", "x"), ("pruned", "v"), ("failed", "+"), ("timeout", "+")):
        marked = [r["trial"] for r in ran if r["status"] == status]
        if marked:
            ax.scatter(marked, [0] * len(marked), marker=marker, color=_OTHER, label=status)
    ax.set_xlabel("trial")
    ax.set_ylabel("samples/s")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8, loc="lower right")
    return _png(fig)


def importance_png(importances: Mapping[str, float] | None, title: str, why: str = "") -> bytes:
    """fANOVA importance of each varied knob for throughput (Optuna's default evaluator)."""
    fig = Figure(figsize=(6, 0.4 * max(len(importances or {}), 3) + 1.0))
    ax = fig.subplots()
    ax.set_title(f"{title}: parameter importance for samples/s", fontsize=10)
    if not importances:
        return _empty(fig, ax, why or "not computed")
    names = sorted(importances, key=lambda k: importances[k])
    ax.barh(names, [importances[k] for k in names], color=_OK)
    for i, k in enumerate(names):
        ax.annotate(f" {importances[k]:.2f}", (importances[k], i), va="center", fontsize=8)
    ax.set_xlabel("importance (fANOVA, sums to 1)")
    ax.set_xlim(0, 1.1)
    return _png(fig)


def pareto_front(rows: Sequence[Row]) -> list[Row]:
    """The ok rows no other ok row beats on both throughput (higher) and peak memory (lower)."""
    pts = [r for r in _ok(rows) if r.get("peak_memory_gb") is not None]
    front = []
    for r in pts:
        dominated = any(
            o["samples_per_s"] >= r["samples_per_s"] and o["peak_memory_gb"] <= r["peak_memory_gb"]
            and (o["samples_per_s"] > r["samples_per_s"] or o["peak_memory_gb"] < r["peak_memory_gb"])
            for o in pts
        )  # fmt: skip
        if not dominated:
            front.append(r)
    return sorted(front, key=lambda r: r["peak_memory_gb"])


def pareto_png(rows: Sequence[Row], title: str, recommended: int | None = None) -> bytes:
    """Throughput vs peak memory of every ok trial, the Pareto front joined, the recommendation circled."""
    from sweeps.recommend import describe_config

    fig = Figure(figsize=(7, 4.2))
    ax = fig.subplots()
    ax.set_title(f"{title}: throughput vs peak memory (Pareto front)", fontsize=10)
    pts = [r for r in _ok(rows) if r.get("peak_memory_gb") is not None]
    if not pts:
        return _empty(fig, ax, "no ok trial with a memory reading")
    ax.scatter([r["peak_memory_gb"] for r in pts], [r["samples_per_s"] for r in pts], s=14, color=_OTHER,
               label="trials")  # fmt: skip
    front = pareto_front(pts)
    ax.plot([r["peak_memory_gb"] for r in front], [r["samples_per_s"] for r in front], "o-", color=_FRONT, ms=4,
            label="Pareto front")  # fmt: skip
    for r in front[-4:]:  # the fastest end, where the choice is made; labelling all would overlap
        ax.annotate(describe_config(r), (r["peak_memory_gb"], r["samples_per_s"]), fontsize=6,
                    textcoords="offset points", xytext=(4, -8))  # fmt: skip
    chosen = [r for r in pts if recommended is not None and r.get("trial") == recommended]
    if chosen:
        ax.scatter([chosen[0]["peak_memory_gb"]], [chosen[0]["samples_per_s"]], s=120, facecolors="none",
                   edgecolors=_BEST, linewidths=2, label="recommended")  # fmt: skip
    ax.set_xlabel("peak memory (GB)")
    ax.set_ylabel("samples/s")
    ax.legend(fontsize=8, loc="lower right")
    return _png(fig)


def batch_png(rows: Sequence[Row], title: str) -> bytes:
    """Throughput and peak memory vs batch size, one line per worker count (the best over the other knobs)."""
    fig = Figure(figsize=(10, 3.8))
    left, right = fig.subplots(1, 2, gridspec_kw={"wspace": 0.3})
    fig.suptitle(f"{title}: throughput and memory vs batch size, per worker count", fontsize=10)
    ok = _ok(rows)
    if not ok:
        _empty(fig, right, "")
        return _empty(fig, left, "no trial finished ok")
    for w in sorted({r["num_workers"] for r in ok}):
        best: dict[int, Row] = {}
        for r in ok:
            if r["num_workers"] == w and (r["batch_size"] not in best or
                                          r["samples_per_s"] > best[r["batch_size"]]["samples_per_s"]):  # fmt: skip
                best[r["batch_size"]] = r
        sizes = sorted(best)
        left.plot(sizes, [best[b]["samples_per_s"] for b in sizes], "o-", ms=3, label=f"{w} workers")
        mem = [(b, best[b]["peak_memory_gb"]) for b in sizes if best[b].get("peak_memory_gb") is not None]
        right.plot([b for b, _ in mem], [m for _, m in mem], "o-", ms=3, label=f"{w} workers")
    ooms = sorted({r["batch_size"] for r in rows if r.get("status") == "oom"})
    ticks = sorted({r["batch_size"] for r in ok} | set(ooms))
    for ax, label in ((left, "samples/s (best over the other knobs)"), (right, "peak memory (GB) of that trial")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [str(b) for b in ticks])
        ax.minorticks_off()
        ax.set_xlabel("batch size")
        ax.set_ylabel(label)
        for b in ooms:
            ax.axvline(b, color=_OTHER, ls=":", lw=1)
        ax.legend(fontsize=7)
    if ooms:
        left.annotate("dotted: a batch size that ran out of memory", (0.01, 0.97), xycoords="axes fraction",
                      fontsize=7, va="top")  # fmt: skip
    return _png(fig)
