"""Two sweeps of the same job, in one line: each recommendation's re-measured throughput and their ratio.

    python scripts/sweep_compare.py OUT_A OUT_B [--label NAME] [--tolerance 0.05]
    python scripts/sweep_compare.py OUT_A OUT_B --same    # two workers on one study: one conclusion?

Reads each sweep's ``conclusion.json`` (``perflab sweep run --out DIR`` writes it). The figure compared is
the verification's fresh runs of the recommendation (mean and 95 % interval), or, without a verification,
the ranking's runs of its leader. The ratio is the larger mean over the smaller; within the tolerance
(5 %: the issue's target) the line says so. Exit status 0 when both sweeps concluded, 1 otherwise.
``--same``: whether the two report the same recommendation, re-measured figures and speedup (exit 1 if not).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def figure(out: Path) -> tuple[str, dict[str, Any] | None, str]:
    """(configuration, {mean, low, high, runs} or None, which runs) of one sweep's recommendation."""
    path = out / "conclusion.json"
    if not path.is_file():
        return "no conclusion.json (the sweep did not finish)", None, ""
    again = json.loads(path.read_text()).get("remeasured") or {}
    for key, what in (("verified", "verification runs"), ("ranking", "ranking runs")):
        if again.get(key):
            return again["configuration"], again[key], what
    return again.get("configuration", "nothing recommended"), None, ""


def _fmt(f: dict[str, Any] | None) -> str:
    if f is None:
        return "—"
    interval = f" [{f['low']:,.0f}, {f['high']:,.0f}]" if f.get("low") is not None else ""
    return f"{f['mean']:,.0f}{interval} ({len(f['runs'])} {'run' if len(f['runs']) == 1 else 'runs'})"


def line(a: Path, b: Path, label: str, tolerance: float) -> tuple[str, bool]:
    (ca, fa, wa), (cb, fb, wb) = figure(a), figure(b)
    head = f"{label}: {a.name} {ca} / {b.name} {cb}; re-measured samples/s {_fmt(fa)} / {_fmt(fb)}"
    if fa is None or fb is None:
        return f"{head}; no ratio", False
    ratio = max(fa["mean"], fb["mean"]) / min(fa["mean"], fb["mean"])
    verdict = "within" if ratio - 1 <= tolerance else "NOT within"
    runs = wa if wa == wb else f"{wa} / {wb}"
    return f"{head} ({runs}); ratio {ratio:.3f}: {verdict} {tolerance:.0%}", True


def same(a: Path, b: Path, label: str) -> tuple[str, bool]:
    """Two workers of one study: the same recommendation, re-measurements and verified speedup?"""
    keys = ("recommended", "remeasured", "speedup")
    found = [json.loads((d / "conclusion.json").read_text()) if (d / "conclusion.json").is_file() else None
             for d in (a, b)]  # fmt: skip
    if None in found:
        missing = " and ".join(str(d) for d, f in zip((a, b), found, strict=True) if f is None)
        return f"{label}: no conclusion.json in {missing}", False
    ca, cb = found
    differ = [k for k in keys if ca.get(k) != cb.get(k)]  # type: ignore[union-attr]
    config, (x, lo, hi) = (ca.get("remeasured") or {}).get("configuration"), ca.get("speedup") or (None,) * 3
    if differ:
        return f"{label}: DIFFERENT conclusions ({', '.join(differ)} differ): {config} / " + str(
            (cb.get("remeasured") or {}).get("configuration")), False  # fmt: skip
    speedup = f"{x:.2f}x [{lo:.2f}, {hi:.2f}]" if x is not None and lo is not None else "not verified"
    return f"{label}: the same conclusion in both — {config}, speedup {speedup}", True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument("--label", default="the same job swept twice")
    parser.add_argument("--tolerance", type=float, default=0.05)
    parser.add_argument("--same", action="store_true", help="two workers on one study: the same conclusion?")
    args = parser.parse_args(argv)
    text, ok = same(args.a, args.b, args.label) if args.same else line(args.a, args.b, args.label, args.tolerance)
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
