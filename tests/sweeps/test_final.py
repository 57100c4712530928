"""sweeps/final.py on an SQLite study: one claim wins, the others take its conclusion; a dead winner is succeeded."""

from __future__ import annotations

from pathlib import Path

import optuna

from sweeps.final import conclude_once
from sweeps.storage import make_storage


def study(tmp_path: Path) -> tuple[optuna.Study, object]:
    store = make_storage(f"sqlite:///{tmp_path / 'o.db'}")
    return optuna.create_study(study_name="s", storage=store, load_if_exists=True), store


def test_the_first_claim_concludes_and_the_second_takes_its_conclusion(tmp_path: Path) -> None:
    s, store = study(tmp_path)
    first, here = conclude_once(s, store, 4, lambda: {"recommended": {"batch_size": 64}}, print, wait_s=5)
    assert here and first["recommended"] == {"batch_size": 64}
    computed: list[int] = []

    def again() -> dict:
        computed.append(1)
        return {"recommended": {"batch_size": 8}}

    other, here = conclude_once(s, store, 4, again, print, wait_s=5)
    assert not here and other == first and computed == []  # the second worker ran nothing, reports the first's
    later, here = conclude_once(s, store, 6, again, print, wait_s=5)  # more trials since: a new conclusion
    assert here and later["recommended"] == {"batch_size": 8}


def test_a_winner_that_never_publishes_is_succeeded(tmp_path: Path) -> None:
    s, store = study(tmp_path)
    s.set_user_attr("perflab.conclusion.3.by", "gone-host:1")  # claimed, then the worker died
    said: list[str] = []
    out, here = conclude_once(s, store, 3, lambda: {"recommended": None}, said.append, wait_s=0.2)
    assert here and out["by"] != "gone-host:1"
    assert said[0].startswith("worker gone-host:1 concludes this study") and "claiming it again" in said[1]


def test_a_claim_by_an_ended_sweep_of_this_host_is_taken_over_at_once(tmp_path: Path) -> None:
    import socket
    import subprocess
    import time

    ended = subprocess.Popen(["true"])
    ended.wait()  # its pid is free now (reuse within the test is far-fetched)
    s, store = study(tmp_path)
    s.set_user_attr("perflab.conclusion.2.by", f"{socket.gethostname()}:{ended.pid}")
    t0 = time.monotonic()
    out, here = conclude_once(s, store, 2, lambda: {"recommended": None}, lambda _: None, wait_s=60)
    assert here and time.monotonic() - t0 < 30  # not the 60 s a live claimant would be given


def _measured_trial(s: optuna.Study, delay_s: float) -> None:
    """Another worker: after ``delay_s`` of nothing running, one trial that runs 0.5 s and is measured."""
    import time

    time.sleep(delay_s)
    t = s.ask()
    time.sleep(0.5)
    t.set_user_attr("status", "ok")
    s.tell(t, 1.0)


def test_settle_waits_for_a_trial_another_worker_starts_after_a_gap(tmp_path: Path) -> None:
    import threading
    import time

    from sweeps.config import SweepConfig
    from sweeps.study import measured_count, settle

    s, _ = study(tmp_path)
    cfg = SweepConfig(heartbeat_interval_s=1)
    for _ in range(2):
        _measured_trial(s, 0)
    other = threading.Thread(target=_measured_trial, args=(s, 0.8))  # between two of its trials: nothing runs
    other.start()
    settle(s, cfg, target=3, quiet_s=2.0)
    other.join()
    assert measured_count(s) == 3  # concluding at once would have seen 2 and claimed another key
    t0 = time.monotonic()
    settle(s, cfg, target=5, quiet_s=1.0)  # short of the target and nobody adds: back after the quiet time
    assert 0.9 <= time.monotonic() - t0 < 5


def test_settle_does_not_wait_once_the_plan_is_spent(tmp_path: Path) -> None:
    """A grid whose larger batches were skipped behind an OOM measured 1 of its 3 configurations: its one worker
    waited the quiet time (10 s by default) before concluding, although nothing was left for any worker."""
    import time

    from sweeps.config import SweepConfig
    from sweeps.search import NOTHING_LEFT
    from sweeps.study import settle

    s, _ = study(tmp_path)
    _measured_trial(s, 0)
    t = s.ask()
    t.set_user_attr("status", "skipped")
    t.set_user_attr("reason", NOTHING_LEFT)
    s.tell(t, state=optuna.trial.TrialState.PRUNED)
    t0 = time.monotonic()
    settle(s, SweepConfig(heartbeat_interval_s=1), target=3, quiet_s=3.0)
    assert time.monotonic() - t0 < 1.0


def test_a_study_on_an_rdb_storage_is_shared(tmp_path: Path) -> None:
    from sweeps.study import _shared

    s, _ = study(tmp_path)
    assert _shared(s)  # Optuna wraps the RDB storage in a cache: the heartbeat is the wrapped storage's
    assert not _shared(optuna.create_study())  # in memory: one process
