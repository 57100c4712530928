"""analysis/deltas.py and ``perflab compare``: deltas between two variant runs or two suites."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

import analysis.cli
from analysis.deltas import MetricDelta, compare_runs, direction
from perflab import cli
from tests.analysis.synthetic import A100, Store, draw, log_suite, result

EXP = "compare"


@pytest.fixture(scope="module")
def suites(store: Store) -> dict[str, Any]:
    """Suite A, then suite B: the baseline got slower (2.0 → 2.2 ms), the optimized faster (1.0 → 0.8 ms)."""
    a, ids_a = log_suite(
        store,
        EXP,
        [
            result("ch07:x:baseline", draw(2.0, 1), work_bytes=1e6),
            result("ch07:x:optimized", draw(1.0, 2), work_bytes=1e6),
            result("ch07:gone:baseline", draw(1.0, 3)),
        ],
    )
    b, ids_b = log_suite(
        store,
        EXP,
        [
            result("ch07:x:baseline", draw(2.2, 4), work_bytes=1e6),
            result("ch07:x:optimized", draw(0.8, 5), work_bytes=1e6),
            result("ch07:new:baseline", draw(1.0, 6)),
        ],
    )
    return {"a": a, "b": b, "ids_a": ids_a, "ids_b": ids_b}


def by_metric(deltas: list[MetricDelta], name: str) -> dict[str, MetricDelta]:
    return {d.metric: d for d in deltas if d.name == name}


@pytest.mark.parametrize(
    ("metric", "expected"),
    [
        ("time_median_ms", "lower"),
        ("time_p99_ms", "lower"),
        ("time_cv", "lower"),
        ("mem_peak_mb", "lower"),
        ("time_first_call_ms", "lower"),
        ("speedup", "higher"),
        ("speedup_geomean", "higher"),
        ("achieved_gbps", "higher"),
        ("pct_peak_bandwidth", "higher"),
        ("n_samples", None),
        ("stage_setup_s", None),
        ("energy_per_call_mj", "lower"),
        ("energy_pj_per_flop", "lower"),
        ("energy_per_token_mj", "lower"),
        ("energy_ratio", "higher"),
        ("energy_ratio_ci_low", "higher"),
        ("energy_power_w", None),  # more power for less time can be less energy: no better side alone
        ("energy_step_ms", None),
        ("tokens_per_s", "higher"),  # a throughput pair's speedup is on it: compare --metrics left it out (no side)
        ("requests_per_s", "higher"),
        ("ttft_median_ms", "lower"),
    ],
)
def test_direction_of_a_metric(metric: str, expected: str | None) -> None:
    assert direction(metric) == expected


def test_faster_optimized_run_is_better_on_time_and_speedup(suites: dict[str, Any], store: Store) -> None:
    key = "ch07:x:optimized"
    cmp = compare_runs(suites["ids_a"][key], suites["ids_b"][key], store.uri)
    d = by_metric(cmp.deltas, key)
    assert d["time_median_ms"].b < d["time_median_ms"].a and d["time_median_ms"].verdict == "better"
    assert d["speedup"].b > d["speedup"].a and d["speedup"].verdict == "better"
    assert d["achieved_gbps"].verdict == "better"
    assert "n_samples" not in d  # no better side: shown only with all_metrics
    back = by_metric(compare_runs(suites["ids_b"][key], suites["ids_a"][key], store.uri).deltas, key)
    assert back["time_median_ms"].verdict == "worse" and back["speedup"].verdict == "worse"
    assert back["time_median_ms"].delta_pct == pytest.approx(100 * (d["time_median_ms"].a / d["time_median_ms"].b - 1))


def test_a_change_within_the_noise_threshold_is_the_same() -> None:
    """One reading a side, no interval: ±0.3 % (two runs of identical files) is "same", not better or worse; a
    change past the harness's ±1 % noise threshold has a side."""
    from analysis.deltas import MetricDelta

    def verdict(a: float, b: float, metric: str = "time_median_ms") -> str | None:
        return MetricDelta("x", metric, a, b, direction(metric)).verdict

    assert verdict(0.1243, 0.1240) == "same" and verdict(1.0, 1.009) == "same"
    assert verdict(1.0, 1.02) == "worse" and verdict(1.0, 0.98) == "better"
    assert verdict(2.0, 2.05, "speedup") == "better"


def test_two_different_variants_are_said_to_be(suites: dict[str, Any], store: Store) -> None:
    ids = suites["ids_a"]
    cmp = compare_runs(ids["ch07:x:baseline"], ids["ch07:x:optimized"], store.uri)
    assert cmp.notes == ["A and B are different variants: A ch07:x:baseline, B ch07:x:optimized (rows are named for A)"]
    assert compare_runs(ids["ch07:x:baseline"], suites["ids_b"]["ch07:x:baseline"], store.uri).notes == []


def test_slower_baseline_is_worse(suites: dict[str, Any], store: Store) -> None:
    key = "ch07:x:baseline"
    d = by_metric(compare_runs(suites["ids_a"][key], suites["ids_b"][key], store.uri).deltas, key)
    assert d["time_median_ms"].verdict == "worse" and d["achieved_gbps"].verdict == "worse"
    assert "speedup" not in d  # baselines have none


