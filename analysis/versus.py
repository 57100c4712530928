"""Two suites compared pair by pair: ``perflab compare SUITE_A SUITE_B``.

Each pair both suites ran (``chapter:example:variant`` of the optimized variant) gets both speedups with their
intervals and whether they differ beyond noise. The test is on the log of the speedups. Each interval's width gives
its standard error: a pair in rounds (bench.measure.rounds) has a Student t interval over its R rounds' ratios,
R - 1 degrees of freedom at the level its stop reports (98 % stopped early, 96 % after all its rounds), its standard
error the half-width over that t quantile (read as normal, a 3-round pair's would be 3.5 times too large: 6.965 /
1.96); one child a side has a bootstrapped 95 % interval, the half-width over 1.96. B differs from A when
ln B − ln A ± t × √(se_A² + se_B²) lies beyond the harness's noise threshold (``BenchmarkConfig.noise_threshold``,
±1 %: two runs of the same code differ by a fraction of a percent, which is no verdict, as for a pair's own
speedup): Welch's 5 % two-sided test, t at the Welch–Satterthwaite degrees of freedom rounded down (1.96 where
neither side is in rounds); two intervals that merely overlap may still differ. The geomeans are taken over the same
pairs on both sides, those verified ``ok`` in both suites, and the line says how many: a geomean over 8 pairs
against one over 1 compares nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from bench.measure import NOISE_THRESHOLD, interval_level, t_quantile
from bench.record import StoredRun, campaign_of, read_run

__all__ = ["PairVersus", "SuiteVersus", "compare_suites", "difference", "versus_table"]

Z_95 = 1.959963984540054  # two-sided 95 % of the normal distribution


@dataclass(frozen=True)
class PairVersus:
    name: str  # chapter:example:variant
    a: dict[str, Any]  # the pair's row in suite A (analysis.report): speedup, interval, verdict, counted
    b: dict[str, Any]
    verdict: str  # B against A: "B faster", "B slower", "no significant difference", or why it cannot say

    @property
    def same_files(self) -> bool:
        """Both suites timed the same two files (their SHA-256 as found; the files they import not compared)."""
        a, b = self.a.get("source_sha256"), self.b.get("source_sha256")
        return bool(a and b and None not in a and list(a) == list(b))

    @property
    def verdict_text(self) -> str:
        """The verdict, marked ``(same files)`` where B differs from A on the same files: the host's difference."""
        differs = self.verdict in ("B faster", "B slower")
        return self.verdict + (" (same files)" if differs and self.same_files else "")


@dataclass(frozen=True)
class SuiteVersus:
    run_a: StoredRun
    run_b: StoredRun
    pairs: list[PairVersus]  # the pairs both suites ran
    only_a: list[str]  # pairs one suite ran and the other did not
    only_b: list[str]
    geomean_a: float | None  # over ``counted`` pairs only: verified ok in both suites
    geomean_b: float | None
    counted: int
    pairs_a: int  # all pairs of each suite
    pairs_b: int
    machines: list[str] = field(default_factory=list)  # analysis.deltas.RunComparison.machines
    campaigns: list[str] = field(default_factory=list)  # a sharded suite's parts found: "A: campaign ... 4 of 4"


def _log_se(row: dict[str, Any]) -> tuple[float, float, float] | None:
    """The standard error of ``row``'s log speedup, its degrees of freedom (inf: normal) and its interval's level,
    from its interval and its rounds (``rounds``: the ``perflab.rounds`` tag, "3 decided"); None without an
    interval."""
    low, high = row.get("speedup_ci_low"), row.get("speedup_ci_high")
    if low is None or high is None or low <= 0 or high <= 0:
        return None
    half = (math.log(high) - math.log(low)) / 2
    count, _, stop = str(row.get("rounds") or "").partition(" ")
    n = int(count) if count.isdigit() else 1
    if n < 2:
        return half / Z_95, math.inf, 0.95
    level = interval_level(stop or None)  # as bench.measure.rounds reports it
    return half / t_quantile(n - 1, (1 + level) / 2), float(n - 1), level


def _quantile(se: list[tuple[float, float, float]]) -> float:
    """The two-sided quantile of Welch's test of two log speedups with these (standard error, degrees of freedom,
    level): t at the Welch–Satterthwaite degrees of freedom, rounded down, at the higher of the two levels (rounds
    that stopped early are a selection of small spreads, as in a pair's own interval); 1.96 where both are normal."""
    spread = sum(e * e for e, _, _ in se)
    parts = sum(e**4 / df for e, df, _ in se if math.isfinite(df))
    if parts == 0.0 or spread == 0.0:
        return Z_95
    level = max(lv for *_, lv in se)
    return t_quantile(max(1, math.floor(spread * spread / parts)), (1 + level) / 2)


