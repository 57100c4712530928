"""analysis/readme.py and ``perflab readme``: chapter README sections generated from a synthetic store.

The store is read the way the lead reads one copied off the GPU host: the suites' artifacts are
deleted after logging and no local peak cache exists, so ceilings come from the store's peak run.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from analysis import readme
from bench.record import log_run
from bench.record.store import StoredRun
from perflab import cli
from tests.analysis.synthetic import H100, Store, log_suite, result

EXP = "readme"
CEILINGS = {"copy_gbps": 3000.0, "l2_gbps": 9000.0, "fp32_tflops": 50.0}
COMMIT = "0123456789abcdef0123456789abcdef01234567"
OPT_MS = 0.125  # every optimized median; constant samples make the percentages exact

BEFORE = "# Chapter 7\n\nHand-written intro | with a pipe.\n\n## Latest figures\n\n"
AFTER = "\n\n## History\n\nMeasured by hand, kept as is.\n"
README = f"{BEFORE}{readme.markers('results')[0]}\nNot generated yet.\n{readme.markers('results')[1]}{AFTER}"


def flat(median_ms: float) -> list[float]:
    return [median_ms] * 20


@pytest.fixture(scope="module")
def suite(store: Store, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """ch07, logged with the H100 ceilings cached (pct_of_peak and its ceiling's name logged):

    fast: 90 % of copy, 8x · slow: 60 % of copy, 2x · mm: 40 TFLOP/s fp32 (80 %), 4x ·
    nowork: no work declared, 1.5x · wrong: 90 % of copy but not verified · broken: optimized timed out ·
    pcie / pcie_slow: a stated ceiling (PCIe) the optimized side reaches at 90 % / 50 % (target 80 %), 3x.
    """
    cache = tmp_path_factory.mktemp("peaks") / "peaks.json"
    cache.write_text(json.dumps({H100: {"ceilings": CEILINGS}}))
    store.experiment(EXP)
    peak_run = log_run(
        "perflab peak", params={}, metrics=CEILINGS, artifacts={},
        tags={"perflab.kind": "peak", "perflab.hardware": H100}, experiment=EXP, tracking_uri=store.uri,
    )  # fmt: skip
    gbps = {"fast": 2700.0, "slow": 1800.0, "wrong": 2700.0}
    results = []
    for name, gb in gbps.items():
        work = gb * 1e9 * OPT_MS / 1e3
        base_ms = OPT_MS * (8 if name == "fast" else 2)
        results += [result(f"ch07:{name}:baseline", flat(base_ms), work_bytes=work),
                    result(f"ch07:{name}:optimized", flat(OPT_MS), work_bytes=work)]  # fmt: skip
    flops = 40e12 * OPT_MS / 1e3
    results += [
        result("ch07:mm:baseline", flat(4 * OPT_MS), work_flops=flops),
        result("ch07:mm:optimized", flat(OPT_MS), work_flops=flops),
        result("ch07:nowork:baseline", flat(1.5 * OPT_MS)),
        result("ch07:nowork:optimized", flat(OPT_MS)),
        result("ch07:broken:baseline", flat(OPT_MS), work_bytes=1e6),
        result("ch07:broken:optimized", None, status="timeout"),
    ]
    for name, share in (("pcie", 0.9), ("pcie_slow", 0.5)):
        ceiling = ("copies at the measured PCIe rate", share * OPT_MS, 80.0)
        results += [result(f"ch07:{name}:baseline", flat(3 * OPT_MS), work_bytes=1e6, ceiling=ceiling),
                    result(f"ch07:{name}:optimized", flat(OPT_MS), work_bytes=1e6, ceiling=ceiling)]  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PERFLAB_PEAK_CACHE", str(cache))
        parent, ids = log_suite(store, EXP, results, verified={"ch07:wrong:optimized": False},
                                host={"git": {"commit": COMMIT, "dirty": False}})  # fmt: skip
    shutil.rmtree(store.root / "artifacts" / EXP)  # a store copied off the GPU host: no artifacts here
    return {"parent": parent, "ids": ids, "peak_run": peak_run}


@pytest.fixture(autouse=True)
def _no_local_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFLAB_PEAK_CACHE", str(tmp_path / "absent" / "peaks.json"))


def chapters_tree(root: Path, text: str = README, chapter: str = "ch07") -> Path:
    (root / chapter).mkdir(parents=True, exist_ok=True)
    (root / chapter / "README.md").write_text(text)
    return root


def generate(suite: dict[str, Any], store: Store, root: Path, **kw: Any) -> list[readme.Outcome]:
    return readme.update_readmes(suite["parent"], root, store.uri, **kw)


@pytest.fixture(scope="module")
def text(suite: dict[str, Any], store: Store, tmp_path_factory: pytest.TempPathFactory) -> str:
    """ch07's README as generated once from the suite (no local peak cache, as in every test here)."""
    root = chapters_tree(tmp_path_factory.mktemp("chapters"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PERFLAB_PEAK_CACHE", str(root / "absent" / "peaks.json"))
        generate(suite, store, root)
    return (root / "ch07" / "README.md").read_text()


def row(text: str, example: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.startswith(f"| {example} |"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_section_is_replaced_and_the_rest_untouched(suite: dict[str, Any], store: Store, tmp_path: Path) -> None:
    root = chapters_tree(tmp_path)
    (outcome,) = generate(suite, store, root)
    assert (outcome.state, outcome.sections) == ("written", ["results"])
    text = (root / "ch07" / "README.md").read_text()
    assert text.startswith(BEFORE + readme.markers("results")[0] + "\n")
    assert text.endswith(readme.markers("results")[1] + AFTER)
    assert "Not generated yet" not in text
    header = text[len(BEFORE) :].splitlines()[1]
    assert f"`perflab readme --run-id {suite['parent']}`" in header
    assert f"**{H100}**" in header and f"commit `{COMMIT[:12]}`" in header  # commit without the artifacts
    assert f"MLflow peak run `{suite['peak_run']}`" in text  # ceilings from the store, no local cache


def test_rows_carry_the_run_figures(text: str) -> None:
    assert row(text, "fast") == ["fast", "1000", "125.0", "8.00×", "yes", "2700 GB/s", "90.0 % of copy", "met"]
    mm = row(text, "mm")
    assert mm[5:] == ["40.0 TFLOP/s", "80.0 % of fp32 peak", "met"]  # a matmul-like row: TFLOP/s vs its dtype


def test_missing_metrics_show_a_dash(text: str) -> None:
    assert row(text, "nowork") == ["nowork", "187.5", "125.0", "1.50×", "yes", "—", "—", "— (no measured ceiling)"]
    broken = row(text, "broken")
    assert broken[1:7] == ["125.0", "—", "—", "no (failed)", "—", "—"]
    assert broken[7] == "not met: pair failed; no speedup"


def test_target_check_flags_rows_below_the_ceiling_targets(text: str) -> None:
    assert row(text, "slow")[5:] == ["1800 GB/s", "60.0 % of copy", "not met: 60.0 % of copy < 80 %"]
    assert row(text, "wrong")[-1] == "not met: pair mismatch"  # fast enough, but not verified
    assert "3 of 8 pair(s) meet the target" in text


def test_a_stated_ceiling_replaces_the_roofline(text: str, suite: dict[str, Any], store: Store) -> None:
    """A pair that states its own ceiling (PCIe) is judged against it and its target, not against the HBM copy
    bandwidth its 8 GB/s would be 0.3 % of; the run logs the percent, the ceiling's name and its target."""
    assert row(text, "pcie")[5:] == ["8.00 GB/s", "90.0 % of copies at the measured PCIe rate", "met"]
    want = "not met: 50.0 % of copies at the measured PCIe rate < 80 %"
    assert row(text, "pcie_slow")[6:] == ["50.0 % of copies at the measured PCIe rate", want]
    run = store.client.get_run(suite["ids"]["ch07:pcie:optimized"])
    assert run.data.tags["perflab.peak_ceiling"] == "stated"
    assert run.data.tags["perflab.ceiling"] == "copies at the measured PCIe rate"
    assert run.data.metrics["pct_of_peak"] == pytest.approx(90.0)
    assert run.data.metrics["ceiling_target_pct"] == 80.0


def test_rerun_is_idempotent_and_check_spots_edits(suite: dict[str, Any], store: Store, tmp_path: Path) -> None:
    root = chapters_tree(tmp_path)
    generate(suite, store, root)
    path = root / "ch07" / "README.md"
    first = path.read_text()
    assert [o.state for o in generate(suite, store, root)] == ["unchanged"]
    assert path.read_text() == first
    assert [o.state for o in generate(suite, store, root, check=True)] == ["unchanged"]
    path.write_text(first.replace("8.00×", "9.00×"))  # a hand edit inside the section
    assert [o.state for o in generate(suite, store, root, check=True)] == ["differs"]
    assert "9.00×" in path.read_text()  # --check writes nothing
    generate(suite, store, root)
    assert path.read_text() == first


def test_roofline_section_when_its_markers_are_present(suite: dict[str, Any], store: Store, tmp_path: Path) -> None:
    start, end = readme.markers("roofline")
    with_points = README.replace("## Latest", f"## Roofline\n\n{start}\nold points\n{end}\n\n## Latest")
    root = chapters_tree(tmp_path, with_points)
    (outcome,) = generate(suite, store, root)
    assert outcome.sections == ["results", "roofline"]
    text = (root / "ch07" / "README.md").read_text()
    points = text[text.index(start) : text.index(end)]
    assert "old points" not in points and "fp32 16.7 FLOP/B" in points  # ridge: 50 TFLOP/s ÷ 3000 GB/s
    lines = {tuple(c.strip() for c in line.strip("|").split("|")[:2]): line for line in points.splitlines()[1:]}
    assert "memory (copy)" in lines[("fast", "baseline")] and "| 338 |" in lines[("fast", "baseline")]
    assert "compute (fp32 peak)" in lines[("mm", "optimized")]
    assert "timeout: not measured" in lines[("broken", "optimized")]


def test_cpu_runs_say_so(store: Store, tmp_path: Path) -> None:
    results = [result("ch01:x:baseline", flat(2.0), gpu=None), result("ch01:x:optimized", flat(1.0), gpu=None)]
    parent, _ = log_suite(store, "readme-cpu", results)
    suite = readme.load_suite(parent, store.uri)
    text = readme.results_section(suite, "ch01")
    assert "**CPU (" in text and "not a GPU" in text and "commit unknown" in text


def test_a_collective_is_judged_on_its_bus_bandwidth_against_the_measured_link(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A collective alone logs its busbw as a share of the peak cache's GPU-GPU link; the README holds it to 70 %."""
    from bench.define.result import Work

    cache = tmp_path / "peaks.json"
    cache.write_text(json.dumps({H100: {"ceilings": {**CEILINGS, "p2p_gbps": 400.0}}}))
    monkeypatch.setenv("PERFLAB_PEAK_CACHE", str(cache))
    results = []
    for name, busbw in (("ring", 300.0), ("slow_ring", 240.0)):  # 75 % and 60 % of the link
        for variant, ms in (("baseline", 2.0), ("optimized", 1.0)):
            r = result(f"ch04:{name}:{variant}", flat(ms))
            results.append(r.model_copy(update={"work": Work(comm_bytes=busbw * 1e9 * 1e-3, bus_factor=1.0),
                                                "config": {**r.config, "world_size": 2}}))  # fmt: skip
    parent, ids = log_suite(store, "readme-link", results)
    run = store.client.get_run(ids["ch04:ring:optimized"])
    assert run.data.tags["perflab.peak_ceiling"] == "p2p_gbps"
    assert run.data.metrics["pct_of_peak"] == pytest.approx(75.0)
    text = readme.results_section(readme.load_suite(parent, store.uri), "ch04")
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| ")}
    assert "| 300 GB/s busbw | 75.0 % of the GPU-GPU link | met |" in rows["ring"]
    assert "not met: 60.0 % of the GPU-GPU link < 70 %" in rows["slow_ring"]
    assert "1 of 2 pair(s) meet the target" in text and "≥ 70 % of the measured GPU-GPU link" in text


def test_without_a_run_id_each_chapter_comes_from_its_latest_suite(
    suite: dict[str, Any], store: Store, tmp_path: Path
) -> None:
    ch01 = [result("ch01:y:baseline", flat(2.0)), result("ch01:y:optimized", flat(1.0))]
    older, _ = log_suite(store, EXP, ch01)
    newer, _ = log_suite(store, EXP, ch01)  # the latest suite of the store, and it has no ch07
    root = chapters_tree(chapters_tree(tmp_path), README.replace("Chapter 7", "Chapter 1"), "ch01")
    chapters_tree(root, "# no markers: not a generated README\n", "ch08")
    outcomes = {o.chapter: o for o in readme.update_readmes(None, root, store.uri)}
    assert set(outcomes) == {"ch01", "ch07"}
    assert (outcomes["ch01"].run_id, outcomes["ch07"].run_id) == (newer, suite["parent"])
    assert f"--run-id {newer}" in (root / "ch01" / "README.md").read_text() and older != newer
    (gone,) = readme.update_readmes(None, root, store.uri, chapters=["9"])
    assert (gone.state, gone.reason) == ("skipped", "no completed suite in the store ran this chapter")


def test_a_suite_of_another_chapters_directory_never_fills_this_ones_readme(store: Store, tmp_path: Path) -> None:
    """``perflab run --chapters-dir mine -t ch1`` logs ``ch01`` variants of the user's own examples: ``perflab readme``
    took that suite as the latest of ch01 and rewrote the repo's chapter 1 README (its H100 results) with them. A
    suite that ran examples the chapter directory lacks is passed over, by id refused for that chapter."""
    root = chapters_tree(tmp_path, README.replace("Chapter 7", "Chapter 3"), "ch03")
    (root / "ch03" / "baseline_real.py").write_text("")
    ours, _ = log_suite(store, EXP, [result("ch03:real:baseline", flat(2.0)), result("ch03:real:optimized", flat(1.0))])
    mine, _ = log_suite(store, EXP, [result("ch03:mine:baseline", flat(2.0)), result("ch03:mine:optimized", flat(1.0))])
    (got,) = readme.update_readmes(None, root, store.uri, chapters=["3"])
    assert (got.state, got.run_id) == ("written", ours) and "mine" not in (root / "ch03" / "README.md").read_text()
    before = (root / "ch03" / "README.md").read_text()
    (refused,) = readme.update_readmes(mine, root, store.uri)
    assert refused.state == "skipped" and "examples that" in refused.reason and "(mine)" in refused.reason
    assert (root / "ch03" / "README.md").read_text() == before


def test_cli_writes_checks_and_refuses_bad_input(suite: dict[str, Any], store: Store, tmp_path: Path) -> None:
    root = chapters_tree(tmp_path)
    args = ["readme", "--run-id", suite["parent"], "--tracking-uri", store.uri, "--chapters-dir", str(root)]
    out = CliRunner().invoke(cli.app, args)
    assert out.exit_code == 0, out.output
    assert "written" in out.output
    assert CliRunner().invoke(cli.app, [*args, "--check"]).exit_code == 0
    (root / "ch07" / "README.md").write_text(README)
    assert CliRunner().invoke(cli.app, [*args, "--check"]).exit_code == 1
    variant = CliRunner().invoke(cli.app, ["readme", "--run-id", suite["ids"]["ch07:fast:optimized"],
                                           "--tracking-uri", store.uri, "--chapters-dir", str(root)])  # fmt: skip
    assert variant.exit_code == 2 and "is the variant run" in variant.output
    other = CliRunner().invoke(cli.app, [*args, "--chapter", "9"])
    assert other.exit_code == 2 and "no variants of ch09" in other.output
    (root / "ch07" / "README.md").write_text("# no markers\n")
    bare = CliRunner().invoke(cli.app, args)
    assert bare.exit_code == 2 and "no results markers" in bare.output
    assert (root / "ch07" / "README.md").read_text() == "# no markers\n"


def test_broken_markers_are_refused_before_anything_is_written() -> None:
    start, end = readme.markers("results")
    with pytest.raises(ValueError, match="exactly one"):
        readme.replace_sections(f"{end}\nx\n{start}\n", {"results": "new"}, "ch07/README.md")
    with pytest.raises(ValueError, match="found 2 start"):
        readme.replace_sections(f"{start}\n{start}\n{end}\n", {"results": "new"}, "ch07/README.md")


def stored(metrics: dict[str, float], tags: dict[str, str] | None = None) -> StoredRun:
    return StoredRun("r", "ch07:x:optimized", "0", "FINISHED", 0, tags or {}, metrics)


def test_binding_ceiling_of_runs_without_the_tag() -> None:
    # A percent logged before the tag existed: the ceiling it matches names it.
    assert readme.binding(stored({"achieved_tflops": 40.0, "pct_of_peak": 80.0}), CEILINGS) == (80.0, "fp32_tflops")
    assert readme.binding(stored({"achieved_gbps": 2400.0, "pct_of_peak": 80.0}), CEILINGS) == (80.0, "copy_gbps")
    # No percent logged: bytes only, or left of every ridge, is judged against copy; otherwise unknown.
    assert readme.binding(stored({"achieved_gbps": 1500.0}), CEILINGS) == (50.0, "copy_gbps")
    low = stored({"achieved_gbps": 1500.0, "achieved_tflops": 1.5})  # 1 FLOP/B, ridge 16.7
    assert readme.binding(low, CEILINGS) == (50.0, "copy_gbps")
    high = stored({"achieved_gbps": 100.0, "achieved_tflops": 40.0})  # 400 FLOP/B: the dtype decides
    assert readme.binding(high, CEILINGS) == (None, None)
    assert readme.binding(stored({"achieved_gbps": 1500.0}), None) == (None, None)  # nothing invented


def test_wall_clock_and_per_token_pairs_are_judged_on_their_speedup_only() -> None:
    """A wall-clock time on a GPU includes host work, and a TPOT or tokens/s speedup is no per-call time: the
    device roofline does not bound them, so a low % of it is no shortfall (nor a high one a success)."""

    def run(**tags: str) -> StoredRun:
        return StoredRun(run_id="r", name="n", experiment_id="0", status="FINISHED", start_time=0, tags=tags,
                         metrics={})  # fmt: skip

    wall = run(**{"perflab.timing_mode": "cpu", "perflab.device": "cuda:0", "perflab.speedup_metric": "time"})
    tpot = run(**{"perflab.timing_mode": "cuda_event", "perflab.device": "cuda:0", "perflab.speedup_metric": "tpot"})
    events = run(**{"perflab.timing_mode": "cuda_event", "perflab.device": "cuda:0", "perflab.speedup_metric": "time"})
    on_cpu = run(**{"perflab.timing_mode": "cpu", "perflab.device": "cpu"})
    assert readme.roofline_exempt(wall) == "a wall-clock time on a GPU"
    assert readme.roofline_exempt(tpot) == "a tpot speedup"
    assert readme.roofline_exempt(events) is None and readme.roofline_exempt(on_cpu) is None
    good = {"status": "ok", "verified": True, "speedup": 2.0, "significance": "faster"}
    assert readme.target_check(good, 33.4, "fp32_tflops") == "not met: 33.4 % of fp32 peak < 60 %"
    exempt = readme.roofline_exempt(wall)
    want = "met on speedup (a wall-clock time on a GPU: no roofline)"
    assert readme.target_check(good, 33.4, "fp32_tflops", exempt) == want
    stated = ("the busiest stream's kernels", 80.0)
    assert readme.target_check(good, 109.5, "stated", stated=stated) == "met"
    assert readme.target_check(good, 112.0, "stated", stated=stated) == (
        "not met: 112.0 % of the busiest stream's kernels: above the ceiling the pair states"
    )
    assert readme.target_check(good, 111.0, "copy_gbps") == "met"  # a read-heavy kernel may beat a copy's rate
    tie = {**good, "speedup": 1.14, "significance": "no significant difference"}
    assert readme.target_check(tie, 90.0, "copy_gbps", exempt).startswith("not met: speedup interval holds 1.0")


def test_a_speedup_on_ttft_names_it_beside_the_two_ttfts() -> None:
    """ch16's scheduling: the README named no metric beside "1594937 | 1551094 | 5.10×" (µs of a whole call, and a
    TTFT speedup). The row names TTFT and shows the TTFTs it divides; the medians stay the call's."""
    from analysis.report import build_report

    def run(name: str, metrics: dict[str, float], **tags: str) -> StoredRun:
        chapter, example, variant = name.split(":")
        base = {"perflab.chapter": chapter, "perflab.example": example, "perflab.variant": variant,
                "perflab.status": "ok", "perflab.device": "cuda:0", "perflab.gpu": H100}  # fmt: skip
        return StoredRun(name, name, "0", "FINISHED", 0, {**base, **tags}, metrics)

    pair = {"perflab.pair_status": "ok", "perflab.verified": "true", "perflab.significance": "faster",
            "perflab.speedup_metric": "ttft", "perflab.timing_mode": "cuda_event"}  # fmt: skip
    runs = [run("ch16:scheduling:baseline", {"time_median_ms": 1594.937, "ttft_median_ms": 350.0}),
            run("ch16:scheduling:optimized", {"time_median_ms": 1551.094, "ttft_median_ms": 68.6, "speedup": 5.10,
                                              "speedup_ci_low": 4.55, "speedup_ci_high": 5.92}, **pair)]  # fmt: skip
    parent = StoredRun("p", "ch16 on H100", "0", "FINISHED", 0, {}, {})
    rows = build_report(parent, runs)["chapters"]
    text = readme.results_section(readme.Suite(parent, runs, rows, {}, None), "ch16")
    header = next(line for line in text.splitlines() if line.startswith("| example"))
    assert "| baseline median µs | optimized median µs | speedup on | baseline | optimized | speedup |" in header
    row = next(line for line in text.splitlines() if line.startswith("| scheduling"))
    assert "| 1594937 | 1551094 | TTFT | 350 ms | 68.6 ms | 5.10× [4.55, 5.92] |" in row
    assert "under `speedup on`" in text


def test_a_named_section_holds_a_run_of_its_own_beside_the_chapters(
    suite: dict[str, Any], store: Store, tmp_path: Path
) -> None:
    """``--section hopper``: the results-hopper markers only; the chapter's own results section is left as it is,
    and a README without the named markers is skipped, saying which."""
    start, end = readme.markers("results-hopper")
    text = f"{README}\n## On Hopper\n\n{start}\nnot yet\n{end}\n"
    root = chapters_tree(tmp_path, text)
    chapters_tree(root, README.replace("Chapter 7", "Chapter 1"), "ch01")
    ch01 = [result("ch01:y:baseline", flat(2.0)), result("ch01:y:optimized", flat(1.0))]
    parent, _ = log_suite(store, EXP, ch01 + [result("ch07:fast:baseline", flat(1.0)),
                                              result("ch07:fast:optimized", flat(0.5))])  # fmt: skip
    outcomes = {o.chapter: o for o in readme.update_readmes(parent, root, store.uri, section="hopper")}
    assert (outcomes["ch07"].state, outcomes["ch07"].sections) == ("written", ["results-hopper"])
    assert outcomes["ch01"].state == "skipped" and "no results-hopper markers" in outcomes["ch01"].reason
    new = (root / "ch07" / "README.md").read_text()
    assert new.startswith(README)  # the chapter's own section untouched
    assert f"`perflab readme --run-id {parent} --section hopper`" in new and "| fast |" in new.split(start)[1]
    with pytest.raises(ValueError, match=r"--section takes lowercase .* got 'Hop per'"):
        readme.update_readmes(parent, root, store.uri, section="Hop per")


def test_a_chapter_all_skipped_names_the_suites_device_and_only_its_own_targets(store: Store) -> None:
    """Pairs that need two GPUs skip on one: the header still names the GPU the suite ran on (not "CPU"), and of
    the suite's targets only the chapter's own."""
    results = [result("ch01:x:baseline", flat(2.0)), result("ch01:x:optimized", flat(1.0)),
               result("ch04:pp:baseline", None, status="skipped", gpu=None),
               result("ch04:pp:optimized", None, status="skipped", gpu=None)]  # fmt: skip
    parent, ids = log_suite(store, "readme-skip", results)
    for key in ("ch04:pp:baseline", "ch04:pp:optimized"):  # as a variant skipped before it ran is logged
        for tag in ("perflab.hardware", "perflab.gpu"):
            if tag in store.client.get_run(ids[key]).data.tags:
                store.client.delete_tag(ids[key], tag)
    store.client.set_tag(parent, "perflab.targets", "ch1:x ch4:pp ch12:y")
    suite = readme.load_suite(parent, store.uri)
    text = readme.results_section(suite, "ch04")
    assert f"**{H100}**" in text and "not a GPU" not in text, text.splitlines()[0]
    assert "targets ch4:pp)" in text and "ch1:x" not in text
    assert "targets ch1:x)" in readme.results_section(suite, "ch01")
