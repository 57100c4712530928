"""analysis/regression.py: the decision rule on raw samples, then whole histories read from MLflow."""

from __future__ import annotations

from typing import Any

import pytest
from scipy.stats import mannwhitneyu
from typer.testing import CliRunner

import analysis.cli
from analysis.regression import assess, check_run, check_suite
from bench.record import read_run
from perflab import cli
from tests.analysis.synthetic import A100, H100, Store, draw, log_suite, result

EXP = "regress"


# ------------------------------------------------------------------------------ the rule on runs


def runs(medians: list[float], seed: int, sigma: float = 0.02) -> list[list[float]]:
    """One list of samples per previous run, around each run's own median."""
    return [draw(m, seed=seed + i, sigma=sigma) for i, m in enumerate(medians)]


STEADY = [1.0, 1.004, 0.997, 1.002, 0.999]  # five previous runs of a quiet GPU: medians within 0.5 %
BUSY = [0.85, 1.1, 0.9, 1.15, 0.95]  # five previous runs of one variant on a busy CPU: medians ±15 %


@pytest.mark.parametrize("seed", range(10))
def test_real_seven_percent_regression_is_flagged(seed: int) -> None:
    verdict = assess(draw(1.07, seed=seed), runs(STEADY, seed=1000 + 10 * seed))
    assert verdict.status == "regressed"
    assert 5.0 < verdict.slowdown_pct < 9.0
    assert verdict.p_value < 0.01


@pytest.mark.parametrize("seed", range(20))
def test_noise_with_the_same_median_is_not_flagged(seed: int) -> None:
    verdict = assess(draw(1.0, seed=seed), runs(STEADY, seed=1000 + 10 * seed))
    assert verdict.status == "ok"
    assert abs(verdict.slowdown_pct) < 5.0


def test_a_busy_cpu_is_not_a_regression_however_many_samples() -> None:
    """Each run's samples are tight (1 %), the runs' medians are not: pooling the samples called this
    p = 1e-80; the spread between runs says it is noise."""
    history = runs(BUSY, seed=7, sigma=0.01)
    now = draw(1.15, seed=8, n=400, sigma=0.01)  # +21 % over the previous medians' median (0.95)
    pooled = mannwhitneyu(now, [x for r in history for x in r], alternative="greater").pvalue
    assert pooled < 1e-40  # what treating samples as independent evidence says
    verdict = assess(now, history)
    assert verdict.slowdown_pct > 20.0 and verdict.status == "not-significant" and verdict.p_value > 0.05
    assert verdict.spread_pct > 10.0


def test_a_faster_run_is_improved_not_regressed() -> None:
    verdict = assess(draw(0.9, seed=1), runs(STEADY, seed=2))
    assert verdict.status == "improved" and verdict.slowdown_pct < -5.0 and verdict.p_value < 0.01


def test_a_large_median_shift_without_evidence_is_not_flagged() -> None:
    samples = [0.6, 0.9, 1.1, 1.2, 1.4]  # median +10 %, but five noisy samples prove nothing ...
    verdict = assess(samples, runs(STEADY, seed=3))  # ... the run's own noise floors the spread
    assert verdict.slowdown_pct == pytest.approx(10.0, abs=1.0)
    assert verdict.p_value > 0.01 and verdict.status == "not-significant"


def test_a_slowdown_two_runs_of_history_cannot_judge_is_not_significant_not_ok() -> None:
    """+16.7 % against two earlier runs 10 % apart read "ok" beside its change: the spread of two runs cannot
    tell it from noise, which is not the same as no change."""
    verdict = assess(draw(1.167, seed=5), runs([0.95, 1.05], seed=6))
    assert verdict.slowdown_pct == pytest.approx(16.7, abs=1.0) and verdict.p_value >= 0.01
    assert verdict.status == "not-significant"
    assert assess(draw(1.02, seed=5), runs([0.95, 1.05], seed=6)).status == "ok"  # within the 5 % threshold


def test_a_significant_shift_below_the_threshold_is_not_flagged() -> None:
    history = runs(STEADY, seed=4, sigma=0.002)
    verdict = assess(draw(1.03, seed=3, sigma=0.002), history)
    assert verdict.p_value < 1e-3  # certainly slower ...
    assert verdict.status == "ok"  # ... but by 3 %, under the 5 % threshold
    assert assess(draw(1.03, seed=3, sigma=0.002), history, threshold=0.01).status == "regressed"


