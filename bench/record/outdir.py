"""A suite's results as files, for CI pipelines (``perflab run --out DIR``): each variant as the store holds it, the
summary, and a JUnit XML of the pairs' verdicts that CI systems display.

Layout (a variant's files are written as it finishes, so a suite that is stopped keeps them; the rest at its end)::

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
``optimized_value`` where the speedup is not on the median call). A suite's exit status says the same.
"""

from __future__ import annotations

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

__all__ = ["OutDir", "junit_xml"]

_FAILURES = ("mismatch", "unverified", "failed")


def _write(path: Path, text: str) -> None:
    """Atomically: a CI step reading the directory while the suite runs never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


class OutDir:
    """``--out DIR``: ``variant`` as each finishes (from any worker's thread), ``finish`` once at the suite's end.
    ``describe_host``: the host manifest (bench.record.manifest.host_manifest), asked once, on first use."""

    def __init__(self, root: Path, describe_host: Callable[[], dict[str, Any]]) -> None:
        self.root = root
        self._describe_host = describe_host
        self._host: dict[str, Any] | None = None
        self._lock = threading.Lock()

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
        """``summary.json``, ``summary.md`` and ``junit.xml``; ``not_finished``: the optimized variants' keys of the
        pairs the suite did not finish, ``why`` it did not (errors in the JUnit XML)."""
        _write(self.root / "summary.json", json.dumps(summary, indent=2, default=str))
        _write(self.root / "summary.md", summary_md)
        _write(self.root / "junit.xml", junit_xml(summary, not_finished, why))


def junit_xml(summary: Mapping[str, Any], not_finished: Sequence[str] = (), why: str = "") -> str:
    """The pairs of ``summary`` (bench.record.summary.summary_dict) as a JUnit XML test suite, one testcase each
    (the module's docstring says which outcome is which); ``not_finished`` pairs as errors saying ``why``."""
    pairs = list(summary.get("pairs") or [])
    variants = {v["key"]: v for v in summary.get("variants") or []}
    cases = [_case(p, variants) for p in pairs]
    for key in not_finished:
        chapter, example, variant = key.split(":", 2)
        case = ET.Element("testcase", classname=chapter, name=f"{example}:{variant}", time="0")
        ET.SubElement(case, "error", type="not finished", message=f"not finished: {why or 'the suite stopped'}")
        cases.append(case)
    suite = ET.Element(
        "testsuite", name="perflab", tests=str(len(cases)), time=f"{float(summary.get('wall_s') or 0.0):.3f}",
        failures=str(sum(p["status"] in _FAILURES for p in pairs)), errors=str(len(not_finished)),
        skipped=str(sum(p["status"] == "skipped" for p in pairs)),
    )  # fmt: skip
    suite.extend(cases)
    root = ET.Element("testsuites", name="perflab")
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


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
