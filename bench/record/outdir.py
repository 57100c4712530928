"""A suite's results as files, for CI pipelines (``perflab run --out DIR``): each variant as the store holds it, the
summary, and a JUnit XML of the pairs' verdicts that CI systems display.

Layout (a variant's files are written as it finishes, so a suite that is stopped keeps them; the rest at its end;
what an earlier run wrote in the directory is removed as the suite starts: ``OutDir.begin``)::

    DIR/
      summary.json, summary.md      the parent run's artifacts (bench.record.summary)
      junit.xml                     one testcase per pair: classname the chapter, name ``example:variant``
      <chapter>/<example>/<variant>/
        result.json, manifest.json  the variant run's artifacts (bench.record.contract.variant_files)
        run.json                    its metrics, params and tags, as they are logged
        comparison.json             the pair, for an optimized variant
        profile/                    the profile's files, with --profile
        files/                      the files the variant handed to the harness (``context().file``), as logged

JUnit: a pair whose status is ``mismatch``, ``unverified`` or ``failed`` (a side failed, timed out or was
invalid) is a failure, ``skipped`` is skipped, and a pair the suite did not finish (interrupted, or its
``--suite-timeout`` reached) is an error; the others pass, their verdict (``faster``, ``slower``, ``no significant
difference``) and speedup in the testcase's properties and output (with ``speedup_on``, ``baseline_value`` and
``optimized_value`` where the speedup is not on the median call). A variant of no pair (a baseline without a partner)
is a testcase of its own, failing when not ok. A suite's exit status says the same. Text is kept to what XML 1.0
allows (a benchmark's error may hold a terminal's colours, a NUL: bench.record.text).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.define.result import Comparison, VariantResult
from bench.record.contract import (
    host_tags,
    variant_files,
    variant_metrics,
    variant_params,
    variant_tags,
)
from bench.record.pairs import comparison_metrics, comparison_tags
from bench.record.summary import basis_of, speedup_text, value_text, verdict_text
from bench.record.text import plain_text
from bench.record.units import time_text

__all__ = ["OutDir", "junit_xml"]

_FAILURES = ("mismatch", "unverified", "failed")
_SUITE_FILES = ("summary.json", "summary.md", "junit.xml")


def _write(path: Path, text: str) -> None:
    """Atomically: a CI step reading the directory while the suite runs never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


class OutDir:
    """``--out DIR``: ``begin`` before the suite, ``variant`` as each finishes (from any worker's thread), ``finish``
    once at the suite's end.
    ``describe_host``: the host manifest (bench.record.manifest.host_manifest), asked once, on first use."""

    def __init__(self, root: Path, describe_host: Callable[[], dict[str, Any]]) -> None:
        self.root = root
        self._describe_host = describe_host
        self._host: dict[str, Any] | None = None
        self._lock = threading.Lock()

    def begin(self) -> list[Path]:
        """Before the suite's first variant: what an earlier run wrote here removed, so that the directory holds this
        run's results only (a ``junit.xml`` left from a run that passed never stands for one killed before its end,
        nor a variant it ran for one this run did not). Only perflab's own files go: the three at the top, and each
        ``<chapter>/<example>/<variant>/`` holding a ``run.json`` (with the directories that leaves empty); anything
        else in the directory stays. Returns what was removed."""
        removed = [p for p in (self.root / n for n in _SUITE_FILES) if p.is_file()]
        for p in removed:
            p.unlink()
        for run in sorted(self.root.glob("*/*/*/run.json")):
            variant = run.parent
            if not variant.is_symlink() and (variant / "result.json").is_file():
                shutil.rmtree(variant)
                removed.append(variant)
                for parent in (variant.parent, variant.parent.parent):
                    with contextlib.suppress(OSError):  # not empty: something else lives there
                        parent.rmdir()
        return removed

    def _host_manifest(self) -> dict[str, Any]:
        with self._lock:
            if self._host is None:
                self._host = self._describe_host()
            return self._host

    def variant(self, result: VariantResult, comparison: Comparison | None = None) -> Path:
        """The variant's directory, written: its artifacts, its run's metrics, params and tags, its pair."""
        spec = result.spec
        d = self.root / spec.chapter / spec.example / spec.variant
        host = result.host or self._host_manifest()
        for name, text in variant_files(result, host).items():
            _write(d / name, text)
        metrics = variant_metrics(result)
        tags = {**variant_tags(result), **host_tags(host)}
        if comparison is not None:
            metrics.update(comparison_metrics(comparison))
            tags.update(comparison_tags(comparison, None))
            _write(d / "comparison.json", comparison.model_dump_json(indent=2))
        run = {"name": spec.key, "metrics": metrics, "params": variant_params(result), "tags": tags}
        _write(d / "run.json", json.dumps(run, indent=2, sort_keys=True, default=str))
        profile = Path(result.profile.dir) if result.profile and result.profile.dir else None
        if profile is not None and profile.is_dir():  # still there: the suite removes it after this call
            shutil.copytree(profile, d / "profile", dirs_exist_ok=True)
        if result.files and Path(result.files).is_dir():  # likewise
            shutil.copytree(result.files, d / "files", dirs_exist_ok=True)
        return d

    def finish(self, summary: Mapping[str, Any], summary_md: str, not_finished: Sequence[str] = (),
               why: str = "") -> None:  # fmt: skip
        """The suite's files (``_SUITE_FILES``): ``summary.json``, ``summary.md`` and ``junit.xml``; ``not_finished``:
        the keys of the variants the suite did not finish, ``why`` it did not (errors in the JUnit XML: a pair's, or a
        variant's of no pair)."""
        _write(self.root / "summary.json", json.dumps(summary, indent=2, default=str))
        _write(self.root / "summary.md", summary_md)
        _write(self.root / "junit.xml", junit_xml(summary, not_finished, why))


