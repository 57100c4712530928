"""bench/record/summary.py: only verified, successful pairs count as speedups; failures are listed."""

from __future__ import annotations

import math

import pytest

from bench.define.result import (
    Comparison,
    ErrorInfo,
    Profile,
    StageRecord,
    SuiteResult,
    Timing,
    VariantResult,
    VariantSpec,
    Verification,
)
from bench.measure.stats import summarize
from bench.record.summary import stage_line, summary_dict, summary_markdown


def vr(example: str, variant: str, median: float | None, status: str = "ok", error: str | None = None) -> VariantResult:
    timing = None
    if median is not None:
        timing = Timing(mode="cpu", method="test", samples_ms=[median], stats=summarize([median]))
    return VariantResult(
        spec=VariantSpec(chapter="ch07", example=example, variant=variant, path=f"/x/{variant}_{example}.py"),
        status=status,  # type: ignore[arg-type]
        failed_stage=None if status == "ok" else "measurement",
        timing=timing,
        error=ErrorInfo(kind="exception", message=error) if error else None,
        device="cpu",
    )


def cmp(example: str, speedup: float | None, status: str, verified: bool) -> Comparison:
    return Comparison(
        chapter="ch07",
        example=example,
        variant="optimized",
        baseline_status="ok",
        optimized_status="ok" if status != "failed" else "timeout",
        speedup=speedup,
        status=status,  # type: ignore[arg-type]
        verification=Verification(verified=verified, detail=f"{example}: {status}"),
    )


@pytest.fixture
def suite() -> SuiteResult:
    examples = {"a": (4.0, "ok", True), "b": (9.0, "ok", True), "c": (100.0, "mismatch", False),
                "d": (50.0, "unverified", False), "e": (None, "failed", False)}  # fmt: skip
    variants, comparisons = [], []
    for ex, (speedup, status, verified) in examples.items():
        variants.append(vr(ex, "baseline", 1.0))
        if status == "failed":
            variants.append(vr(ex, "optimized", None, "timeout", "stage 'measurement' exceeded | its limit"))
        else:
            variants.append(vr(ex, "optimized", 1.0 / speedup))  # type: ignore[operator]
        comparisons.append(cmp(ex, speedup, status, verified))
    return SuiteResult(variants=variants, comparisons=comparisons, unpaired=["ch07:solo"], wall_s=3.0)


def test_geomean_counts_verified_ok_pairs_only(suite: SuiteResult) -> None:
    s = summary_dict(suite)
    assert s["geomean_speedup_verified"] == pytest.approx(math.sqrt(4.0 * 9.0))  # not 100× or 50×
    assert (s["n_pairs"], s["n_pairs_verified"]) == (5, 2)
    assert (s["n_variants"], s["n_variants_ok"]) == (10, 9)
    assert s["unpaired_baselines"] == ["ch07:solo"]


def test_markdown_geomean_reads_as_the_rows_speedups_do(suite: SuiteResult) -> None:
    # a suite of slow pairs (ch19 on a CPU: 0.000430×, 0.00101×, ...) has a geomean far below 0.01: no "0.00×"
    s = summary_dict(suite)
    s["geomean_speedup_verified"] = 0.0037628904889241486
    assert "geomean speedup of verified pairs: 0.00376×," in summary_markdown(s)
    s["geomean_speedup_verified"] = 2.2431
    assert "geomean speedup of verified pairs: 2.24×," in summary_markdown(s)


def test_no_verified_pair_means_no_geomean(suite: SuiteResult) -> None:
    suite.comparisons = [c for c in suite.comparisons if c.status != "ok"]
    assert summary_dict(suite)["geomean_speedup_verified"] is None