def test_suites_are_matched_by_variant_name(suites: dict[str, Any], store: Store) -> None:
    cmp = compare_runs(suites["a"], suites["b"], store.uri, all_metrics=True)
    names = {d.name for d in cmp.deltas}
    assert names == {"suite", "ch07:x:baseline", "ch07:x:optimized"}
    assert cmp.only_a == ["ch07:gone:baseline"] and cmp.only_b == ["ch07:new:baseline"]
    assert by_metric(cmp.deltas, "ch07:x:optimized")["speedup"].verdict == "better"
    assert by_metric(cmp.deltas, "suite")["speedup_geomean"].verdict == "better"
    assert "n_samples" in by_metric(cmp.deltas, "ch07:x:optimized")  # all_metrics


@pytest.mark.parametrize("width", [80, 250])
def test_cli_marks_better_and_worse_with_every_metric_named(
    suites: dict[str, Any], store: Store, monkeypatch: pytest.MonkeyPatch, width: int
) -> None:
    monkeypatch.setattr(analysis.cli.console, "width", width)
    out = CliRunner().invoke(cli.app, ["compare", suites["a"], suites["b"], "--metrics", "--tracking-uri", store.uri])
    assert out.exit_code == 0, out.output
    assert "…" not in out.output and all(len(x) <= width for x in out.output.splitlines())
    groups: dict[str, dict[str, str]] = {}
    for x in out.output.splitlines():
        if x in ("x:baseline", "x:optimized", "suite") or x.rstrip() in ("x:baseline", "x:optimized", "suite"):
            group = groups.setdefault(x.strip(), {})
        elif x.startswith("  ") and x.split() and x.split()[0].isidentifier():
            group[x.split()[0]] = x  # one row per metric, its name whole
    assert {"time_median_ms", "time_p90_ms", "time_mean_ms"} <= set(groups["x:optimized"])
    assert "better" in groups["x:optimized"]["time_median_ms"] and "better" in groups["x:optimized"]["speedup"]
    assert "worse" in groups["x:baseline"]["time_median_ms"]
    assert "only in A: ch07:gone:baseline" in out.output


def test_cli_unknown_run_exits_2(suites: dict[str, Any], store: Store) -> None:
    out = CliRunner().invoke(cli.app, ["compare", suites["a"], "deadbeef0000", "--tracking-uri", store.uri])
    assert out.exit_code == 2
    assert "no MLflow run 'deadbeef0000'" in out.output


def test_a_shortened_run_id_is_one_line_saying_what_a_run_id_is(suites: dict[str, Any], store: Store) -> None:
    """The 8 hex digits of ``report-<id>``'s name name their run; fewer, pasted short: the line named the id and the
    store, not what an id is (``perflab run`` printed it whole)."""
    same = CliRunner().invoke(cli.app, ["compare", suites["a"], suites["a"][:8], "--tracking-uri", store.uri])
    assert same.exit_code == 0, same.output
    short = suites["a"][:7]
    args = ["compare", suites["a"], short, "--tracking-uri", store.uri]
    out = CliRunner().invoke(cli.app, args, env={"COLUMNS": "80"})
    lines = out.output.strip().splitlines()
    assert out.exit_code == 2 and len(lines) == 1, out.output
    assert f"no MLflow run {short!r}" in lines[0] and "a run id is the 32 hex digits `perflab run` printed" in lines[0]


def test_cli_variant_against_suite_exits_2(suites: dict[str, Any], store: Store) -> None:
    variant = suites["ids_a"]["ch07:x:optimized"]
    out = CliRunner().invoke(cli.app, ["compare", variant, suites["b"], "--tracking-uri", store.uri])
    assert out.exit_code == 2 and "cannot compare a variant run" in out.output


def test_runs_on_different_machines_are_named(store: Store) -> None:
    """Matched runs on another GPU, or timed on the host's clock on another CPU, are listed (their deltas include
    the machine); a GPU-clocked run on another CPU is the same machine."""
    runs = [("ch03:host:baseline", {"gpu": None}), ("ch03:gpu:baseline", {}), ("ch03:moved:baseline", {})]
    a, _ = log_suite(store, "machines", [result(k, draw(1.0, i), **kw) for i, (k, kw) in enumerate(runs)],
                     host={"cpu": "CPU A"})  # fmt: skip
    runs[2] = ("ch03:moved:baseline", {"gpu": A100})
    b, _ = log_suite(store, "machines", [result(k, draw(1.0, 10 + i), **kw) for i, (k, kw) in enumerate(runs)],
                     host={"cpu": "CPU B"})  # fmt: skip
    assert compare_runs(a, b, store.uri).machines == [
        "NVIDIA H100 80GB HBM3 → NVIDIA A100-SXM4-80GB (1 run)",
        "cpu (CPU A) → cpu (CPU B) (1 run)",
    ]
    out = CliRunner().invoke(cli.app, ["compare", a, b, "--tracking-uri", store.uri])
    assert out.exit_code == 0, out.output
    assert "different machines, A → B: cpu (CPU A) → cpu (CPU B) (1 run); those figures include" in " ".join(
        out.output.split()
    )
    assert compare_runs(a, a, store.uri).machines == []
