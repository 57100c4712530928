"""bench/record/contract.py: what a variant's run logs, from its result alone."""

from __future__ import annotations

import json
import re

import pytest

from bench.define.result import Work
from bench.record.contract import numbers_inline, variant_files, variant_metrics
from tests.analysis.synthetic import result


def test_a_variant_of_several_ranks_logs_each_ranks_median_and_its_bus_bandwidth() -> None:
    r = result("ch04:allreduce:optimized", [2.0, 3.0, 2.5])  # the slowest rank's, sample by sample
    assert r.timing is not None
    timing = r.timing.model_copy(update={"rank_samples_ms": [[2.0, 1.0, 2.5], [1.5, 3.0, 0.5]]})
    r = r.model_copy(update={"timing": timing, "work": Work(comm_bytes=5e9, bus_factor=1.0)})
    metrics = variant_metrics(r)
    assert metrics["time_rank0_median_ms"] == 2.0 and metrics["time_rank1_median_ms"] == 1.5
    assert metrics["busbw_gbps"] == pytest.approx(5e9 / 2.5e-3 / 1e9)  # the median of the slowest rank's samples
    one = variant_metrics(result("ch07:x:optimized", [1.0, 1.0]))
    assert not any(k.startswith("time_rank") or k.endswith("bw_gbps") for k in one)  # nothing invented


def test_result_json_keeps_each_array_of_numbers_on_one_line_and_reads_the_same() -> None:
    r = result("ch16:x:optimized", [1.5, -2.25e-05, 3.0, 1.25e-30])
    assert r.timing is not None
    r = r.model_copy(update={"timing": r.timing.model_copy(update={"host_ref_ms": [[0.7, 0.71], [0.9, 1.2]],
                                                                     "notes": ["a note, [1,\n 2]"]})})  # fmt: skip
    text = variant_files(r, {})["result.json"]
    assert json.loads(text) == json.loads(r.model_dump_json())  # the same document
    assert re.search(r'"samples_ms": \[1\.5, -[0-9.e-]+, 3\.0, 1\.25e-30\],\n', text), text[:2000]
    assert "[0.7, 0.71]," in text and "[0.9, 1.2]" in text  # nested: one line per inner array
    assert "a note, [1,\\n 2]" in text  # a string that looks like an array is left alone
    assert numbers_inline('{\n  "a": [\n    "x",\n    1\n  ]\n}') == '{\n  "a": [\n    "x",\n    1\n  ]\n}'
