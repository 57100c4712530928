"""sweeps/recommend.py on a synthetic results table: filters, diagnosis rules, the YAML snippet."""

from __future__ import annotations

from typing import Any

import yaml

from sweeps.config import SweepConfig
from sweeps.recommend import Rules, diagnose, recommend, snippet_yaml, table_markdown
from sweeps.runner import rules_of


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
    assert doc["data"] == {"batch_size": 512, "num_workers": 4, "pin_memory": True, "prefetch_factor": 2,
                           "persistent_workers": True}  # fmt: skip
    assert doc["training"]["use_amp"] is True and doc["training"]["amp_dtype"] == "bfloat16"
    assert doc["training"]["grad_accum_steps"] == 1 and doc["training"]["effective_batch_size"] == 512
    assert abs(doc["training"]["learning_rate"] - 1e-3 * 2**0.5) < 1e-8


def test_diagnosis_by_gpu_utilisation() -> None:
    """Low utilisation is the host's bound, not compute's; only a busy GPU is compute-bound."""
    rules = Rules()  # host_bound_util_pct 30, min_gpu_util_pct 70
    host = diagnose(row(256, 4, 9000.0, 1.0, util=2.0), [], rules)
    assert host == "host/launch-bound (GPU busy 2 %: a larger batch, torch.compile or CUDA graphs help)"
    assert diagnose(row(256, 4, 9000.0, 1.0, util=0.0), [], rules).startswith("host/launch-bound (GPU busy 0 %")
    assert diagnose(row(256, 4, 9000.0, 1.0, util=29.9), [], rules).startswith("host/launch-bound")
    assert diagnose(row(256, 4, 9000.0, 1.0, util=30.0), [], rules).startswith("partly host-bound (GPU busy 30 %")
    assert diagnose(row(256, 4, 9000.0, 1.0, util=69.0), [], rules).startswith("partly host-bound")
    assert diagnose(row(256, 4, 9000.0, 1.0, util=70.0), [], rules) == "compute-bound"
    assert diagnose(row(256, 4, 9000.0, 1.0, util=98.0), [], rules) == "compute-bound"
    # the thresholds are the rules': a lower host line and a lower "busy" line
    assert diagnose(row(256, 4, 9000.0, 1.0, util=20.0), [], Rules(host_bound_util_pct=10.0)).startswith("partly")
    assert diagnose(row(256, 4, 9000.0, 1.0, util=50.0), [], Rules(min_gpu_util_pct=50.0)) == "compute-bound"


def test_io_and_memory_keep_priority_over_utilisation() -> None:
    rules = Rules()
    idle_waiting = [row(128, 0, 2000.0, 1.0, util=2.0, io=6.0), row(128, 4, 5000.0, 1.0, util=3.0, io=1.0)]
    assert diagnose(idle_waiting[0], idle_waiting, rules) == "I/O-bound (more workers help)"
    assert diagnose(idle_waiting[1], idle_waiting, rules).startswith("host/launch-bound (GPU busy 3 %")
    assert diagnose(row(4096, 4, 9000.0, 95.0, util=2.0), [], rules) == "memory-bound"
    assert diagnose(row(4096, 4, 9000.0, 95.0, util=2.0, status="oom"), [], rules) == "memory-bound"
    assert diagnose(row(4096, 4, 9000.0, 5.0, util=2.0, status="timeout"), [], rules) == "timeout"


def test_diagnosis_without_a_utilisation_reading_says_so() -> None:
    rules = Rules()
    cpu = row(256, 4, 9000.0, 1.0, util=None)
    assert diagnose(cpu, [cpu], rules, "cpu").startswith("CPU run: compute vs host overhead not told apart")
    assert diagnose(cpu, [cpu], rules, "NVIDIA H100").startswith("GPU utilisation not measured")
    rec = recommend([cpu], "cpu", rules)
    assert rec.diagnoses[0]["diagnosis"].startswith("CPU run") and rec.why_none is None


def h100_like() -> list[dict]:
    """Shaped like the medium-preset H100 sweep: 3–5 ms steps, GPU busy 1–4 %, 0.1 % of device memory."""
    rows = []
    for i, (bs, w, util, io) in enumerate(
        [(4096, 8, 2.0, 0.6), (4096, 0, 1.0, 1.2), (4096, 2, 4.3, 0.6), (2048, 4, 2.0, 0.3), (1024, 0, 1.0, 0.9),
         (512, 2, 3.0, 0.2), (256, 8, 1.0, 0.3), (64, 0, 0.0, 1.0), (32, 2, 3.7, 1.2)]
    ):  # fmt: skip
        step = 3.0 + (i % 3)
        rows.append({**row(bs, w, bs / step * 1e3, 0.1, util=util, io=io, step_ms=step), "trial": 120 + i})
    return rows


def test_h100_shaped_table_is_host_bound_and_explains_no_recommendation() -> None:
    table = h100_like()
    rec = recommend(table, "NVIDIA H100 80GB HBM3", Rules(), workload="medium")
    kinds = {d["diagnosis"].split(" (")[0] for d in rec.diagnoses}
    assert kinds == {"host/launch-bound", "I/O-bound"}  # never compute-bound with the GPU idle
    assert rec.highest_throughput["batch_size"] == 4096 and rec.recommended is None
    assert rec.why_none == (
        "no configuration keeps the GPU >= 70 % busy; the highest GPU utilisation seen was 4 % (trial 122): "
        "the model is too small for this device (host/launch-bound) — try --workload large, transformer, cnn or gpt"
    )
    md = table_markdown(rec)
    assert f"**recommended**: none — {rec.why_none}" in md and md.count(rec.why_none) == 1
    assert rec.why_none in snippet_yaml(rec, Rules())
    # the advice follows the preset measured
    assert "try --workload medium, large, transformer, cnn or gpt" in recommend(
        table, "H100", Rules(), workload="small"
    ).why_none
    assert "try --workload cnn or gpt" in recommend(table, "H100", Rules(), workload="my_pkg.train:make").why_none
    assert "already the largest built-in" in recommend(table, "H100", Rules(), workload="gpt").why_none


def test_why_none_partly_idle_and_busy_over_memory() -> None:
    partly = [row(256, 4, 9000.0, 10.0, util=55.0), row(512, 4, 9500.0, 12.0, util=45.0)]
    why = recommend(partly, "NVIDIA H100", Rules()).why_none
    assert "highest GPU utilisation seen was 55 % (trial 2564)" in why and "partly idle" in why
    over = [*partly, {**row(2048, 4, 20000.0, 85.0, util=92.0), "trial": 7}]
    why = recommend(over, "NVIDIA H100", Rules()).why_none
    assert "trial 7 reaches 92 % but needs 85 % of device memory (over 80 %)" in why
    assert recommend([row(64, 0, 100.0, 95.0)], "NVIDIA H100", Rules()).why_none.startswith("no ok trial has memory")


def test_config_carries_the_host_bound_threshold() -> None:
    assert rules_of(SweepConfig()).host_bound_util_pct == 30.0
    assert rules_of(SweepConfig(host_bound_util_pct=15.0)).host_bound_util_pct == 15.0