def difference(a: dict[str, Any], b: dict[str, Any], noise_threshold: float = NOISE_THRESHOLD) -> str:
    """B's speedup against A's: ``B faster`` / ``B slower`` when they differ beyond their intervals (the module's
    test), ``no significant difference``; else why no comparison can be made: a side not verified ``ok``
    (``A mismatch``, ``B failed``..., each side that is not), speedups on different metrics, or a side without an
    interval (``no interval on A``, ``on A, B``)."""
    uncounted = [f"{side} {row['verdict']}" for side, row in (("A", a), ("B", b)) if not row["counted"]]
    if uncounted:
        return ", ".join(uncounted)
    if a.get("speedup_on") != b.get("speedup_on"):
        return f"different metrics ({a.get('speedup_on')}, {b.get('speedup_on')})"
    se = [_log_se(a), _log_se(b)]
    if se[0] is None or se[1] is None:
        return "no interval on " + ", ".join(side for side, e in zip("AB", se, strict=True) if e is None)
    d, half = math.log(b["speedup"]) - math.log(a["speedup"]), _quantile(se) * math.hypot(se[0][0], se[1][0])
    band = math.log1p(noise_threshold)  # the interval of ln(B / A) must clear it, as a pair's own must clear 1 ± t
    return "B faster" if d - half > band else "B slower" if d + half < -band else "no significant difference"


def _rows(parent: StoredRun, runs: list[StoredRun]) -> dict[str, dict[str, Any]]:
    from analysis.report import build_report

    chapters = build_report(parent, runs)["chapters"]
    return {f"{x['chapter']}:{x['example']}:{x['variant']}": x for rows in chapters.values() for x in rows}


def _geomean(xs: list[float]) -> float | None:
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def compare_suites(run_a: str, run_b: str, tracking_uri: str | None = None) -> SuiteVersus:
    """Suites A and B pair by pair. ``LookupError`` for an unknown id, ``ValueError`` for a run that is not a
    suite's parent."""
    from analysis.deltas import machines

    parents = [read_run(r, tracking_uri) for r in (run_a, run_b)]
    for given, p in zip((run_a, run_b), parents, strict=True):
        if p.is_variant:
            raise ValueError(f"run {given!r} is the variant run {p.name!r}; compare two suites (their parent runs) "
                             "or two variant runs")  # fmt: skip
        p.check_suite(given)
    camps = [campaign_of(p, tracking_uri) for p in parents]  # a sharded suite read whole (bench.record.campaign)
    kids = [
        [r for r in p.check_variants(given, c.child_runs(tracking_uri)) if r.is_variant]
        for given, p, c in zip((run_a, run_b), parents, camps, strict=True)
    ]
    rows_a, rows_b = (_rows(p, k) for p, k in zip(parents, kids, strict=True))
    shared = sorted(rows_a.keys() & rows_b.keys())
    pairs = [PairVersus(n, rows_a[n], rows_b[n], difference(rows_a[n], rows_b[n])) for n in shared]
    both = [p for p in pairs if p.a["counted"] and p.b["counted"]]
    by_name = [{r.name: r for r in k} for k in kids]
    matched = sorted(by_name[0].keys() & by_name[1].keys())
    return SuiteVersus(
        parents[0], parents[1], pairs, sorted(rows_a.keys() - rows_b.keys()), sorted(rows_b.keys() - rows_a.keys()),
        _geomean([p.a["speedup"] for p in both]), _geomean([p.b["speedup"] for p in both]), len(both),
        len(rows_a), len(rows_b), machines([(by_name[0][n], by_name[1][n]) for n in matched]),
        [f"{side}: {line}" for side, c in zip("AB", camps, strict=True) if (line := c.line())],
    )  # fmt: skip


def _speedup(row: dict[str, Any]) -> str:
    from bench.record import sig

    if not row.get("speedup"):
        return "—"
    low, high = row.get("speedup_ci_low"), row.get("speedup_ci_high")
    # one word: a narrow column wraps it whole below the speedup, never "[2.13," above "4.08]"
    interval = f" [{sig(low)}–{sig(high)}]" if low is not None and high is not None else ""
    return f"{sig(row['speedup'])}×{interval}"


