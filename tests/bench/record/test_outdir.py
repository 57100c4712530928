"""bench/record/outdir.py: ``--out DIR``'s files: each variant as the store holds it, and the JUnit XML of the pairs'
verdicts (failures, skips and pairs not finished, each with why)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from bench.define.result import Comparison, ErrorInfo, Profile, SuiteResult, VariantResult, Verification
from bench.record.contract import variant_metrics, variant_params
from bench.record.outdir import OutDir, junit_xml
from bench.record.pairs import comparison_metrics
from bench.record.summary import summary_dict
from tests.bench.record.test_summary import cmp, suite, vr  # noqa: F401  (the fixture)


def _cases(xml: str) -> tuple[ET.Element, dict[str, ET.Element]]:
    root = ET.fromstring(xml)
    assert root.tag == "testsuites"
    (ts,) = root.findall("testsuite")
    return ts, {f"{c.get('classname')}.{c.get('name')}": c for c in ts.findall("testcase")}


def test_one_testcase_per_pair_failures_skips_and_the_unfinished(suite: SuiteResult) -> None:  # noqa: F811
    suite.variants += [vr("s", "baseline", None, "skipped"), vr("s", "optimized", None, "skipped")]
    suite.comparisons.append(
        Comparison(
            chapter="ch07",
            example="s",
            variant="optimized",
            baseline_status="skipped",
            optimized_status="skipped",
            status="skipped",
            verification=Verification(verified=False, detail="needs two GPUs"),
        )  # fmt: skip
    )
    suite.variants[1].elapsed_s = 2.5  # a's optimized
    ts, cases = _cases(junit_xml(summary_dict(suite), ["ch07:late:optimized"], "the suite's time ran out"))
    assert (ts.get("tests"), ts.get("failures"), ts.get("errors"), ts.get("skipped")) == ("7", "3", "1", "1")
    assert ts.get("time") == "3.000"  # the suite's wall
    a = cases["ch07.a:optimized"]
    assert a.find("failure") is None and a.find("skipped") is None and a.get("time") == "2.500"
    props = {p.get("name"): p.get("value") for p in a.iter("property")}
    assert props["speedup"] == "4.0" and props["verified"] == "true" and props["verdict"] == "no interval"
    for name, kind in (("c", "mismatch"), ("d", "unverified"), ("e", "failed")):
        failure = cases[f"ch07.{name}:optimized"].find("failure")
        assert failure is not None and failure.get("type") == kind, name
    message = cases["ch07.e:optimized"].find("failure").get("message")  # type: ignore[union-attr]
    assert "optimized timeout at measurement: stage 'measurement' exceeded" in message  # the side that failed, why
    out = cases["ch07.e:optimized"].find("system-out").text  # type: ignore[union-attr]
    assert out.startswith("failed: ") and "—" not in out, out  # the reason, not "failed: —; ..."
    skipped = cases["ch07.s:optimized"].find("skipped")
    assert skipped is not None and skipped.get("message") == "needs two GPUs"
    assert cases["ch07.s:optimized"].find("system-out").text == "needs two GPUs"  # not "skipped: —; needs ..."
    error = cases["ch07.late:optimized"].find("error")
    assert error is not None and error.get("message") == "not finished: the suite's time ran out"


def test_a_pair_on_a_generation_metric_says_what_its_speedup_divides(suite: SuiteResult) -> None:  # noqa: F811
    # ch16's scheduling on the CPU: the call medians read 24.1 -> 24.8 ms (slower) beside 2.78x faster on TTFT; the
    # testcase named neither the metric nor its values, so a CI page showed a slower pair passing as "faster".
    suite.comparisons[0] = suite.comparisons[0].model_copy(update={
        "baseline_median_ms": 24.1, "optimized_median_ms": 24.8, "speedup": 2.78, "speedup_ci_low": 1.85,
        "speedup_ci_high": 4.18, "significance": "faster", "speedup_metric": "ttft", "baseline_value": 12.4,
        "optimized_value": 5.24})  # fmt: skip
    _, cases = _cases(junit_xml(summary_dict(suite)))
    a = cases["ch07.a:optimized"]
    props = {p.get("name"): p.get("value") for p in a.iter("property")}
    assert props["verdict"] == "faster" and props["speedup_on"] == "TTFT" and props["value_unit"] == "ms"
    assert (props["baseline_value"], props["optimized_value"]) == ("12.4", "5.24")
    out = a.find("system-out").text  # type: ignore[union-attr]
    assert out.startswith("faster: 2.78× [1.85, 4.18] on TTFT (12.4 ms → 5.24 ms); "), out  # type: ignore[union-attr]
    # a pair on the median call time: its medians are its values, nothing added
    props = {p.get("name"): p.get("value") for p in cases["ch07.b:optimized"].iter("property")}
    assert "speedup_on" not in props and "baseline_value" not in props
    assert " on " not in cases["ch07.b:optimized"].find("system-out").text.split(";")[0]  # type: ignore[union-attr]


def test_a_failed_sides_error_is_in_the_failure_message_once(suite: SuiteResult) -> None:  # noqa: F811
    # the ab kernelbench's softmax:optimized_cached, invalid at its check: the message held the error twice, once as
    # the side's ("optimized invalid at check: ...") and once as the comparison restated it ("optimized invalid: ...")
    error = "output still holds the NaN poison written before measurement"
    suite.variants[-1] = vr("e", "optimized", None, "invalid", error)
    suite.comparisons[-1] = suite.comparisons[-1].model_copy(update={"optimized_status": "invalid", "verification":
                                                             Verification(verified=False, detail=f"optimized invalid: "
                                                                          f"{error}")})  # fmt: skip
    _, cases = _cases(junit_xml(summary_dict(suite)))
    message = cases["ch07.e:optimized"].find("failure").get("message")  # type: ignore[union-attr]
    assert message.count(error) == 1 and message.startswith("failed: optimized invalid at "), message


def test_a_memory_pair_without_a_ratio_says_what_it_is_on(suite: SuiteResult) -> None:  # noqa: F811
    # ch13's activation_checkpointing on a CPU: no peak to read; its testcase showed only the call medians
    # (3.17 -> 5.53 ms) beside "no speedup", as if the times had not divided
    suite.comparisons[0] = suite.comparisons[0].model_copy(update={
        "baseline_median_ms": 3.17, "optimized_median_ms": 5.53, "speedup": None, "speedup_ci_low": None,
        "speedup_ci_high": None, "significance": None, "speedup_metric": "peak_memory"})  # fmt: skip
    _, cases = _cases(junit_xml(summary_dict(suite)))
    a = cases["ch07.a:optimized"]
    props = {p.get("name"): p.get("value") for p in a.iter("property")}
    assert props["verdict"] == "no speedup" and props["speedup_on"] == "peak memory"
    assert "baseline_value" not in props and "speedup" not in props
    assert a.find("system-out").text.startswith("no speedup: — on peak memory; ")  # type: ignore[union-attr]


def test_a_variant_is_written_as_the_store_holds_it(tmp_path: Path, suite: SuiteResult) -> None:  # noqa: F811
    profile = tmp_path / "work" / "profile"
    profile.mkdir(parents=True)
    (profile / "trace.json").write_text("{}")
    optimized = suite.variants[1]
    optimized.profile = Profile(dir=str(profile), bound="memory")
    asked: list[int] = []
    out = OutDir(tmp_path / "out", lambda: asked.append(1) or {"hostname": "h1"})  # type: ignore[func-returns-value]
    d = out.variant(optimized, suite.comparisons[0])
    out.variant(suite.variants[0])
    assert d == tmp_path / "out" / "ch07" / "a" / "optimized" and asked == [1]  # the host asked for once
    assert VariantResult.model_validate_json((d / "result.json").read_text()) == optimized
    assert json.loads((d / "manifest.json").read_text())["host"] == {"hostname": "h1"}
    run = json.loads((d / "run.json").read_text())
    assert run["metrics"] == {**variant_metrics(optimized), **comparison_metrics(suite.comparisons[0])}
    assert run["params"] == variant_params(optimized) and run["tags"]["perflab.status"] == "ok"
    assert Comparison.model_validate_json((d / "comparison.json").read_text()) == suite.comparisons[0]
    assert (d / "profile" / "trace.json").read_text() == "{}"
    baseline = tmp_path / "out" / "ch07" / "a" / "baseline"
    assert (baseline / "result.json").is_file() and not (baseline / "comparison.json").exists()


def test_finish_writes_the_summary_and_the_junit_xml(tmp_path: Path, suite: SuiteResult) -> None:  # noqa: F811
    summary = summary_dict(suite)
    OutDir(tmp_path, dict).finish(summary, "# perflab summary\n", ["ch07:z:optimized"], "interrupted")
    assert json.loads((tmp_path / "summary.json").read_text())["n_pairs"] == summary["n_pairs"]
    assert (tmp_path / "summary.md").read_text() == "# perflab summary\n"
    ts, cases = _cases((tmp_path / "junit.xml").read_text())
    assert ts.get("tests") == "6" and cases["ch07.z:optimized"].find("error") is not None
    assert not list(tmp_path.glob(".*.tmp"))  # written whole, through a temporary file each


NASTY = 'bad | pipe\nsecond line | <xml> & "quotes" \x1b[31mred\x1b[0m \x00 nul \x07'


def test_an_error_with_control_characters_is_a_junit_xml_a_parser_takes(suite: SuiteResult) -> None:  # noqa: F811
    # A benchmark's exception text went into the XML as it was: a NUL or a terminal's colours made the whole file
    # unreadable to Jenkins, GitLab and every other ElementTree-based reader.
    suite.variants[-1] = suite.variants[-1].model_copy(update={"error": ErrorInfo(kind="exception", message=NASTY)})
    ts, cases = _cases(junit_xml(summary_dict(suite), ["ch07:late:optimized"], "stopped \x1b[1mnow\x00"))
    failure = cases["ch07.e:optimized"].find("failure")
    assert failure is not None
    message = failure.get("message") or ""
    assert 'bad | pipe\nsecond line | <xml> & "quotes" red  nul' in message, message
    assert cases["ch07.late:optimized"].find("error").get("message") == "not finished: stopped now"  # type: ignore[union-attr]


def test_a_variant_of_no_pair_that_fails_is_a_failing_testcase(suite: SuiteResult) -> None:  # noqa: F811
    # A baseline without an optimized partner that failed made `perflab run` exit 1 beside a JUnit page all green.
    suite.variants += [vr("solo", "baseline", None, "failed", "RuntimeError: boom"), vr("fine", "baseline", 2.0)]
    ts, cases = _cases(junit_xml(summary_dict(suite), ["ch07:late:baseline", "ch07:z:baseline", "ch07:z:optimized"]))
    failure = cases["ch07.solo:baseline"].find("failure")
    assert failure is not None and failure.get("type") == "failed"
    assert failure.get("message") == "baseline failed at measurement: RuntimeError: boom"
    assert cases["ch07.fine:baseline"].find("failure") is None
    assert "ch07.z:baseline" not in cases  # its pair's testcase says it did not finish
    assert cases["ch07.late:baseline"].find("error") is not None  # a lone baseline not finished
    assert (ts.get("tests"), ts.get("failures"), ts.get("errors")) == ("9", "4", "2")
    root = ET.fromstring(junit_xml(summary_dict(suite)))
    assert (root.get("tests"), root.get("failures")) == ("7", "4")  # the totals on testsuites too


def test_begin_removes_what_an_earlier_run_wrote_and_nothing_else(tmp_path: Path, suite: SuiteResult) -> None:  # noqa: F811
    # Two runs into one --out DIR left the first's variant directories beside the second's summary, and a run
    # killed before its end left the first's junit.xml to pass the CI job.
    first = OutDir(tmp_path, lambda: {"gpu": None})
    for v in suite.variants[:4]:
        first.variant(v)
    first.finish(summary_dict(suite), "# perflab summary\n")
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "ch07" / "a" / "mine.txt").write_text("mine")
    removed = OutDir(tmp_path, dict).begin()
    assert len(removed) == 3 + 4
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "ch07", "ch07/a", "ch07/a/mine.txt", "notes.txt"]  # fmt: skip
    assert OutDir(tmp_path, dict).begin() == []
