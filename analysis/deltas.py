"""Metric deltas between two MLflow runs: two variant runs, or two suites matched variant by name.

Direction comes from the metric's name: times, memory, energy per call (or per FLOP, byte, token) and anything
in ms are lower-is-better; speedup, achieved throughput, a generation's tokens/s and requests/s, percentages of peak
and the energy ratio are higher-is-better. Other metrics (sample
counts, stage durations of the harness) have no better side and are shown only on request.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from bench.measure import NOISE_THRESHOLD
from bench.record import StoredRun, campaign_of, read_run

__all__ = ["MetricDelta", "RunComparison", "compare_runs", "compare_table", "direction", "machines"]

Direction = Literal["lower", "higher"]
# A change within the harness's noise threshold (±1 %: two processes of the same code differ by a fraction of a
# percent; bench.define.config) is "same", not better or worse: a metric here is one reading a side, no interval.
SAME_PCT = 100 * NOISE_THRESHOLD
Verdict = Literal["better", "worse", "same"]


def direction(metric: str) -> Direction | None:
    """Which way is better for a metric name, or None when neither is."""
    if metric.startswith(("speedup", "achieved_", "pct_", "energy_ratio")):  # speedup, speedup_geomean (a suite's)
        return "higher"
    if metric in ("tokens_per_s", "requests_per_s"):  # a generation's throughput: a tokens/s pair's speedup is on it
        return "higher"
    if metric == "energy_step_ms":  # the energy counter's step period: the GPU's, not the variant's
        return None
    if metric.startswith(("time_", "mem_", "energy_per_", "energy_pj_")) or metric.endswith("_ms"):
        return "lower"
    return None


@dataclass(frozen=True)
class MetricDelta:
    name: str  # the run name (chapter:example:variant) or "suite" for the parents' own metrics
    metric: str
    a: float
    b: float
    direction: Direction | None

    @property
    def delta(self) -> float:
        return self.b - self.a

    @property
    def delta_pct(self) -> float | None:
        return None if self.a == 0 else 100.0 * (self.b - self.a) / abs(self.a)

    @property
    def verdict(self) -> Verdict | None:
        """B relative to A: ``better`` when B moved the good way."""
        if self.direction is None:
            return None
        pct = self.delta_pct
        if self.b == self.a or (pct is not None and abs(pct) < SAME_PCT):
            return "same"
        return "better" if (self.b < self.a) == (self.direction == "lower") else "worse"


@dataclass(frozen=True)
class RunComparison:
    run_a: StoredRun
    run_b: StoredRun
    deltas: list[MetricDelta]
    only_a: list[str]  # variant names present in one suite and not in the other
    only_b: list[str]
    # Matched runs measured on different machines (``analysis.regression.machine``): "A's machine → B's (n runs)";
    # their deltas include the machines' difference, not only the code's.
    machines: list[str] = field(default_factory=list)
    campaigns: list[str] = field(default_factory=list)  # "A: campaign …: 3 of 4 parts; missing: 2/4", of a sharded side
    notes: list[str] = field(default_factory=list)  # what was left out, and why


def _deltas(name: str, a: StoredRun, b: StoredRun, all_metrics: bool) -> list[MetricDelta]:
    out = []
    for metric in sorted(a.metrics.keys() & b.metrics.keys()):
        d = direction(metric)
        if d is not None or all_metrics:
            out.append(MetricDelta(name, metric, a.metrics[metric], b.metrics[metric], d))
    return out


def compare_runs(run_a: str, run_b: str, tracking_uri: str | None = None, all_metrics: bool = False) -> RunComparison:
    """Deltas B − A. ``LookupError`` for an unknown id; ``ValueError`` for a variant vs a suite."""
    a, b = read_run(run_a, tracking_uri), read_run(run_b, tracking_uri)
    if a.is_variant != b.is_variant:
        kinds = {True: "variant run", False: "suite (parent) run"}
        raise ValueError(
            f"cannot compare a {kinds[a.is_variant]} ({run_a!r}) with a {kinds[b.is_variant]} ({run_b!r}); "
            "pass two variant runs or two suite runs"
        )
    if a.is_variant:
        notes = [f"A and B are different variants: A {a.name}, B {b.name} (rows are named for A)"] \
            if a.name != b.name else []  # fmt: skip
        return RunComparison(a, b, _deltas(a.name, a, b, all_metrics), [], [], machines([(a, b)]), notes=notes)
    camp_a, camp_b = campaign_of(a, tracking_uri), campaign_of(b, tracking_uri)
    kids_a = {r.name: r for r in a.check_variants(run_a, camp_a.child_runs(tracking_uri))}
    kids_b = {r.name: r for r in b.check_variants(run_b, camp_b.child_runs(tracking_uri))}
    campaigns = [f"{side}: {line}" for side, c in (("A", camp_a), ("B", camp_b)) if (line := c.line())]
    deltas = _deltas("suite", a, b, all_metrics)
    notes = []
    if any(not n.endswith(":baseline") for n in kids_a.keys() ^ kids_b.keys()):  # geomeans over other pairs
        deltas = [d for d in deltas if not d.metric.startswith("speedup")]
        notes.append("the suites' geomean speedups are left out: they ran different pairs (perflab compare without "
                     "--metrics takes both over the pairs they share)")  # fmt: skip
    matched = sorted(kids_a.keys() & kids_b.keys())
    for name in matched:
        deltas += _deltas(name, kids_a[name], kids_b[name], all_metrics)
    only_a, only_b = sorted(kids_a.keys() - kids_b.keys()), sorted(kids_b.keys() - kids_a.keys())
    moved = machines([(kids_a[n], kids_b[n]) for n in matched])
    return RunComparison(a, b, deltas, only_a, only_b, moved, campaigns, notes)


def machines(pairs: list[tuple[StoredRun, StoredRun]]) -> list[str]:
    """The different machines among the matched runs: "A's machine → B's (n runs)" of them."""
    from analysis.regression import machine

    moved = Counter((machine(a), machine(b)) for a, b in pairs if machine(a) != machine(b))
    return [f"{ma} → {mb} ({n} run{'s' if n > 1 else ''})" for (ma, mb), n in sorted(moved.items())]


def compare_table(cmp: RunComparison) -> Any:
    """The runs' names on a line, then a rich table of the deltas, grouped by run: the run's name on a line of its
    own (a suite's variants without their chapter when they share one), then one row per metric, its name whole;
    ``B vs A`` says whether B is better or worse. The metrics carry their units in their names (``time_median_ms``)."""
    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    names = {d.name for d in cmp.deltas if d.name != "suite"}
    chapters = {n.split(":", 1)[0] for n in names}
    prefix = f"{chapters.pop()}:" if len(chapters) == 1 else ""
    title = f"{prefix and prefix + ' '}B {cmp.run_b.name or cmp.run_b.run_id} vs A {cmp.run_a.name or cmp.run_a.run_id}"
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("run / metric", overflow="fold")
    for col in ("A", "B", "Δ %"):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("B vs A", no_wrap=True)
    style = {"better": Text("better", "green"), "worse": Text("worse", "red"), "same": Text("same"), None: Text("")}
    group = None
    for d in cmp.deltas:
        if d.name != group:
            group = d.name
            table.add_row(Text(d.name.removeprefix(prefix), "bold"), end_section=False)
        pct = d.delta_pct
        table.add_row(
            Text(f"  {d.metric}"), f"{d.a:.4g}", f"{d.b:.4g}", "—" if pct is None else f"{pct:+.1f}", style[d.verdict]
        )
    return Group(Text(title), table)  # the title wraps at the console's width, not at the narrower table's