def _on(p: PairVersus) -> str:
    """What the pair's speedups are on (``call``, ``TPOT``, ``tokens/s``), both sides' where they differ."""
    sides = [row.get("speedup_on") or "call" for row in (p.a, p.b) if row.get("speedup")] or ["call"]
    return sides[0] if len(set(sides)) == 1 else ", ".join(sides)


def versus_table(cmp: SuiteVersus, width: int) -> Any:
    """The suites' names on a line, then a rich table: a row per pair both suites ran, each side's speedup with its
    interval, and B against A; names never cut (a long one wraps), at ``width`` columns."""
    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from bench.cli import fitted, name_lines

    chapters = {p.name.split(":", 1)[0] for p in cmp.pairs}
    prefix = f"{chapters.pop()}:" if len(chapters) == 1 else ""
    headers = ["pair", "A speedup", "B speedup", "B vs A"]
    rows = [[p.name.removeprefix(prefix).removesuffix(":optimized"), _speedup(p.a), _speedup(p.b), p.verdict_text]
            for p in cmp.pairs]  # fmt: skip
    ons = [_on(p) for p in cmp.pairs]  # what each speedup is on, where one is not the call time (as perflab run's)
    if any(on != "call" for on in ons):
        headers.insert(1, "on")
        rows = [[r[0], on, *r[1:]] for r, on in zip(rows, ons, strict=True)]
    shift = len(headers) - 4
    widths = fitted(headers, rows, width, narrow={1 + shift: 12, 2 + shift: 12, 3 + shift: 14})
    title = f"{prefix and prefix + ' '}B {cmp.run_b.name or cmp.run_b.run_id} vs A {cmp.run_a.name or cmp.run_a.run_id}"
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for i, header in enumerate(headers):
        right = header in ("A speedup", "B speedup")
        table.add_column(header, justify="right" if right else "left", overflow="fold", width=widths[i])
    colour = {"B faster": "green", "B slower": "red"}
    for row, p in zip(rows, cmp.pairs, strict=True):
        table.add_row(
            Text(name_lines(row[0], widths[0])), *map(Text, row[1:-1]), Text(row[-1], colour.get(p.verdict, "yellow"))
        )
    return Group(Text(title), table)  # the title wraps at the console's width, not at the narrower table's


def summary_lines(cmp: SuiteVersus) -> list[str]:
    """What the table leaves out: the geomeans over the shared pairs (and how many), the pairs one suite lacks."""
    verdicts = [p.verdict for p in cmp.pairs]
    counts = ", ".join(f"{verdicts.count(v)} {v}" for v in dict.fromkeys(verdicts))
    lines = [*cmp.campaigns, f"{len(cmp.pairs)} pair(s) in both suites (A has {cmp.pairs_a}, B {cmp.pairs_b})"
             + (f": {counts}" if counts else "")]  # fmt: skip
    if cmp.run_a.run_id == cmp.run_b.run_id:
        lines.append(f"A and B are the same run ({cmp.run_a.run_id}): nothing is compared")
    commits = [(r.tags.get("perflab.git_commit") or "unknown") + (" (dirty tree)" * (r.tags.get("perflab.git_dirty")
               == "true")) for r in (cmp.run_a, cmp.run_b)]  # fmt: skip
    if cmp.run_a.run_id != cmp.run_b.run_id:  # what changed between the suites, where the store knows it
        lines.append(f"both at commit {commits[0]}" if commits[0] == commits[1] else
                     f"commits: A {commits[0]}, B {commits[1]}")  # fmt: skip
    same = [p for p in cmp.pairs if p.verdict_text != p.verdict]
    if same:
        lines.append(f"{len(same)} of them timed the same files in both suites (imports not compared): a difference "
                     "between runs of the same code is the host's, not the code's; measure a change in one suite, "
                     "where its rounds alternate the sides")  # fmt: skip
    if cmp.counted:
        a, b = cmp.geomean_a or 0.0, cmp.geomean_b or 0.0
        lines.append(f"geomean speedup over the {cmp.counted} pair(s) verified ok in both suites: A {a:.3f}×, "
                     f"B {b:.3f}× (pairs in one suite only are left out)")  # fmt: skip
    else:
        lines.append("no pair is verified ok in both suites: no geomean to compare")
    for side, names in (("A", cmp.only_a), ("B", cmp.only_b)):
        if names:
            lines.append(f"pairs only in {side}: " + ", ".join(n.removesuffix(":optimized") for n in names))
    return lines