def test_markdown_gives_each_pair_its_verdict_and_lists_failures(suite: SuiteResult) -> None:
    md = summary_markdown(summary_dict(suite))
    verdict = {line.split("|")[1].strip(): line.split("|")[6].strip() for line in md.splitlines()
               if line.startswith("| ch07:") and line.count("|") == 8}  # fmt: skip
    assert verdict["ch07:c"] == "mismatch" and verdict["ch07:d"] == "unverified" and verdict["ch07:e"] == "failed"
    assert verdict["ch07:a"] == "no interval"  # a speedup above 1 without an interval is no success either
    assert "## Variants not ok" in md
    failure = next(line for line in md.splitlines() if line.startswith("| ch07:e:optimized"))
    assert "timeout" in failure and "exceeded \\| its limit" in failure  # the table is not broken
    assert "Baselines without an optimized partner: ch07:solo" in md


def test_slower_and_not_significant_pairs_are_shown_as_such_and_never_counted_faster(suite: SuiteResult) -> None:
    # a: 4x with an interval above 1; b: 0.8x below 1 (verified all the same); d: an interval holding 1
    suite.comparisons[0] = suite.comparisons[0].model_copy(
        update={"speedup_ci_low": 3.5, "speedup_ci_high": 4.5, "significance": "faster"}
    )
    suite.comparisons[1] = suite.comparisons[1].model_copy(
        update={"speedup": 0.8, "speedup_ci_low": 0.7, "speedup_ci_high": 0.9, "significance": "slower"}
    )
    suite.comparisons[3] = suite.comparisons[3].model_copy(
        update={
            "status": "ok",
            "verification": Verification(verified=True, detail="match"),
            "speedup": 1.02,
            "speedup_ci_low": 0.95,
            "speedup_ci_high": 1.1,
            "significance": "no significant difference",
        }
    )
    s = summary_dict(suite)
    assert (s["n_pairs_faster"], s["n_pairs_slower"], s["n_pairs_no_difference"]) == (1, 1, 1)
    assert [p["verdict"] for p in s["pairs"]] == ["faster", "slower", "mismatch", "no significant difference",
                                                  "failed"]  # fmt: skip
    md = summary_markdown(s)
    assert "1 faster, 1 slower, 1 no significant difference" in md
    row = next(line for line in md.splitlines() if line.startswith("| ch07:b "))
    assert "0.80× [0.70, 0.90] | slower |" in row


def test_markdown_times_share_a_unit_chosen_from_the_column(suite: SuiteResult) -> None:
    md = summary_markdown(summary_dict(suite))  # medians 1 ms (baselines) down to 10 µs (c's optimized)
    assert "| baseline median ms | optimized median ms |" in md
    fast = [v.model_copy(update={"timing": v.timing.model_copy(update={"stats": summarize([0.004])})})
            if v.timing else v for v in suite.variants]  # fmt: skip
    suite.variants = fast
    for i, c in enumerate(suite.comparisons):
        suite.comparisons[i] = c.model_copy(update={"baseline_median_ms": 0.004, "optimized_median_ms": 0.002})
    md = summary_markdown(summary_dict(suite))
    assert "| baseline median µs | optimized median µs |" in md and "| 4.00 | 2.00 |" in md


def test_speedup_text_names_a_pair_that_is_not_faster() -> None:
    from bench.record.summary import speedup_text

    slower = {"status": "ok", "speedup": 0.8, "speedup_ci_low": 0.7, "speedup_ci_high": 0.9, "significance": "slower"}
    same = {**slower, "speedup": 1.01, "speedup_ci_low": 0.95, "speedup_ci_high": 1.07,
            "significance": "no significant difference"}  # fmt: skip
    assert speedup_text(slower) == "0.80× [0.70, 0.90] slower"  # what README and report tables show
    assert speedup_text(same).endswith(" no significant difference")
    assert speedup_text({"status": "ok", "speedup": 0.9}) == "0.90× slower"  # no interval: below 1 all the same
    assert speedup_text(slower, verdict=False) == "0.80× [0.70, 0.90]"  # beside a verdict column