def junit_xml(summary: Mapping[str, Any], not_finished: Sequence[str] = (), why: str = "") -> str:
    """The pairs of ``summary`` (bench.record.summary.summary_dict) as a JUnit XML test suite, one testcase each
    (the module's docstring says which outcome is which); ``not_finished`` pairs as errors saying ``why``."""
    pairs = list(summary.get("pairs") or [])
    variants = {v["key"]: v for v in summary.get("variants") or []}
    cases = [_case(p, variants) for p in pairs]
    # A variant of no pair (a baseline without an optimized partner) is a testcase of its own: one that fails
    # makes the suite's exit status 1, and a CI page must show why rather than all green.
    paired = {f"{p['chapter']}:{p['example']}" for p in pairs} | {k.rsplit(":", 1)[0] for k in not_finished
                                                                  if not k.endswith(":baseline")}  # fmt: skip
    cases += [_lone_case(v) for key, v in variants.items() if key.rsplit(":", 1)[0] not in paired]
    unfinished = [k for k in not_finished if not k.endswith(":baseline") or k.rsplit(":", 1)[0] not in paired]
    for key in unfinished:  # a pair's baseline not finished: its pair's testcase says so
        chapter, example, variant = key.split(":", 2)
        case = ET.Element("testcase", classname=chapter, name=f"{example}:{variant}", time="0")
        ET.SubElement(case, "error", type="not finished", message=f"not finished: {why or 'the suite stopped'}")
        cases.append(case)
    suite = ET.Element(
        "testsuite", name="perflab", tests=str(len(cases)), time=f"{float(summary.get('wall_s') or 0.0):.3f}",
        failures=str(sum(c.find("failure") is not None for c in cases)), errors=str(len(unfinished)),
        skipped=str(sum(c.find("skipped") is not None for c in cases)),
    )  # fmt: skip
    suite.extend(cases)
    root = ET.Element(
        "testsuites",
        name="perflab",
        tests=suite.get("tests", "0"),
        failures=suite.get("failures", "0"),
        errors=suite.get("errors", "0"),
        skipped=suite.get("skipped", "0"),
        time=suite.get("time", "0"),
    )
    root.append(suite)
    for element in root.iter():  # a benchmark's error may hold anything: colours, a NUL; XML 1.0 takes none
        element.text = plain_text(element.text) if element.text else element.text
        for name, value in element.attrib.items():
            element.set(name, plain_text(value))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _lone_case(variant: Mapping[str, Any]) -> ET.Element:
    """A variant of no pair: it passes when ``ok`` (its median in its output), else fails with its status, stage and
    error."""
    chapter, example, name = str(variant["key"]).split(":", 2)
    case = ET.Element("testcase", classname=chapter, name=f"{example}:{name}",
                      time=f"{float(variant.get('elapsed_s') or 0.0):.3f}")  # fmt: skip
    status = variant.get("status")
    if status == "ok":
        text = f"ok: median {time_text(variant.get('median_ms'))} (no optimized partner)"
    else:
        text = f"{name} {status} at {variant.get('failed_stage') or '?'}: {variant.get('error') or ''}"
        kind = "skipped" if status == "skipped" else "failure"
        ET.SubElement(case, kind, **({} if kind == "skipped" else {"type": str(status)}), message=text[:1000])
    ET.SubElement(case, "system-out").text = text
    return case