def test_one_previous_run_gives_no_verdict() -> None:
    with pytest.raises(ValueError, match="at least 2 previous runs"):
        assess(draw(2.0, seed=1), runs([1.0], seed=2))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"threshold": -0.1}, "threshold=-0.1"), ({"alpha": 1.5}, "alpha=1.5"), ({"alpha": 0.0}, "alpha=0.0")],
)
def test_bad_parameters_are_named(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        assess([1.0], [[1.0], [1.0]], **kwargs)


# ------------------------------------------------------------------------------ histories in MLflow


@pytest.fixture(scope="module")
def history(store: Store) -> dict[str, Any]:
    """Seven suites on H100 / torch 2.11, then suites on an A100 and on torch 2.10, then the current one."""
    seed = iter(range(10_000))
    for i in range(7):
        results = [
            result("ch07:steady:baseline", draw(1.0, next(seed))),
            result("ch07:slower:baseline", draw(1.0, next(seed))),
            result("ch07:faster:baseline", draw(1.0, next(seed))),
            # Only the two newest runs match today's speed: K=2 says ok, K=5 pools three faster runs.
            result("ch07:window:baseline", draw(0.8 if i < 5 else 1.0, next(seed))),
            result("ch07:failedhist:baseline", None, status="timeout"),
            result("ch07:busy:baseline", draw([1.0, 1.2, *BUSY][i], next(seed), sigma=0.01)),
        ]
        if i >= 5:
            results.append(result("ch07:mixed:baseline", draw(1.0, next(seed))))
        log_suite(store, EXP, results)
    for kw in ({"gpu": A100}, {"torch": "2.10.0"}):
        for _ in range(2):  # fast runs elsewhere: counted, they would flag ch07:mixed as a regression
            log_suite(
                store,
                EXP,
                [
                    result("ch07:mixed:baseline", draw(0.8, next(seed)), **kw),
                    result("ch07:moved:baseline", draw(1.0, next(seed)), **kw),
                ],
            )
    # Runs logged before the perflab.torch tag existed: versions come from result.json's manifest.
    legacy = [log_suite(store, EXP, [result("ch07:legacy:baseline", draw(1.0, next(seed)))])[1] for _ in range(2)]
    legacy.append(log_suite(store, EXP, [result("ch07:legacy:baseline", draw(0.8, next(seed)), torch="2.10.0")])[1])
    for ids in legacy:
        store.client.delete_tag(ids["ch07:legacy:baseline"], "perflab.torch")
        store.client.delete_tag(ids["ch07:legacy:baseline"], "perflab.triton")
    parent, ids = log_suite(
        store,
        EXP,
        [
            result("ch07:steady:baseline", draw(1.0, 9001)),
            result("ch07:slower:baseline", draw(1.07, 9002)),
            result("ch07:faster:baseline", draw(0.90, 9003)),
            result("ch07:window:baseline", draw(1.0, 9004)),
            result("ch07:failedhist:baseline", draw(1.0, 9005)),
            result("ch07:mixed:baseline", draw(1.0, 9006)),
            result("ch07:moved:baseline", draw(1.0, 9007)),
            result("ch07:legacy:baseline", draw(1.0, 9008)),
            result("ch07:brandnew:baseline", draw(1.0, 9009)),
            result("ch07:busy:baseline", draw(1.15, 9010, n=400, sigma=0.01)),
            result("ch07:broken:baseline", None, status="timeout"),
        ],
    )
    checked, rows = check_suite(parent, tracking_uri=store.uri)
    assert checked == parent
    return {"parent": parent, "ids": ids, "rows": {r.key.split(":")[1]: r for r in rows}}


def test_every_variant_of_the_suite_is_checked(history: dict[str, Any]) -> None:
    assert set(history["rows"]) == {
        "steady",
        "slower",
        "faster",
        "window",
        "failedhist",
        "mixed",
        "moved",
        "legacy",
        "brandnew",
        "broken",
        "busy",
    }


def test_stored_seven_percent_regression_is_flagged(history: dict[str, Any]) -> None:
    row = history["rows"]["slower"]
    assert row.status == "regressed", row.reason
    assert row.k_used == 5 and len(row.history_run_ids) == 5
    assert 5.0 < row.slowdown_pct < 9.0 and row.p_value < 0.01
    assert history["rows"]["faster"].status == "improved"


def test_stored_noise_is_not_flagged(history: dict[str, Any]) -> None:
    row = history["rows"]["steady"]
    assert row.status == "ok", row.reason
    assert row.k_used == 5 and abs(row.slowdown_pct) < 5.0


def test_only_the_previous_k_runs_count(history: dict[str, Any], store: Store) -> None:
    window = history["rows"]["window"]  # three of the five were 0.8 ms, the two newest 1.0 ms
    assert window.k_used == 5 and window.history_median_ms == pytest.approx(0.8, rel=0.02)
    assert window.slowdown_pct > 20 and window.status == "not-significant", window.reason  # a history that moved
    _, rows = check_suite(history["parent"], k=2, tracking_uri=store.uri)
    newest = next(r for r in rows if r.key == "ch07:window:baseline")
    assert newest.k_used == 2 and newest.status == "ok", newest.reason
    assert newest.history_median_ms == pytest.approx(1.0, rel=0.02)


def test_stored_noise_of_a_busy_host_is_not_flagged(history: dict[str, Any]) -> None:
    busy = history["rows"]["busy"]
    assert busy.k_used == 5 and busy.slowdown_pct > 20 and busy.status == "not-significant", busy.reason
    assert busy.p_value > 0.05 and "spread between runs" in busy.reason


def test_missing_history_says_why(history: dict[str, Any]) -> None:
    new = history["rows"]["brandnew"]
    assert new.status == "no-history" and new.k_used == 0 and new.slowdown_pct is None
    assert new.reason == f"no previous ok run of ch07:brandnew:baseline on {H100} with torch 2.11.0, triton 3.5.0"
    failed = history["rows"]["failedhist"]
    assert failed.status == "no-history"
    assert "7 with status timeout" in failed.reason


def test_history_on_other_hardware_or_software_is_not_used(history: dict[str, Any]) -> None:
    moved = history["rows"]["moved"]
    assert moved.status == "no-history"
    assert moved.reason.startswith(f"no previous ok run of ch07:moved:baseline on {H100} with torch 2.11.0")
    assert f"2 on {A100}" in moved.reason and "2 with torch 2.10.0, triton 3.5.0" in moved.reason
    mixed = history["rows"]["mixed"]  # 2 matching runs at 1.0 ms; the 0.8 ms runs elsewhere are ignored
    assert mixed.status == "ok", mixed.reason
    assert mixed.k_used == 2
    assert mixed.history_median_ms == pytest.approx(1.0, rel=0.02)


def test_versions_of_untagged_runs_come_from_result_json(history: dict[str, Any]) -> None:
    legacy = history["rows"]["legacy"]
    assert legacy.status == "ok", legacy.reason
    assert legacy.k_used == 2  # the torch 2.10.0 run is recognised from its manifest and left out


def test_a_run_that_measured_nothing_is_not_measured(history: dict[str, Any]) -> None:
    row = history["rows"]["broken"]
    assert row.status == "not-measured" and "'timeout'" in row.reason


def test_a_single_variant_run_can_be_checked(history: dict[str, Any], store: Store) -> None:
    run_id = history["ids"]["ch07:slower:baseline"]
    checked, rows = check_suite(run_id, tracking_uri=store.uri)
    assert checked == run_id and [r.key for r in rows] == ["ch07:slower:baseline"]
    assert rows[0].status == "regressed"


def test_cli_prints_a_compact_table_and_exits_1_on_a_regression(
    history: dict[str, Any], store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(analysis.cli.console, "width", 80)
    out = CliRunner().invoke(cli.app, ["regressions", "--run-id", history["parent"], "--tracking-uri", store.uri])
    assert out.exit_code == 1, out.output
    table = out.output.split("\ncompared on ")[0]
    rows = [line for line in table.splitlines() if line.startswith(("steady", "slower", "busy", "brandnew"))]
    assert len(rows) == 4 and all(len(line) <= 80 for line in table.splitlines())  # one line per variant
    slower = next(line for line in rows if line.startswith("slower"))
    assert slower.split()[:2] == ["slower:baseline", "regressed"] and "…" not in table
    busy = next(line for line in rows if line.startswith("busy"))  # +20 % that the runs' spread cannot support
    assert busy.split()[1] == "not-significant" and "\nch07:busy:baseline: median +" in out.output  # not "ok"
    header = table.split("───")[0].splitlines()[1:]  # its words on two lines where a column is narrowed
    assert {"now", "before", "ms"} <= set(" ".join(header).split()) and "µs" not in table  # the unit in it
    assert "no-history" in out.output and f"compared on {H100}, torch 2.11.0, triton 3.5.0" in out.output
    assert "ch07:brandnew:baseline: no previous ok run" in out.output
    assert "1 regressed, 1 improved" in out.output
    steady = CliRunner().invoke(
        cli.app, ["regressions", "--run-id", history["ids"]["ch07:steady:baseline"], "--tracking-uri", store.uri]
    )
    assert steady.exit_code == 0, steady.output
    unknown = CliRunner().invoke(cli.app, ["regressions", "--run-id", "nope123", "--tracking-uri", store.uri])
    assert unknown.exit_code == 2 and "nope123" in unknown.output


@pytest.mark.parametrize(
    ("args", "named"),
    [(["--threshold", "nan"], "--threshold nan"), (["--threshold", "inf"], "--threshold inf"),
     (["--threshold", "-1"], "--threshold -1"), (["-k", "1"], "-k 1"), (["--alpha", "nan"], "--alpha nan"),
     (["--alpha", "1"], "--alpha 1"), (["--alpha", "0"], "--alpha 0")],
)  # fmt: skip
def test_a_bad_option_is_one_line_naming_its_value_and_what_is_accepted(args: list[str], named: str) -> None:
    """``--threshold nan`` read "Input should be greater than or equal to 0" under a usage block, the value unnamed
    (``inf`` passed typer's min= and failed later, as ``threshold=inf``): one line, the option as given, the range."""
    out = CliRunner().invoke(cli.app, ["regressions", *args, "--tracking-uri", "sqlite:///unused.db"])
    assert out.exit_code == 2, out.output
    assert out.output.count("\n") == 1 and out.output.startswith(f"error: {named}: accepted: "), out.output
    assert len(out.output.rstrip("\n")) <= 80, out.output


def test_at_80_columns_a_long_variant_name_breaks_after_a_colon() -> None:
    """Two chapters' variants at 80 columns leave ~26 for the names: rich broke "ch19:fp8_training:optimized_tensorwise"
    at the column's edge, "ch19:fp8_training:optimize" / "d_tensorwise", its first line alike for every variant of
    the example; it breaks after a colon, each variant's name whole on a line."""
    from rich.console import Console

    from analysis.regression import RegressionRow, regression_table

    keys = ["ch07:transpose:baseline", "ch19:fp8_training:optimized", "ch19:fp8_training:optimized_tensorwise",
            "ch19:fp8_gemm:optimized_rowwise"]  # fmt: skip
    rows = [RegressionRow(k, "r", "no-history", slowdown_pct=12.3, p_value=0.003, k_used=5, median_ms=1234.5,
                          history_median_ms=1100.2) for k in keys]  # fmt: skip
    console = Console(width=80, record=True)
    console.print(regression_table(rows, 80))
    lines = console.export_text().splitlines()
    assert all(len(line) <= 80 for line in lines) and "…" not in "".join(lines)
    names = [line.split("  ")[0].strip() for line in lines[3:]]
    assert "ch19:fp8_training:" in names and "optimized_tensorwise" in names and "optimized_rowwise" in names, lines


def test_the_p_column_reads_in_two_significant_digits() -> None:
    """The p column showed one significant digit (0.08, 0.5; 0.0096 and 0.014 both read 0.01, beside a 0.01 cut-off):
    two, trailing zeros kept, and ``<0.001`` for a tiny one; the notes alike."""
    from rich.console import Console

    from analysis.regression import RegressionRow, p_text, regression_table

    ps = {"a": 0.08, "b": 0.5, "c": 0.0096, "d": 0.014, "e": 0.0004}
    rows = [RegressionRow(f"ch07:{k}:optimized", "r", "ok", slowdown_pct=1.0, p_value=p, k_used=5, median_ms=1.0,
                          history_median_ms=1.0) for k, p in ps.items()]  # fmt: skip
    console = Console(width=80, record=True)
    console.print(regression_table(rows, 80))
    shown = {line.split()[0].split(":")[0]: line.split()[-2] for line in console.export_text().splitlines()
             if line.strip()[:2] in {f"{k}:" for k in ps}}  # fmt: skip
    assert shown == {"a": "0.080", "b": "0.50", "c": "0.0096", "d": "0.014", "e": "<0.001"}, shown
    assert (p_text(0.01), p_text(None), p_text(1.0)) == ("0.010", "—", "1.0")


def test_a_host_clocked_run_is_compared_only_with_runs_on_the_same_cpu(store: Store) -> None:
    """On the host's clock the CPU is part of the machine (a wall-clock pair's baseline read 5.48 and 2.06 ms on
    two H100 hosts): history on another CPU model is not used, and the reason names it; a GPU-clocked run's
    history spans CPUs."""
    seed = iter(range(20_000, 21_000))
    for cpu in ("CPU A", "CPU A", "CPU B", "CPU B"):
        host_ms = 1.0 if cpu == "CPU A" else 0.5
        runs = [result("ch03:host:baseline", draw(host_ms, next(seed)), gpu=None),
                result("ch03:gpu:baseline", draw(1.0, next(seed)))]  # fmt: skip
        log_suite(store, "machines", runs, host={"cpu": cpu})
    _, ids = log_suite(store, "machines", [result("ch03:host:baseline", draw(1.0, next(seed)), gpu=None),
                                           result("ch03:gpu:baseline", draw(1.0, next(seed)))],
                       host={"cpu": "CPU A"})  # fmt: skip
    host = check_run(read_run(ids["ch03:host:baseline"], store.uri), tracking_uri=store.uri)
    assert host.hardware == "cpu (CPU A)"
    assert host.status == "ok" and host.k_used == 2, host.reason  # not the 0.5 ms runs on CPU B
    gpu = check_run(read_run(ids["ch03:gpu:baseline"], store.uri), tracking_uri=store.uri)
    assert gpu.hardware == H100 and gpu.k_used == 4
    _, ids = log_suite(store, "machines", [result("ch03:host:baseline", draw(1.0, next(seed)), gpu=None)],
                       host={"cpu": "CPU C"})  # fmt: skip
    moved = check_run(read_run(ids["ch03:host:baseline"], store.uri), tracking_uri=store.uri)
    assert moved.status == "no-history" and "on cpu (CPU C)" in moved.reason
    assert "2 on cpu (CPU B)" in moved.reason and "3 on cpu (CPU A)" in moved.reason, moved.reason


def _serving(seed: Any, ttft_ms: float, rate: float, metric: str = "ttft", key: str = "ch15:serve:baseline") -> Any:
    """A token-generating variant's result: its call (the whole generation) 10 ms however fast its first tokens;
    six generations of eight requests each, TTFT around ``ttft_ms``, ``rate`` tokens/s."""
    from bench.define.result import Generation
    from bench.measure.generation import quantiles

    rows = [draw(ttft_ms, next(seed), n=8) for _ in range(6)]
    rates = draw(rate, next(seed), n=6)
    flat = [v for r in rows for v in r]
    generation = Generation(requests=8, tokens=64, arrival="all at once", speedup_metric=metric, samples=6,
                            steps=10, ttft_ms=quantiles(flat), step_ms=quantiles(draw(1.0, next(seed), n=60)),
                            tokens_per_s=rate, requests_per_s=rate / 8, ttft_samples_ms=rows,
                            tokens_per_s_samples=rates)  # fmt: skip
    return result(key, draw(10.0, next(seed))).model_copy(update={"generation": generation})


def test_a_generating_variant_is_judged_on_its_pairs_metric(store: Store) -> None:
    """A serving variant whose TTFT doubled while its whole generation took as long: on the call time "ok", on its
    pair's metric (TTFT) "regressed"; a throughput pair's fall in tokens/s regresses its milliseconds per token; a
    run judged on another metric is not its history, and the reason says so."""
    seed = iter(range(30_000, 31_000))
    for _ in range(3):
        log_suite(store, "serving", [_serving(seed, 2.0, 1000.0),
                                     _serving(seed, 2.0, 1000.0, "throughput", "ch15:rate:baseline")])  # fmt: skip
    _, ids = log_suite(store, "serving", [_serving(seed, 4.0, 1000.0),
                                          _serving(seed, 2.0, 700.0, "throughput", "ch15:rate:baseline")])  # fmt: skip
    ttft = check_run(read_run(ids["ch15:serve:baseline"], store.uri), tracking_uri=store.uri)
    assert ttft.on == "TTFT" and ttft.status == "regressed" and 80 < ttft.slowdown_pct < 120, ttft.reason
    assert ttft.reason.startswith("TTFT median +") and ttft.median_ms == pytest.approx(4.0, rel=0.05)
    rate = check_run(read_run(ids["ch15:rate:baseline"], store.uri), tracking_uri=store.uri)
    assert rate.on == "ms per token" and rate.status == "regressed" and 35 < rate.slowdown_pct < 50, rate.reason
    # TPOT declared, none measured (one token a request): the call time, as its pair's speedup falls back to
    _, ids = log_suite(store, "serving", [_serving(seed, 2.0, 1000.0, "tpot")])
    moved = check_run(read_run(ids["ch15:serve:baseline"], store.uri), tracking_uri=store.uri)
    assert moved.on == "call" and moved.status == "no-history", moved.reason
    assert "(earlier runs: 4 judged on TTFT)" in moved.reason, moved.reason
