"""sweeps/recommend.py on a synthetic results table: filters, diagnosis rules, the YAML snippet."""

from __future__ import annotations

from typing import Any

import yaml

from sweeps.recommend import Rules, diagnose, recommend, snippet_yaml


def row(bs: int, w: int, sps: float, mem_pct: float, util: float | None = 90.0, io: float = 0.1, **kw: Any) -> dict:
    return {"trial": bs * 10 + w, "batch_size": bs, "num_workers": w, "amp": True, "pin_memory": True,
            "status": "ok", "samples_per_s": sps, "peak_memory_gb": mem_pct / 10, "memory_pct": mem_pct,
            "gpu_util_pct": util, "step_ms": 10.0, "io_wait_ms": io, **kw}  # fmt: skip


TABLE = [
    row(256, 4, 9000.0, 40.0),
    row(512, 4, 12000.0, 70.0, util=75.0),
    row(1024, 4, 13000.0, 85.0),  # fastest, but over the 80 % memory line
    row(512, 8, 12500.0, 72.0, util=60.0),  # fits, but the GPU is underused
    row(128, 0, 2000.0, 20.0, io=6.0),  # waits on data 60 % of the step ...
    row(128, 4, 5000.0, 21.0, io=1.0),  # ... and 4 workers are 2.5x faster
    {"trial": 99, "batch_size": 2048, "num_workers": 4, "amp": True, "pin_memory": True, "status": "oom"},
]


def test_gpu_filters_memory_and_utilisation() -> None:
    rec = recommend(TABLE, "NVIDIA H100", Rules())
    assert rec.highest_throughput["batch_size"] == 1024
    assert rec.best_efficiency["batch_size"] == 128 and rec.best_efficiency["num_workers"] == 4  # 5000 / 2.1 GB
    assert (rec.recommended["batch_size"], rec.recommended["num_workers"]) == (512, 4)
    loose = recommend(TABLE, "NVIDIA H100", Rules(max_memory_pct=90.0))
    assert loose.recommended["batch_size"] == 1024


def test_cpu_skips_utilisation_with_reason() -> None:
    rec = recommend(TABLE, "cpu", Rules())
    assert (rec.recommended["batch_size"], rec.recommended["num_workers"]) == (512, 8)
    assert any("CPU run" in n for n in rec.notes)


def test_nothing_fits() -> None:
    rec = recommend([row(64, 0, 100.0, 95.0)], "cpu", Rules())
    assert rec.recommended is None and any("80 %" in n for n in rec.notes)
    assert snippet_yaml(rec, Rules()).startswith("# no configuration")


def test_diagnosis_rules() -> None:
    rules = Rules()
    by = {(r["batch_size"], r["num_workers"]): r for r in TABLE}
    assert diagnose(by[(128, 0)], TABLE, rules) == "I/O-bound (more workers help)"
    assert diagnose(by[(256, 4)], TABLE, rules) == "compute-bound"
    assert diagnose(by[(1024, 4)], TABLE, Rules(memory_bound_pct=80.0)) == "memory-bound"
    assert diagnose(by[(2048, 4)], TABLE, rules) == "memory-bound"
    slow_more = [row(128, 0, 2000.0, 20.0, io=6.0), row(128, 4, 2010.0, 20.0, io=6.0)]
    assert diagnose(slow_more[0], slow_more, rules).startswith("I/O-bound (more workers do not help")
    assert diagnose(slow_more[1], slow_more, rules) == "I/O-bound (more workers not measured)"


def test_snippet_scales_learning_rate_by_square_root() -> None:
    rules = Rules(learning_rate=1e-3, reference_batch_size=256)
    doc = yaml.safe_load(snippet_yaml(recommend(TABLE, "NVIDIA H100", rules), rules))
    assert doc["data"] == {"batch_size": 512, "num_workers": 4, "pin_memory": True}
    assert doc["training"]["use_amp"] is True
    assert abs(doc["training"]["learning_rate"] - 1e-3 * 2**0.5) < 1e-8