def test_a_pair_within_the_noise_threshold_says_so_and_counts_as_no_difference(suite: SuiteResult) -> None:
    """An interval that excludes 1.0 but lies within the noise threshold: the verdict stays "no significant
    difference" (counted so), and the tables say why."""
    from bench.record.summary import speedup_text, verdict_text

    suite.comparisons[0] = suite.comparisons[0].model_copy(update={
        "speedup": 0.9998, "speedup_ci_low": 0.9997, "speedup_ci_high": 0.9998, "noise_threshold": 0.01,
        "significance": "no significant difference"})  # fmt: skip
    s = summary_dict(suite)
    pair = s["pairs"][0]
    assert pair["verdict"] == "no significant difference" and s["n_pairs_no_difference"] == 1
    assert verdict_text(pair) == "no significant difference (within ±1 % noise threshold)"
    assert "| no significant difference (within ±1 % noise threshold) |" in summary_markdown(s)
    assert speedup_text(pair).endswith("[1.00, 1.00] no significant difference (within ±1 % noise threshold)")
    from_mlflow = {k: pair[k] for k in ("status", "speedup", "speedup_ci_low", "speedup_ci_high", "significance")}
    assert verdict_text(from_mlflow) == "no significant difference (within noise threshold)"  # no threshold known
    edge = {**pair, "speedup": 1.29, "speedup_ci_low": 1.006, "speedup_ci_high": 1.64}  # past 1.0, not the band
    assert verdict_text(edge) == "no significant difference (reaching into ±1 % noise threshold)"
    holds = {**pair, "speedup_ci_low": 0.99, "speedup_ci_high": 1.01}
    assert verdict_text(holds) == "no significant difference"  # holding 1.0: nothing to explain


def test_the_counts_account_for_every_pair(suite: SuiteResult) -> None:
    """Every pair is counted under its verdict, so the counts add up to the pairs: the line never reads as if
    the pairs it leaves out did not exist."""
    import re

    from bench.record.summary import VERDICTS, counts_text

    s = summary_dict(suite)
    text = counts_text(s)
    assert text == "5 pairs: 2 no interval, 1 mismatch, 1 unverified, 1 failed"
    counted = {v: int(n) for n, v in re.findall(r"(\d+) ([a-z ]+?)(?:,|$)", text.split(": ", 1)[1])}
    assert sum(counted.values()) == s["n_pairs"] and set(counted) <= set(VERDICTS)
    assert text in summary_markdown(s)


def test_a_speedup_on_another_metric_names_it_beside_its_two_values(suite: SuiteResult) -> None:
    """A pair compared on TTFT: the table names the metric and shows the TTFTs the speedup divides; each side's
    median call time stays in its own columns (ch16's scheduling read 1541 ms -> 2741 ms, 3.10x faster)."""
    ttft = suite.comparisons[0].model_copy(update={
        "speedup_metric": "ttft", "baseline_median_ms": 1541.0, "optimized_median_ms": 2741.0,
        "baseline_value": 350.0, "optimized_value": 113.0, "speedup": 350.0 / 113.0,
    })  # fmt: skip
    suite.comparisons[0] = ttft
    md = summary_markdown(summary_dict(suite))
    header = next(line for line in md.splitlines() if line.startswith("| example"))
    assert "| speedup on | baseline | optimized |" in header
    row = next(line for line in md.splitlines() if line.startswith("| ch07:a "))
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert cells[2:7] == ["1.54", "2.74", "TTFT", "350 ms", "113 ms"] and cells[7].startswith("3.10×")
    other = next(line for line in md.splitlines() if line.startswith("| ch07:b "))
    assert [c.strip() for c in other.split("|")[1:-1]][4] == "call"  # on the call time itself, said so
    plain = summary_markdown(summary_dict(suite.model_copy(update={"comparisons": suite.comparisons[1:]})))
    assert "speedup on" not in plain  # every pair on the median call: the table as it always was


