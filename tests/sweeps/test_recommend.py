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


def test_memory_margin_filters_and_utilisation_only_diagnoses() -> None:
    rec = recommend(TABLE, "NVIDIA H100", Rules())
    assert rec.highest_throughput["batch_size"] == 1024
    assert rec.best_efficiency["batch_size"] == 128 and rec.best_efficiency["num_workers"] == 4  # 5000 / 2.1 GB
    # the fastest within 80 % of memory, although its GPU is busy only 60 %: said beside it, never a veto
    assert (rec.recommended["batch_size"], rec.recommended["num_workers"]) == (512, 8)
    assert rec.why_none is None and rec.gpu_note.startswith("the GPU was busy 60 % of the recommended")
    assert "_GPU: the GPU was busy 60 %" in table_markdown(rec)
    spread = recommend([row(256, 4, 9000.0, 40.0, samples_per_s_low=8500.0, samples_per_s_high=9400.0)], "cpu")
    assert "| 9000.0 (8500–9400) |" in table_markdown(spread)  # each trial's throughput with its spread
    loose = recommend(TABLE, "NVIDIA H100", Rules(max_memory_pct=90.0))
    assert loose.recommended["batch_size"] == 1024 and loose.gpu_note is None  # busy 90 %


def test_cpu_recommends_without_a_utilisation_note() -> None:
    rec = recommend(TABLE, "cpu", Rules())
    assert (rec.recommended["batch_size"], rec.recommended["num_workers"]) == (512, 8)
    assert any("CPU run" in n for n in rec.notes) and rec.gpu_note is None


def test_nothing_fits() -> None:
    rec = recommend([row(64, 0, 100.0, 95.0)], "cpu", Rules())
    assert rec.recommended is None and any("80 %" in n for n in rec.notes)
    assert snippet_yaml(rec, Rules()).startswith("# nothing to recommend\n")


def test_diagnosis_rules() -> None:
    rules = Rules()
    by = {(r["batch_size"], r["num_workers"]): r for r in TABLE}
    assert diagnose(by[(128, 0)], TABLE, rules) == "I/O-bound (more workers help)"
    assert diagnose(by[(256, 4)], TABLE, rules) == "compute-bound"
    assert diagnose(by[(1024, 4)], TABLE, Rules(memory_bound_pct=80.0)) == "memory-bound"
    assert diagnose(by[(2048, 4)], TABLE, rules) == "memory-bound"
    slow_more = [row(128, 0, 2000.0, 20.0, io=6.0), row(128, 4, 2010.0, 20.0, io=6.0)]
    assert diagnose(slow_more[0], slow_more, rules).startswith("I/O-bound (more workers do not help")
    assert diagnose(slow_more[1], slow_more, rules) == "I/O-bound (4 workers, the most measured with these settings)"
    on_a_host = Rules(usable_cores=16)
    assert diagnose(slow_more[1], slow_more, on_a_host).endswith("the most measured with these settings; the host "
                                                                 "has 16 usable cores)")  # fmt: skip
    all_cores = [row(128, 0, 2000.0, 20.0, io=6.0), row(128, 16, 2010.0, 20.0, io=6.0)]
    assert diagnose(all_cores[1], all_cores, on_a_host).startswith("I/O-bound (all 16 usable cores have a worker")
    # what a row cannot tell is not claimed: no "storage or decode"; on a CPU no GPU remedy
    assert diagnose(slow_more[0], slow_more, rules) == "I/O-bound (more workers do not help)"
    assert diagnose(all_cores[1], all_cores, on_a_host, "cpu") == "I/O-bound (all 16 usable cores have a worker)"
    one = [row(128, 0, 2000.0, 20.0, io=6.0), row(128, 1, 1900.0, 20.0, io=6.0)]
    assert diagnose(one[1], one, rules) == "I/O-bound (1 worker, the most measured with these settings)"


def test_a_failed_rows_diagnosis_says_why() -> None:
    failed = {"trial": 7, "batch_size": 64, "num_workers": 0, "status": "failed",
              "reason": "workload 'job.py:make' raised RuntimeError: out of memory | at 64"}  # fmt: skip
    timed_out = {**failed, "trial": 8, "status": "timeout", "reason": "trial exceeded 6.0s; process group killed"}
    rec = recommend([row(32, 0, 900.0, 10.0), failed, timed_out], "cpu", Rules())
    assert diagnose(failed, [failed], Rules()) == f"failed: {failed['reason']}"
    md = table_markdown(rec)
    assert "| failed: workload 'job.py:make' raised RuntimeError: out of memory \\| at 64 |" in md  # one cell
    assert "| timeout: trial exceeded 6.0s; process group killed |" in md