def _case(pair: Mapping[str, Any], variants: Mapping[str, Mapping[str, Any]]) -> ET.Element:
    """One pair's testcase: its verdict and speedup as properties and output, a failure or skip by its status (with
    each side's error), its time the optimized variant's."""
    sides = {side: variants.get(f"{pair['chapter']}:{pair['example']}:{name}") or {}
             for side, name in (("baseline", "baseline"), ("optimized", pair["variant"]))}  # fmt: skip
    elapsed = float(sides["optimized"].get("elapsed_s") or 0.0)
    case = ET.Element("testcase", classname=str(pair["chapter"]), name=f"{pair['example']}:{pair['variant']}",
                      time=f"{elapsed:.3f}")  # fmt: skip
    props = ET.SubElement(case, "properties")
    shown = {"verdict": pair.get("verdict"), "speedup": pair.get("speedup"), "speedup_ci_low":
             pair.get("speedup_ci_low"), "speedup_ci_high": pair.get("speedup_ci_high"),
             "baseline_median_ms": pair.get("baseline_median_ms"), "optimized_median_ms":
             pair.get("optimized_median_ms"), "verified": pair.get("verified")}  # fmt: skip
    # What the speedup divides, where it is not the median call time (a generation's TTFT, tokens/s; the batch time):
    # the call medians beside it may point the other way (ch16's scheduling: 24.1 -> 24.8 ms, 2.78x faster on TTFT).
    b = basis_of(dict(pair))
    on = ""
    if pair.get("speedup") and not b.is_call:
        shown |= {"speedup_on": b.label, "baseline_value": pair.get("baseline_value"),
                  "optimized_value": pair.get("optimized_value"), "value_unit": b.unit or None}  # fmt: skip
        values = f" ({value_text(pair.get('baseline_value'), b)} → {value_text(pair.get('optimized_value'), b)})"
        on = f" on {b.label}" + (values if pair.get("baseline_value") is not None else "")
    elif pair.get("verdict") == "no speedup" and not b.is_call:  # ch13's memory pairs on a CPU: no peak to read
        shown["speedup_on"], on = b.label, f" on {b.label}"  # not a time that failed to divide beside its medians
    for name, value in shown.items():
        if value is not None:
            ET.SubElement(props, "property", name=name, value=str(value).lower() if isinstance(value, bool) else
                          str(value))  # fmt: skip
    speedup = speedup_text(dict(pair), verdict=False)
    status = pair["status"]
    text = f"{verdict_text(dict(pair))}: {speedup}{on}; {pair.get('verification') or ''}"
    if status == "skipped":  # no verdict nor speedup to show ("skipped: —"): why
        text = str(pair.get("verification") or "skipped")
    elif speedup == "—" and not on:  # a failed side: no speedup to show ("failed: —; ..."), the reason
        text = f"{verdict_text(dict(pair))}: {pair.get('verification') or status}"
    if status in _FAILURES:
        errors = [f"{side} {v['status']} at {v.get('failed_stage') or '?'}: {v.get('error') or ''}"
                  for side, v in sides.items() if v and v.get("status") != "ok"]  # fmt: skip
        # a failed side's error, or else the comparison's reason (a side's failure it only restates)
        detail = "; ".join(errors or [str(pair.get("verification") or "")])
        ET.SubElement(case, "failure", type=status, message=f"{status}: {detail}"[:1000]).text = text
    elif status == "skipped":
        ET.SubElement(case, "skipped", message=str(pair.get("verification") or "skipped")[:500])
    ET.SubElement(case, "system-out").text = text
    return case