def test_every_verdict_a_table_can_print_is_explained_in_the_readme() -> None:
    """pair_verdict over every pair status, speedup and significance gives only VERDICTS, and README.md's table
    under "Reading the results" explains each one."""
    from pathlib import Path
    from typing import get_args

    from bench.define.result import Comparison as C
    from bench.define.result import PairStatus
    from bench.record.summary import VERDICTS, pair_verdict

    seen = set()
    for status in get_args(PairStatus):
        for speedup in (None, 0.8, 1.2):
            for significance in (None, *get_args(get_args(C.model_fields["significance"].annotation)[0])):
                seen.add(pair_verdict({"status": status, "speedup": speedup, "significance": significance}))
    seen.discard(None)
    assert seen == set(VERDICTS)
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    section = readme.split("## Reading the results", 1)[1].split("\n## ", 1)[0]
    for verdict in VERDICTS:
        assert f"| `{verdict}` |" in section, verdict


def test_the_readme_says_the_rounds_column_gives_the_rounds_kept() -> None:
    """The README said the rounds column gives "how many ran"; it gives the rounds the speedup was taken over, those
    left out named after them: 8 rounds run, round 1 left out, read "7 max_rounds, round 1 left out: host busy"."""
    from pathlib import Path

    from bench.record.summary import rounds_text

    readme = " ".join((Path(__file__).resolve().parents[3] / "README.md").read_text().split())
    assert "how many ran" not in readme
    assert f"`{rounds_text('7 max_rounds', '1', 2.0)}` is 8 rounds run, 7 kept" in readme
    assert "`8 max_rounds, round 1 left out" not in readme  # a count no pair of 8 rounds with one left out shows


def _stages(**seconds: float) -> list[StageRecord]:
    return [StageRecord(name=name, status="ok", duration_s=s) for name, s in seconds.items()]


def test_where_the_time_went_sums_each_part_over_the_variants(suite: SuiteResult) -> None:
    """Each part sums the children's stages it names, the parent's output comparisons (checks), the profile
    children (profile) and the logging; a chapter's own split beside the suite's."""
    for v in suite.variants:
        v.stages = _stages(startup=1.0, setup=2.0, warmup=0.5, measurement=3.0, check=0.25, recheck=0.25, batch=0.5,
                           teardown=0.125)  # fmt: skip
        v.stages.append(StageRecord(name="energy", status="not_reached"))  # not reached: no time
    suite.variants[0].profile = Profile(wall_s=7.0)
    suite.variants[-1].stages[3] = StageRecord(name="measurement", status="timeout", duration_s=13.0)  # cut: counted
    suite.variants[-2:] = [v.model_copy(update={"spec": v.spec.model_copy(update={"chapter": "ch08"})})
                           for v in suite.variants[-2:]]  # fmt: skip
    suite.comparisons[-1] = suite.comparisons[-1].model_copy(update={"chapter": "ch08"})
    suite.timeline = [{"key": v.spec.key, "worker": 0, "start_s": 0.0, "run_s": 1.0, "compare_s": 0.5, "other_s": 0.0,
                       "end_s": 1.0} for v in suite.variants if not v.spec.is_baseline]  # fmt: skip
    s = summary_dict(suite, logging_s=1.5)
    assert s["stages_s"] == pytest.approx({"start": 10.0, "setup": 20.0, "warmup": 5.0, "measurement": 40.0,
                                           "checks": 5.0 + 2.5, "batch": 5.0, "energy": 0.0, "profile": 7.0,
                                           "teardown": 1.25, "logging": 1.5})  # fmt: skip
    assert s["stages_s_by_chapter"]["ch08"]["measurement"] == pytest.approx(3.0 + 13.0)
    assert s["stages_s_by_chapter"]["ch07"]["profile"] == pytest.approx(7.0)
    assert stage_line(s["stages_s"], 10) == (
        "stages (summed over 10 variants): start 10.0 s, set-up 20.0 s, warm-up 5.0 s, measurement 40.0 s, "
        "checks 7.5 s, batch 5.0 s, profile 7.0 s, teardown 1.2 s, logging 1.5 s; most: measurement"
    )  # energy took no time: not shown
    md = summary_markdown(s)
    assert "## Where the time went" in md and "logging 1.5 s" in md
    assert "| ch08 | 2.0 | 4.0 | 1.0 | 16.0 | 1.5 | 1.0 | 0.0 | 0.2 |" in md
    assert "| all | 10.0 | 20.0 | 5.0 | 40.0 | 7.5 | 5.0 | 7.0 | 1.2 |" in md


