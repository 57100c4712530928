"""Sweep worker processes for tests/sweeps/test_postgres.py, on a shared study, with trials that sleep.

    python -m tests.sweeps._worker URL STUDY MARK_DIR DELAY_S            # a grid (run_sweep)
    python -m tests.sweeps._worker URL STUDY MARK_DIR DELAY_S agree N    # a whole sweep of N trials

Each trial touches MARK_DIR/<pid>-<batch>-<workers>.start, sleeps, then touches .done: the test
kills a worker between the two, mid-trial. ``agree`` runs ``sweeps.runner.sweep`` (ranking,
verification) with noisy synthetic throughputs and prints its conclusion as one JSON line.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

from sweeps.config import SweepConfig
from sweeps.study import run_sweep
from sweeps.trial import TrialOutcome

CONFIG = SweepConfig(workload="tiny", batch_sizes=[8, 16, 32, 64], num_workers_options=[0, 2, 4],
                     test_mixed_precision=False, test_pin_memory=False,
                     heartbeat_interval_s=1, heartbeat_grace_s=2, max_retry=3)  # fmt: skip


def evaluator(marks: str, delay: float, calls: list[bool]) -> Any:
    noise = random.Random(os.getpid())

    def evaluate(p: dict[str, Any], prune: Any = None) -> TrialOutcome:
        calls.append(prune is None)
        name = Path(marks) / f"{os.getpid()}-{p['batch_size']}-{p['num_workers']}"
        name.with_suffix(".start").touch()
        time.sleep(delay)
        name.with_suffix(".done").touch()
        sps = float(p["batch_size"] * (1 + min(p["num_workers"], 2))) * noise.uniform(0.9, 1.1)
        return TrialOutcome("ok", {"samples_per_s": sps, "memory_pct": 1.0, "peak_memory_gb": 0.1})

    return evaluate


def agree(url: str, study: str, marks: str, delay: float, n_trials: int) -> None:
    from sweeps.runner import sweep

    calls: list[bool] = []
    overrides = {"workload": "tiny", "batch_sizes": "8,16,32,64", "num_workers_options": "0,2,4", "device": "cpu",
                 "test_mixed_precision": False, "heartbeat_interval_s": 1, "heartbeat_grace_s": 2, "rank_top": 3,
                 "rank_rounds": 2, "verify_repeats": 2, "prune_after_steps": 1, "remeasure_seconds": 0}  # fmt: skip
    result = sweep(strategy="smart", n_trials=n_trials, storage=url, study_name=study, track=False,
                   overrides=overrides, evaluate=evaluator(marks, delay, calls), echo=lambda _: None)  # fmt: skip
    c = result.conclusion
    print(json.dumps({"recommended": c["recommended"], "by": c["by"], "speedup": c["speedup"],
                      "concluding_runs": sum(calls)}))  # fmt: skip


def main(url: str, study: str, marks: str, delay: float) -> None:
    calls: list[bool] = []
    run_sweep(CONFIG, evaluator(marks, delay, calls), "grid", storage=url, study_name=study,
              fingerprint={"workload": "synthetic"}, cuda=False)  # fmt: skip


if __name__ == "__main__":
    if len(sys.argv) > 5 and sys.argv[5] == "agree":
        agree(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[6]))
    else:
        main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]))
