"""PNG charts for a suite report: speedups, a roofline, latency distributions.

Drawn on ``matplotlib.figure.Figure`` directly (the Agg canvas, no pyplot): no global backend
state, no display needed. Every function takes the report's plain data and returns PNG bytes.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

__all__ = ["latency_png", "roofline_png", "speedup_png"]

_COUNTED, _NOT_COUNTED, _BASE = "#2b6cb0", "#a0aec0", "#dd6b20"
_ROOF_COLORS = {"fp8": "#9f7aea", "bf16": "#2f855a", "fp16": "#38a169", "tf32": "#d69e2e", "fp32": "#c53030"}


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120, bbox_inches="tight")
    return buf.getvalue()


def speedup_png(rows: Sequence[Mapping[str, Any]], title: str) -> bytes:
    """One bar per optimized variant; grey hatched = shown but not counted (unverified / not ok)."""
    shown = [r for r in rows if r.get("speedup")]
    fig = Figure(figsize=(7, 0.45 * max(len(shown), 2) + 1.2))
    ax = fig.subplots()
    labels = [f"{r['chapter']}:{r['example']}" + ("" if r["variant"] == "optimized" else f" ({r['variant']})")
              for r in shown]  # fmt: skip
    values = [r["speedup"] for r in shown]
    bars = ax.barh(labels, values, color=[_COUNTED if r["counted"] else _NOT_COUNTED for r in shown])
    for bar, r in zip(bars, shown, strict=True):
        if not r["counted"]:
            bar.set_hatch("//")
        on = "" if r.get("speedup_on", "call") == "call" else f" on {r['speedup_on']}"  # a metric not the call's
        ax.annotate(f" {r['speedup']:.2f}×{on}" + ("" if r["counted"] else " (not counted)"),
                    (bar.get_width(), bar.get_y() + bar.get_height() / 2), va="center", fontsize=8)  # fmt: skip
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.invert_yaxis()
    ax.set_xlabel("speedup (> 1: optimized better; on the median call time unless a bar names another metric)")
    ax.set_xlim(0, max(values + [1.0]) * 1.25)
    ax.set_title(title if shown else f"{title}: no pair has a speedup", fontsize=10)
    return _png(fig)


def _roof(ax: Any, ceilings: Mapping[str, float], xs: Sequence[float]) -> None:
    """Ceilings as lines: memory roofs (AI × bandwidth) capped by each matmul peak."""
    import numpy as np

    lo, hi = min(xs + [0.1]) / 4, max(xs + [1000.0]) * 4
    ai = np.logspace(np.log10(lo), np.log10(hi), 200)
    copy = ceilings.get("copy_gbps")
    top = max((v for k, v in ceilings.items() if k.endswith("_tflops")), default=None)
    for name, bw, style in (("HBM copy", copy, "-"), ("L2", ceilings.get("l2_gbps"), ":")):
        if bw:
            roof = ai * bw / 1e3 if top is None else np.minimum(ai * bw / 1e3, top)
            ax.plot(ai, roof, "k" + style, linewidth=1, label=f"{name} {bw:,.0f} GB/s")
    for key, value in sorted(ceilings.items(), key=lambda kv: -kv[1]):
        if key.endswith("_tflops") and copy:
            dtype = key.removesuffix("_tflops")
            ridge = value * 1e3 / copy
            ax.plot([ridge, hi], [value, value], color=_ROOF_COLORS.get(dtype, "grey"), linewidth=1.2,
                    label=f"{dtype} {value:,.1f} TFLOP/s")  # fmt: skip


def roofline_png(rows: Sequence[Mapping[str, Any]], ceilings: Mapping[str, float] | None, hardware: str) -> bytes:
    """Left: roofline (log-log) of pairs that declare bytes and FLOPs, arrow baseline → optimized.
    Right, when some pairs declare bytes only (no intensity to place): achieved GB/s against the
    copy ceiling, arrow baseline → optimized."""
    both = [r for r in rows if r.get("optimized_intensity") and r.get("optimized_tflops")]
    bytes_only = [r for r in rows if r.get("optimized_gbps") and not r.get("optimized_tflops")]
    fig = Figure(figsize=(12 if bytes_only else 7, 5))
    axes = fig.subplots(1, 2 if bytes_only else 1, squeeze=False)[0]
    ax = axes[0]
    xs = [x for r in both for x in (r.get("baseline_intensity"), r["optimized_intensity"]) if x]
    if ceilings:
        _roof(ax, ceilings, xs)
    for r in both:
        label = f"{r['chapter']}:{r['example']}" + ("" if r["variant"] == "optimized" else f" ({r['variant']})")
        end = (r["optimized_intensity"], r["optimized_tflops"])
        if r.get("baseline_intensity") and r.get("baseline_tflops"):
            start = (r["baseline_intensity"], r["baseline_tflops"])
            ax.annotate("", end, start, arrowprops={"arrowstyle": "->", "color": "grey"})
            ax.plot(*start, "o", color=_BASE)
        ax.plot(*end, "*", color=_COUNTED if r["counted"] else _NOT_COUNTED, markersize=11)
        ax.annotate(label, end, textcoords="offset points", xytext=(6, -3), fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.grid(True, which="both", alpha=0.2)
    note = "" if ceilings else f"\nno ceilings cached for {hardware}: run `perflab peak` there"
    ax.set_title(f"Roofline — {hardware}{note}", fontsize=10)
    if not both:
        ax.text(0.5, 0.5, "no pair declares both bytes and FLOPs", transform=ax.transAxes, ha="center", fontsize=9)
    if ceilings:
        ax.legend(fontsize=7, loc="lower right")
    if bytes_only:
        _bandwidth(axes[1], bytes_only, ceilings or {})
    return _png(fig)


def _bandwidth(ax: Any, rows: Sequence[Mapping[str, Any]], ceilings: Mapping[str, float]) -> None:
    labels = [f"{r['chapter']}:{r['example']}" + ("" if r["variant"] == "optimized" else f" ({r['variant']})")
              for r in rows]  # fmt: skip
    for y, r in enumerate(rows):
        if r.get("baseline_gbps"):
            ax.annotate("", (r["optimized_gbps"], y), (r["baseline_gbps"], y),
                        arrowprops={"arrowstyle": "->", "color": "grey"})  # fmt: skip
            ax.plot(r["baseline_gbps"], y, "o", color=_BASE, label="baseline" if y == 0 else None)
        ax.plot(r["optimized_gbps"], y, "*", color=_COUNTED if r["counted"] else _NOT_COUNTED, markersize=11,
                label="optimized" if y == 0 else None)  # fmt: skip
        if r.get("optimized_pct_of_peak") is not None:
            ax.annotate(f" {r['optimized_pct_of_peak']:.0f} %", (r["optimized_gbps"], y), fontsize=8, va="bottom")
    for key, style in (("copy_gbps", "-"), ("l2_gbps", ":")):
        if ceilings.get(key):
            ax.axvline(ceilings[key], color="black", linestyle=style, linewidth=1,
                       label=f"{'HBM copy' if key == 'copy_gbps' else 'L2'} {ceilings[key]:,.0f} GB/s")  # fmt: skip
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(left=0)
    ax.set_xlabel("achieved GB/s (declared bytes / median)")
    ax.set_title("Memory-bound pairs (bytes declared, no FLOPs)", fontsize=10)
    ax.grid(True, axis="x", alpha=0.2)
    ax.legend(fontsize=7, loc="lower right")


def latency_png(samples: Mapping[str, Sequence[float]], title: str) -> bytes:
    """Box plot of the raw samples (ms) of every variant that has them, log scale (examples differ
    by orders of magnitude); the box is the IQR, the line the median, points beyond the whiskers
    are kept, as the raw samples are."""
    names = [n for n in sorted(samples) if samples[n]]
    fig = Figure(figsize=(8, 0.35 * max(len(names), 3) + 1.2))
    ax = fig.subplots()
    if names:
        ax.boxplot([list(samples[n]) for n in names], orientation="horizontal", tick_labels=names, widths=0.6,
                   flierprops={"markersize": 2, "alpha": 0.5})  # fmt: skip
        ax.set_xscale("log")
        # plain numbers (0.2, 0.5, 1, 2) instead of crowded 2×10⁻¹ minor labels
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if f"{v:.0e}"[0] in "25" else ""))
        ax.invert_yaxis()
        ax.tick_params(axis="y", labelsize=8)
    else:
        ax.text(0.5, 0.5, "no raw samples in this suite", transform=ax.transAxes, ha="center")
    ax.set_xlabel("time per call (ms, raw samples)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="x", which="both", alpha=0.2)
    return _png(fig)