def test_a_quality_verdict_names_its_score_beside_the_times(suite: SuiteResult) -> None:
    """A pair compared on a score it reports (bench.measure.quality): the table says "quality" and shows the two
    mean scores, each side's median call time in its own columns (equal time is read off them)."""
    scored = suite.comparisons[0].model_copy(update={
        "speedup_metric": "quality", "baseline_median_ms": 2.0, "optimized_median_ms": 2.02,
        "baseline_value": 0.6, "optimized_value": 0.75, "speedup": 1.25,
    })  # fmt: skip
    suite.comparisons[0] = scored
    md = summary_markdown(summary_dict(suite))
    row = next(line for line in md.splitlines() if line.startswith("| ch07:a "))
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert cells[2:7] == ["2.00", "2.02", "quality", "0.600", "0.750"] and cells[7].startswith("1.25×")


def test_a_pair_in_rounds_has_its_rounds_in_the_summary(suite: SuiteResult) -> None:
    """The parent run's summary.md (and ``--out``'s) had no rounds where ``perflab run``'s table and line had them:
    how many, why they stopped, and the rounds a busy host left out of the speedup."""
    suite.comparisons[0] = suite.comparisons[0].model_copy(update={
        "round_speedups": [2.0] * 7, "rounds_stop": "max_rounds", "rounds_left_out": [1, 4]})  # fmt: skip
    md = summary_markdown(summary_dict(suite))
    header = next(line for line in md.splitlines() if line.startswith("| example"))
    row = next(line for line in md.splitlines() if line.startswith("| ch07:a "))
    assert header.endswith("| rounds |") and row.endswith("| 7 max_rounds, rounds 1, 4 left out: host busy |"), row
    plain = summary_markdown(summary_dict(suite.model_copy(update={"comparisons": suite.comparisons[1:]})))
    assert "rounds" not in plain  # no pair in rounds: the table as it was


def _cells(row: str) -> list[str]:
    """A GitHub-flavoured Markdown table row's cells: split at each pipe no backslash escapes (``\\`` escapes too)."""
    cells, cell, chars = [], "", iter(row.strip().strip("|"))
    for ch in chars:
        if ch == "\\":
            cell += ch + next(chars, "")
        elif ch == "|":
            cells, cell = [*cells, cell], ""
        else:
            cell += ch
    return [*cells, cell]


def test_an_error_of_any_text_keeps_the_markdown_table_and_list_whole(suite: SuiteResult) -> None:
    # A GitHub step summary: a backslash before a pipe ended its cell, a newline in a verification note broke its
    # list item, "<xml>" vanished as an HTML tag, "__init__" turned bold, and a terminal's colours came along.
    nasty = "C:\\dir\\| x | y\nsecond <xml> __init__ \x1b[31mred\x1b[0m\x00 " + "z" * 400
    suite.variants[-1] = suite.variants[-1].model_copy(update={"error": ErrorInfo(kind="exception", message=nasty)})
    suite.comparisons[2].verification.detail = "differs |\nat <index> 3\n\n# not a heading"
    md = summary_markdown(summary_dict(suite))
    row = next(line for line in md.splitlines() if line.startswith("| ch07:e:optimized |"))
    cells = _cells(row)
    assert len(cells) == 4, cells  # variant, status, stage, error
    assert cells[3].startswith(r" C:\\dir\\\| x \| y second \<xml\> \_\_init\_\_ red z"), cells[3]
    assert len(cells[3]) < 300 and "\x1b" not in md and "\x00" not in md
    notes = md.split("## Verification notes")[1].split("\n\n")[1].splitlines()
    assert notes[0] == r"- ch07:c optimized: differs \| at \<index\> 3 # not a heading", notes