def test_snippet_scales_learning_rate_by_square_root() -> None:
    rules = Rules(learning_rate=1e-3, reference_batch_size=256)
    doc = yaml.safe_load(snippet_yaml(recommend(TABLE, "NVIDIA H100", rules), rules))
    assert doc["data"] == {"batch_size": 512, "num_workers": 8, "pin_memory": True, "prefetch_factor": 2,
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


def test_h100_shaped_table_is_host_bound_and_still_recommends() -> None:
    table = h100_like()
    rec = recommend(table, "NVIDIA H100 80GB HBM3", Rules(), workload="medium")
    kinds = {d["diagnosis"].split(" (")[0] for d in rec.diagnoses}
    assert kinds == {"host/launch-bound", "I/O-bound"}  # never compute-bound with the GPU idle
    assert rec.highest_throughput["batch_size"] == 4096 and rec.recommended is rec.highest_throughput
    assert rec.why_none is None
    # the fastest waits for its input 20 % of the step (0.6 of 3 ms): idle for lack of work, not of data
    assert rec.gpu_note == (
        "the GPU was busy 2 % of the recommended configuration's steps: the model is too small for this device "
        "(host/launch-bound) — try --workload large, transformer, cnn or gpt"
    )
    assert (
        "try --workload medium, large, transformer, cnn or gpt"
        in recommend(table, "H100", Rules(), workload="small").gpu_note
    )
    assert "try --workload cnn or gpt" in recommend(table, "H100", Rules(), workload="my_pkg.train:make").gpu_note
    assert "already the largest built-in" in recommend(table, "H100", Rules(), workload="gpt").gpu_note


def test_gpu_note_names_input_waits_and_what_the_margin_costs() -> None:
    waiting = [row(256, 4, 9000.0, 10.0, util=40.0, io=5.0)]  # half of each 10 ms step waits for data
    note = recommend(waiting, "NVIDIA H100", Rules()).gpu_note
    assert note.endswith("it waits for its input 50 % of each step — the bottleneck below says how much")
    partly = [row(256, 4, 9000.0, 10.0, util=55.0), row(512, 4, 9500.0, 12.0, util=45.0)]
    note = recommend(partly, "NVIDIA H100", Rules()).gpu_note
    assert note.startswith("the GPU was busy 45 %") and "it waits part of each step" in note
    over = [*partly, {**row(2048, 4, 20000.0, 85.0, util=92.0), "trial": 7}]
    rec = recommend(over, "NVIDIA H100", Rules())
    assert rec.recommended["batch_size"] == 512
    assert "trial 7 reaches 92 % but needs 85 % of device memory (over 80 %)" in rec.gpu_note
    nothing = recommend([row(64, 0, 100.0, 95.0)], "NVIDIA H100", Rules())
    assert nothing.recommended is None and nothing.why_none.startswith("no ok trial has memory")


def test_config_carries_the_host_bound_threshold() -> None:
    assert rules_of(SweepConfig()).host_bound_util_pct == 30.0
    assert rules_of(SweepConfig(host_bound_util_pct=15.0)).host_bound_util_pct == 15.0


def test_no_ok_trial_says_what_the_trials_ended_as_and_what_to_change() -> None:
    """Every batch out of memory gave only "no trial finished ok": nothing said to try smaller batches."""
    oom = {"trial": 0, "batch_size": 16, "num_workers": 0, "status": "oom"}
    skipped = {**oom, "trial": 1, "batch_size": 32, "status": "skipped", "reason": "batch 16 ran out of memory"}
    rec = recommend([oom, skipped], "cpu", Rules())
    assert rec.why_none == ("no trial finished ok (1 oom, 1 skipped); batch 16 ran out of memory: try smaller "
                            "--batch-sizes")  # fmt: skip
    failed = {**oom, "trial": 2, "status": "failed", "reason": "workload 'job.py:make' raised KeyError: 'x'"}
    assert recommend([failed], "cpu").why_none == ("no trial finished ok (1 failed); trial 2 (bs=16 w=0) failed: "
                                                   "workload 'job.py:make' raised KeyError: 'x'")  # fmt: skip
    assert "**recommended**: none — no trial finished ok (1 oom, 1 skipped)" in table_markdown(rec)
    assert recommend([], "cpu").why_none.startswith("no trial finished ok: none ran")
