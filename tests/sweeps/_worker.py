"""One sweep worker process for tests/sweeps/test_postgres.py: a grid on a shared study, trials that sleep.

    python -m tests.sweeps._worker URL STUDY MARK_DIR DELAY_S

Each trial touches MARK_DIR/<pid>-<batch>-<workers>.start, sleeps, then touches .done: the test
kills a worker between the two, mid-trial.
"""

from __future__ import annotations

import os
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


def main(url: str, study: str, marks: str, delay: float) -> None:
    def evaluate(p: dict[str, Any], prune: Any = None) -> TrialOutcome:
        name = Path(marks) / f"{os.getpid()}-{p['batch_size']}-{p['num_workers']}"
        name.with_suffix(".start").touch()
        time.sleep(delay)
        name.with_suffix(".done").touch()
        return TrialOutcome("ok", {"samples_per_s": float(p["batch_size"] * (1 + p["num_workers"]))})

    run_sweep(CONFIG, evaluate, "grid", storage=url, study_name=study, fingerprint={"workload": "synthetic"},
              cuda=False)  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]))
