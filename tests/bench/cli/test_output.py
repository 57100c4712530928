"""bench/cli/output.py and the suite's table and lines (bench/cli/common.py) as a reader sees them: 80 columns,
no terminal, names never cut, units in the headers, data never taken for markup."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from bench.cli import common, output
from bench.define.result import Comparison, ErrorInfo, SuiteResult, VariantResult, VariantSpec, Verification

NAMES = ("aos_soa", "gather_locality", "stencil_blocking", "tiled_matmul")


def screen(width: int, terminal: bool = False) -> Console:
    return Console(width=width, file=io.StringIO(), force_terminal=terminal, emoji=False, color_system=None)


def text_of(out: Console) -> str:
    assert isinstance(out.file, io.StringIO)
    return out.file.getvalue()


def pair(example: str, base: float, opt: float, low: float, high: float, chapter: str = "ch07",
         variant: str = "optimized") -> Comparison:  # fmt: skip
    speedup = base / opt
    significance = "faster" if low > 1 else "slower" if high < 1 else "no significant difference"
    return Comparison(chapter=chapter, example=example, variant=variant, baseline_status="ok", optimized_status="ok",
                      baseline_median_ms=base, optimized_median_ms=opt, speedup=speedup, speedup_ci_low=low,
                      speedup_ci_high=high, significance=significance, status="ok",
                      verification=Verification(verified=True, outcome="match", detail="equal"))  # fmt: skip


def suite(*pairs: Comparison) -> SuiteResult:
    return SuiteResult(variants=[], comparisons=list(pairs))


CH07 = suite(
    pair("aos_soa", 4.02, 2.5, 1.52, 1.7), pair("gather_locality", 2.5, 2.47, 0.96, 1.07),
    pair("stencil_blocking", 15.1, 17.8, 0.81, 0.9), pair("tiled_matmul", 208.0, 4.23, 46.2, 53.1),
)  # fmt: skip


def render(s: SuiteResult, width: int) -> str:
    out = screen(width)
    out.print(common.table(s, width))
    return text_of(out)


def test_a_chapter_table_fits_80_columns_with_every_name_whole() -> None:
    text = render(CH07, 80)
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "…" not in text
    assert text.splitlines()[0].startswith("ch07:")  # the chapter, named once in the title ...
    for name in NAMES:  # ... not before each name, so each fits
        assert any(line.startswith(f"{name} ") for line in text.splitlines()), name
    assert "baseline" in text and "ms" in text  # the unit in the header
    assert "49.2×" in text and "46.2–53.1" in text  # 208 / 4.23 = 49.17


def test_short_verdicts_leave_their_room_to_the_names() -> None:
    """Every pair "faster": the verdict column is as wide as "verdict", not as "no significant difference" would
    need, and an 18-character name stays on one line at 80 columns."""
    names = ("case_1_tf32", "case_4_fused_adamw", "case_6_no_sync", "case_total")
    text = render(suite(*(pair(n, 655.0, 256.0, 2.52, 2.6, chapter="ch20") for n in names)), 80)
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines)
    for name in names:
        assert any(line.startswith(f"{name} ") for line in lines), name


@pytest.mark.parametrize("width", [40, 60, 80, 100, 200])
def test_no_name_or_verdict_is_cut_at_any_width(width: int) -> None:
    long = pair("transpose", 19.6, 6.6, 2.8, 3.14, variant="optimized_tiled_smem_padded")
    other = pair("x", 1.0, 1.0, 0.9, 1.1, chapter="ch01")  # two chapters: the prefix stays
    text = render(suite(*CH07.comparisons, long, other), width)
    assert "…" not in text  # rich's ellipsis: what "ch07:aos…" was
    lines = text.splitlines()
    if width >= 100:  # two chapters: the names keep theirs, and fold below that
        for name in NAMES:
            assert any(line.startswith(f"ch07:{name} ") for line in lines), name
    flat = "".join(text.split())
    for name in (*(f"ch07:{n}" for n in NAMES), "ch07:transpose(optimized_tiled_smem_padded)", "ch01:x",
                 "nosignificantdifference"):  # fmt: skip
        chars = iter(flat)  # a folded name: each character still there, in order
        assert all(ch in chars for ch in name), name


def test_a_name_too_long_for_its_column_breaks_after_an_underscore() -> None:
    """Chapter 17 on the H200 at 80 columns: ``speculative_batch`` had 16 characters and read ``speculative_batc``
    / ``h``; it breaks where its words join, and a name with room stays whole."""
    wide = "no significant difference"
    pairs = [pair("moe_routing", 17.8, 1.68, 7.25, 14.2, chapter="ch17"),
             pair("speculative", 2230.0, 1650.0, 0.72, 3.99, chapter="ch17"),
             pair("speculative", 2230.0, 1320.0, 1.13, 3.34, chapter="ch17", variant="optimized_k2"),
             pair("speculative_batch_prefill", 711.0, 409.0, 1.55, 2.42, chapter="ch17")]  # fmt: skip
    pairs[1].significance = wide
    lines = render(suite(*pairs), 60).splitlines()
    assert all(len(line) <= 60 for line in lines)
    starts = [line.split(" ")[0] for line in lines]
    assert "speculative_" in starts and ("batch_" in starts or "batch_prefill" in starts), lines
    assert not any(s in ("h", "ll", "fill") for s in starts), lines  # no word folded mid-way
    assert any(line.startswith("moe_routing ") for line in lines)
    assert common.table(suite(*pairs), 200).columns[0]._cells[3].plain == "speculative_batch_prefill"


def test_a_long_name_wraps_after_a_colon_not_mid_word() -> None:
    """rich breaks a name without spaces at the column's edge ("fp8_training:optimized_te" / "nsorwise", two
    variants reading alike on their first line): a name breaks after its colons or spaces, a part still too wide
    after an underscore, and only a piece wider than the column is left to fold."""
    name = "ch19:fp8_training:optimized_tensorwise"
    assert output.name_lines(name, None) == output.name_lines(name, 38) == name
    assert output.name_lines(name, 26) == "ch19:fp8_training:\noptimized_tensorwise"
    assert output.name_lines("transpose (optimized_tiled)", 18) == "transpose\n(optimized_tiled)"
    assert output.name_lines("ch13:paged_attention:v2", 10) == "ch13:\npaged_\nattention:\nv2"
    # the ab kernelbench at 80 columns, a name column of 24: "softmax (optimized_" / "fused)" beside its
    # neighbours' "softmax" / "(optimized_cached)": the space between the two words counts toward the line
    assert output.name_lines("softmax (optimized_fused)", 24) == "softmax\n(optimized_fused)"
    # perflab ab's pair of a candidate named like its problem, at 80 columns: "(optimized_plain_mm_fast_" / "gb)"
    # broke at the last underscore that fit; the lines are as even as they can be, the variant's own name whole
    name = "plain_mm (optimized_plain_mm_fast_gb)"
    assert output.name_lines(name, 25) == output.name_lines(name, 20) == "plain_mm\n(optimized_\nplain_mm_fast_gb)"
    assert output.name_lines(name, 10) == "plain_mm\n(optimized_\nplain_mm_\nfast_gb)"  # wider pieces: whole
    long = pair("fp8_training", 19.6, 6.6, 2.8, 3.14, chapter="ch19", variant="optimized_tensorwise")
    lines = render(suite(long, pair("x", 1.0, 1.0, 0.9, 1.1, chapter="ch01")), 80).splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("ch19:fp8_training "))
    assert [line.strip() for line in lines[at + 1 : at + 3]] == ["(optimized_", "tensorwise)"]


def test_a_pair_within_the_noise_threshold_says_so_in_its_verdict() -> None:
    """An A/A pair whose interval excludes 1.0 by 0.02 %: "no significant difference*", and why below the table."""
    aa = pair("atomic_reduction", 1.0, 1.0002, 0.9997, 0.9998).model_copy(
        update={"significance": "no significant difference", "noise_threshold": 0.01})  # fmt: skip
    text = render(suite(*CH07.comparisons, aa), 80)
    assert all(len(line) <= 80 for line in text.splitlines())
    chars = iter("".join(text.split("atomic_reduction", 1)[1].split()))  # its row, folded: each character in order
    assert all(ch in chars for ch in "nosignificantdifference*")
    assert text.rstrip().splitlines()[-1].strip() == (
        "* its interval excludes 1.0 but reaches into the ±1 % noise threshold"
    )  # the why, once, below the table
    assert "*" not in render(CH07, 80)  # no pair within the threshold: no mark, no note


def test_times_take_the_unit_of_their_column() -> None:
    fast = suite(pair("a", 0.004, 0.002, 1.8, 2.2), pair("b", 0.0031, 0.0029, 0.9, 1.2))
    text = render(fast, 80)
    assert "µs" in text and "ms" not in text and "4.00" in text and "2.00" in text and "0.00" not in text


def test_a_line_is_one_line_and_keeps_brackets() -> None:
    """Off a terminal (a CI log, ``| cat``: ``perflab run`` passes no width) a variant's line is one line however
    long: the README's "a line per variant", read by scripts/gpu_session.sh's awk."""
    spec = VariantSpec(chapter="ch07", example="x", variant="optimized", path="/x.py")
    failed = VariantResult(
        spec=spec,
        status="failed",
        failed_stage="setup",
        error=ErrorInfo(kind="exception", message="no [GPU] here: [L2 flush] " + "word " * 30),
    )
    out = screen(80)
    with output.progress("ch07", 2, out) as report:
        report(common.line(failed, None, "ch07:"))
    text = text_of(out)
    assert text.count("\n") == 1 and len(text) > 80 and "[setup]" in text and "no [GPU] here: [L2 flush]" in text
    assert text.split()[:3] == ["1/2", "failed", "x:optimized"]  # counted: no terminal, no bar


def test_on_a_terminal_a_long_line_goes_on_under_the_name() -> None:
    """On an 80-column terminal a failed variant's long error ran past the edge, the terminal breaking it mid-word
    at column 0: given the width, the error goes on under the name, between words, a figure beside its unit."""
    spec = VariantSpec(chapter="ch07", example="x", variant="optimized", path="/x.py")
    message = "no [GPU] here: [L2 flush] " + "word " * 30 + "after 12.0 s"
    failed = VariantResult(spec=spec, status="failed", failed_stage="setup",
                           error=ErrorInfo(kind="exception", message=message))  # fmt: skip
    shown = common.line(failed, None, "ch07:", width=80)
    lines = shown.plain.splitlines()
    assert len(lines) > 1 and all(len(x) <= 80 for x in lines), lines
    assert lines[0].startswith(" failed x:optimized  [setup] no [GPU] here: [L2 flush]"), lines
    assert all(x.startswith(" " * 8) and x[8] != " " for x in lines[1:]) and lines[-1].endswith("after 12.0 s"), lines
    assert " ".join(shown.plain.split()) == " ".join(common.line(failed, None, "ch07:").plain.split())  # every word
    assert [(x.start, x.end, x.style) for x in shown.spans] == [(0, 7, "red")]  # the status keeps its colour
    short = failed.model_copy(update={"error": ErrorInfo(kind="exception", message="no GPU")})
    assert common.line(short, None, "ch07:", width=80).plain == " failed x:optimized  [setup] no GPU"  # it fits


def test_slower_and_not_significant_pairs_read_so_on_their_line() -> None:
    spec = VariantSpec(chapter="ch07", example="stencil_blocking", variant="optimized", path="/x.py")
    from bench.define.result import Timing
    from bench.measure.stats import summarize

    timing = Timing(mode="cpu", method="t", samples_ms=[17.8], stats=summarize([17.8]))
    ok = VariantResult(spec=spec, status="ok", timing=timing)
    out = screen(80)
    out.print(common.line(ok, CH07.comparisons[2], "ch07:"), soft_wrap=True)
    out.print(common.line(ok, CH07.comparisons[1], "ch07:"), soft_wrap=True)
    lines = text_of(out).splitlines()
    assert lines[0].endswith("17.8 ms  0.85× slower") and len(lines[0]) <= 80
    assert lines[1].endswith("no significant difference")
    rounds = CH07.comparisons[2].model_copy(update={"round_speedups": [0.84, 0.86, 0.85], "rounds_stop": "decided"})
    out.print(common.line(ok, rounds, "ch07:"), soft_wrap=True)
    assert text_of(out).splitlines()[-1].endswith("0.85× slower (3 rounds, decided)")  # the 80 columns' rounds
    busy = rounds.model_copy(update={"round_speedups": [0.84, 0.86, 0.85, 0.85], "rounds_left_out": [1]})
    out.print(common.line(ok, busy, "ch07:"), soft_wrap=True)
    assert text_of(out).endswith("0.85× slower (4 rounds, decided; round 1 left out: host busy)\n"), text_of(out)


def test_progress_is_rich_on_a_terminal_and_plain_lines_elsewhere() -> None:
    tty = screen(80, terminal=True)
    with output.progress("suite", 3, tty) as report:
        for i in range(3):
            report(f"line {i} [kept]")
    text = text_of(tty)
    assert "line 2 [kept]" in text and "1/3 line" not in text  # the bar counts, not the lines
    assert "\x1b[?25l" in text  # rich's live display hid the cursor to draw its bar (removed when done)
    plain = screen(80)
    with output.progress("suite", 3, plain) as report:
        report("a")
        report(None)  # a step without a line
        report("c")
    assert [ln.split() for ln in text_of(plain).splitlines()] == [["1/3", "a"], ["3/3", "c"]]


def test_an_error_is_one_line_whatever_the_width(monkeypatch: pytest.MonkeyPatch) -> None:
    out = Console(width=40, file=io.StringIO(), stderr=True, emoji=False, soft_wrap=True, color_system=None)
    monkeypatch.setattr(output, "err_console", out)
    output.error("run 'bogus' is not in the store 'sqlite:///a/very/long/path/to/mlflow.db' [really]")
    assert text_of(out) == "error: run 'bogus' is not in the store 'sqlite:///a/very/long/path/to/mlflow.db' [really]\n"


def test_an_output_directory_is_checked_or_refused_in_one_line_naming_the_option(tmp_path: Path) -> None:
    from bench.errors import PerflabError

    assert output.writable_dir(tmp_path / "a" / "b", "--out") == tmp_path / "a" / "b"
    assert list(tmp_path.iterdir()) == []  # checked, not made: the command makes it when it writes there
    (tmp_path / "file").write_text("")
    with pytest.raises(PerflabError, match=r"^--out '.*/file': a file, not a directory; pass a writable directory$"):
        output.writable_dir(tmp_path / "file", "--out")
    with pytest.raises(PerflabError, match=r"^--save-path '.*/file/sub': cannot write there \(.*/file is a file\)"):
        output.writable_dir(tmp_path / "file" / "sub", "--save-path")
    assert output.can_write_in(tmp_path) is None and sorted(tmp_path.iterdir()) == [tmp_path / "file"]


def test_a_refused_directory_leaves_none_made(tmp_path: Path) -> None:
    """``--out new1/new2/<300 characters>``: new1 and new2 could be made, the last name is too long for the file
    system; the refusal names the path and why, and leaves neither behind."""
    from bench.errors import PerflabError

    bad = tmp_path / "new1" / "new2" / ("x" * 300)
    with pytest.raises(PerflabError, match=r"^--out '.*/new2/x+': cannot write there \(File name too long\)"):
        output.writable_dir(bad, "--out")
    assert list(tmp_path.iterdir()) == []


def test_commands_refuse_an_unwritable_out_before_any_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from bench.errors import PerflabError
    from perflab.cli import app

    (tmp_path / "file").write_text("")
    bad = str(tmp_path / "file" / "out")
    pair_files = [str(p) for p in sorted(Path(common.__file__).parents[2].glob("chapters/ch07/*_transpose.py"))]
    for args in (["report", "--out", bad, "--tracking-uri", f"sqlite:///{tmp_path}/none.db"],
                 ["selfcheck", "--out", bad], ["overhead", "--out", bad], ["sweep", "replay", "--out", bad],
                 ["kernels", "--save-path", bad], ["run", "-t", "ch7:transpose", "--no-track", "--out", bad],
                 ["ab", *pair_files, "--no-track", "--out", bad]):  # fmt: skip
        result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})  # perflab's main() prints the error
        assert isinstance(result.exception, PerflabError), (args, result.output)
        assert f"cannot write there ({tmp_path / 'file'} is a file)" in str(result.exception), args
        assert not (tmp_path / "none.db").exists()
    monkeypatch.setenv("PERFLAB_RESULTS_DIR", bad)  # no --out: the default, perflab-results/, checked alike
    result = CliRunner().invoke(app, ["report", "--tracking-uri", f"sqlite:///{tmp_path}/none.db"])
    assert isinstance(result.exception, PerflabError) and str(result.exception).startswith("--out's default "), result
    new = tmp_path / "new"  # a refusal of something else after --out was checked: no directory made either
    result = CliRunner().invoke(app, ["run", "-t", "ch999", "--no-track", "--out", str(new)])
    assert isinstance(result.exception, PerflabError) and "unknown chapter 'ch999'" in str(result.exception)
    assert sorted(tmp_path.iterdir()) == [tmp_path / "file"]


def on(c: Comparison, metric: str, call: tuple[float, float], values: tuple[float, float]) -> Comparison:
    """``c`` compared on ``metric`` (a generation's): its two ``values``; ``call``: each side's median call."""
    speedup = values[1] / values[0] if metric == "throughput" else values[0] / values[1]
    return c.model_copy(update={"speedup_metric": metric, "baseline_median_ms": call[0],
                                "optimized_median_ms": call[1], "baseline_value": values[0],
                                "optimized_value": values[1], "speedup": speedup})  # fmt: skip


CH16 = suite(
    on(pair("scheduling", 1, 1, 2.9, 3.3, "ch16"), "ttft", (1541.0, 2741.0), (350.0, 113.0)),
    on(pair("chunked_prefill", 1, 1, 3.0, 3.6, "ch16"), "itl_p99", (1600.0, 1500.0), (40.0, 12.0)),
    on(pair("paged_kv", 1, 1, 1.7, 1.9, "ch16"), "throughput", (900.0, 500.0), (1000.0, 1800.0)),
    pair("prefix_sharing", 1200.0, 1100.0, 0.98, 1.2, "ch16"),
)


@pytest.mark.parametrize("width", [80, 120])
def test_a_speedup_on_another_metric_is_named_beside_its_values(width: int) -> None:
    """ch16's scheduling read "1541 ms -> 2741 ms  3.10x faster": the speedup is on TTFT. The row names it, shows
    the TTFTs it divides, and keeps the median call times in a column of their own; at 80 columns, names whole."""
    text = render(CH16, width)
    lines = text.splitlines()
    assert all(len(line) <= width for line in lines) and "…" not in text
    row = {line.split()[0]: line for line in lines if line.split() and line.split()[0] in
           ("scheduling", "chunked_prefill", "paged_kv", "prefix_sharing")}  # fmt: skip
    assert row["scheduling"].split()[1:6] == ["TTFT", "ms", "350→113", "1.54→2.74", "3.10×"]
    assert row["chunked_prefill"].split()[1:4] == ["ITL", "p99", "40.0→12.0"]
    assert row["paged_kv"].split()[1:4] == ["tokens/s", "1000→1800", "0.900→0.500"]
    assert row["prefix_sharing"].split()[1:4] == ["call", "s", "1.20→1.10"]  # on the call time: said so
    header = "".join(lines[1:4])
    assert "median call s" in " ".join(header.split()) or "median" in header
    assert ("2.90–3.30" in text) == (width >= 90)  # below 90: the verdict says what the interval shows


def test_a_line_names_the_metric_its_speedup_is_on() -> None:
    spec = VariantSpec(chapter="ch16", example="scheduling", variant="optimized", path="/x.py")
    from bench.define.result import Timing
    from bench.measure.stats import summarize

    timing = Timing(mode="cpu", method="t", samples_ms=[2741.0], stats=summarize([2741.0]))
    out = screen(80)
    out.print(common.line(VariantResult(spec=spec, status="ok", timing=timing), CH16.comparisons[0], "ch16:"))
    assert text_of(out).rstrip().endswith("2.74 s  3.10× on TTFT faster")


def test_verdicts_of_one_round_on_the_hosts_clock_are_counted_for_a_note() -> None:
    """``--rounds 1`` on a CPU: a verdict whose interval assumed the spread between processes is noted under the
    table; a GPU clock's, or a pair in rounds, is not."""
    from bench.cli.report import _one_round_on_the_host
    from bench.define.result import Timing, VariantResult, VariantSpec
    from bench.measure.stats import summarize

    def side(example: str, mode: str, rounds: list[int] | None) -> VariantResult:
        spec = VariantSpec(chapter="ch07", example=example, variant="optimized", path="/x.py")
        timing = Timing(mode=mode, method="t", samples_ms=[1.0, 1.1], stats=summarize([1.0, 1.1]), rounds=rounds)
        return VariantResult(spec=spec, status="ok", timing=timing)

    s = suite(*CH07.comparisons)  # aos_soa faster, gather_locality no difference, stencil slower, tiled faster
    s.variants = [side("aos_soa", "cpu", None), side("gather_locality", "cpu", None),
                  side("stencil_blocking", "cpu", [3, 3, 3]), side("tiled_matmul", "cuda_event", None)]  # fmt: skip
    assert _one_round_on_the_host(s) == 1  # aos_soa: faster, one round, the host's clock
    s.comparisons[0] = s.comparisons[0].model_copy(update={"status": "mismatch"})  # no verdict: its outputs differ
    assert _one_round_on_the_host(s) == 0


def test_the_time_line_adds_up_to_the_wall_with_the_profiles_after_the_runs() -> None:
    # ch13 on a CPU, one worker: 222.2 s running, 0.5 s checking, 0.2 s idle of a 307.7 s wall, the other 84.8 s
    # its profile children (round 0's) and logging after each run, which the line left unnamed
    from bench.cli.report import time_lines

    entry = {"worker": 0, "start_s": 0.1, "end_s": 10.0, "ahead_s": 0.0, "late_s": 0.0, "beside": False}
    timeline = [{**entry, "key": "ch13:a:baseline", "run_s": 2.0, "compare_s": 0.0, "other_s": 27.3},
                {**entry, "key": "ch13:a:optimized", "run_s": 2.5, "compare_s": 0.1, "other_s": 22.2}]  # fmt: skip
    s = SuiteResult(variants=[], comparisons=[], wall_s=54.2, timeline=timeline)
    first = time_lines(s, None, cold_start=True, before_s=None)[0]
    assert first == "time: 1 worker(s), 4.5 s running variants, 0.1 s checking outputs, 49.5 s profiling and " \
        "logging after the runs, 0.1 s idle"  # fmt: skip
    figures = [float(x) for x in re.findall(r"([\d.]+) s", first)]
    assert sum(figures) == pytest.approx(s.wall_s)  # one worker: the line sums to the wall


def test_a_line_names_the_metric_a_pair_without_a_speedup_was_on() -> None:
    # ch13's activation_checkpointing on a CPU: judged on peak memory, which a CPU cannot read; the line read
    # "5.53 ms no speedup", as if its call times (3.17 -> 5.53 ms) had failed to divide
    spec = VariantSpec(chapter="ch13", example="activation_checkpointing", variant="optimized", path="/x.py")
    from bench.define.result import Timing
    from bench.measure.stats import summarize

    timing = Timing(mode="cpu", method="t", samples_ms=[5.53], stats=summarize([5.53]))
    c = Comparison(chapter="ch13", example="activation_checkpointing", variant="optimized", baseline_status="ok",
                   optimized_status="ok", baseline_median_ms=3.17, optimized_median_ms=5.53, status="ok",
                   speedup_metric="peak_memory", verification=Verification(verified=True, detail="match"))  # fmt: skip
    out = screen(80)
    out.print(common.line(VariantResult(spec=spec, status="ok", timing=timing), c, "ch13:"))
    assert text_of(out).rstrip().endswith("5.53 ms no speedup on peak memory")
    out = screen(80)
    out.print(common.line(VariantResult(spec=spec, status="ok", timing=timing), c.model_copy(
        update={"speedup_metric": "time"}), "ch13:"))  # fmt: skip
    assert text_of(out).rstrip().endswith("5.53 ms no speedup")


def test_the_note_on_one_round_verdicts_wraps_at_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a terminal, at ``COLUMNS=80``: the note under a ``--rounds 1`` suite's table (180 characters) wraps
    between its words, as the table does, instead of running past the edge."""
    from bench.cli import report
    from bench.define.result import Timing
    from bench.measure.stats import summarize

    out = screen(80)
    monkeypatch.setattr(report, "console", out)
    spec = VariantSpec(chapter="ch07", example="aos_soa", variant="optimized", path="/x.py")
    timing = Timing(mode="cpu", method="t", samples_ms=[1.0, 1.1], stats=summarize([1.0, 1.1]))
    s = suite(CH07.comparisons[0])
    s.variants = [VariantResult(spec=spec, status="ok", timing=timing)]
    report.report_suite(s, None, None, True, None)
    lines = text_of(out).splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("note: 1 verdict(s) of one round"))
    assert all(len(line) <= 80 for line in lines[at : at + 3]), lines[at:]
    assert " ".join(lines[at : at + 3]).endswith("rounds (the default) measure it"), lines[at:]


def test_a_profile_line_wraps_its_bound_line_under_its_indent(monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.text import Text

    out = screen(80)
    monkeypatch.setattr(common, "console", out)
    common.print_line(Text("     ok ch07:x:baseline\n          bound: unknown (no ncu counters (ncu not requested); "
                           "no roofline: no timed median (profile-only run)); torch ok"))  # fmt: skip
    lines = out.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert lines[0] == "     ok ch07:x:baseline" and len(lines) == 3
    assert all(ln.startswith(" " * 10) and len(ln) <= 80 and ln == ln.rstrip() for ln in lines[1:])
    assert "profile-only run" in lines[2]  # never broken at a hyphen
