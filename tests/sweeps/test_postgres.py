"""Several sweep workers on one study in a real PostgreSQL server (the session's ``postgres``, tests/services.py).

Two worker processes run one grid; one is killed mid-trial. The other fails the dead worker's trial
through the heartbeat, runs the queued retry, and every configuration ends measured exactly once.
Two whole sweeps started together on one study (and one results directory) end with the same
recommendation, the study holding exactly ``--n-trials`` measured trials and one conclusion
(``PERFLAB_AGREE_TRIES`` times over, default 3; each try's outcome printed, seen with ``-s``).
Needs Debian's postgresql package (initdb, pg_ctl; .ci/run installs it) and psycopg (the test extra).
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sweeps.search import config_of
from sweeps.storage import make_storage


def _worker(url: str, study: str, marks: Path, delay: float, *more: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    return subprocess.Popen([sys.executable, "-m", "tests.sweeps._worker", url, study, str(marks), str(delay), *more],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip


def test_two_workers_share_a_study_and_lose_nothing_when_one_dies(postgres: str, tmp_path: Path) -> None:
    import optuna

    from tests.sweeps._worker import CONFIG

    marks = tmp_path / "marks"
    marks.mkdir()
    a, b = _worker(postgres, "shared", marks, 0.6), _worker(postgres, "shared", marks, 0.6)
    deadline = time.monotonic() + 60
    while len(list(marks.glob(f"{a.pid}-*.start"))) < 2:  # A finished one trial and is inside its second
        assert time.monotonic() < deadline and a.poll() is None, a.stdout.read() if a.stdout else ""  # type: ignore[union-attr]
        time.sleep(0.02)
    a.send_signal(signal.SIGKILL)
    a.wait(10)
    killed = [p.stem for p in marks.glob(f"{a.pid}-*.start") if not p.with_suffix(".done").exists()]
    assert len(killed) == 1, "the worker was killed mid-trial"
    out, _ = b.communicate(timeout=90)
    assert b.returncode == 0, out.decode()

    study = optuna.load_study(study_name="shared", storage=make_storage(postgres))
    ok = collections.Counter()
    for t in study.trials:
        if t.user_attrs.get("status") == "ok":
            c = config_of(t)
            ok[(c["batch_size"], c["num_workers"])] += 1
    space = {(p["batch_size"], p["num_workers"]) for p in CONFIG.space(cuda=False).points()}
    assert set(ok) == space and set(ok.values()) == {1}  # every configuration measured, each exactly once
    _, batch, workers = killed[0].split("-")
    dead = [t for t in study.trials if t.state == optuna.trial.TrialState.FAIL and "status" not in t.user_attrs]
    assert [(config_of(t)["batch_size"], config_of(t)["num_workers"]) for t in dead] == [(int(batch), int(workers))]
    retried = [t for t in study.trials if t.system_attrs.get("failed_trial") == dead[0].number]
    assert len(retried) == 1 and retried[0].user_attrs["status"] == "ok"  # the dead worker's trial, run by B
    assert len(list(marks.glob(f"{b.pid}-{batch}-{workers}.done"))) == 1


TRIES = int(os.environ.get("PERFLAB_AGREE_TRIES", "3"))  # 10 for the target (~1 min each on 2 cores)


def _agree_once(postgres: str, tmp_path: Path, attempt: int) -> str | None:
    """Two whole sweeps on one fresh study: None when they agree as they must, else what differed."""
    import optuna

    marks = tmp_path / f"marks-{attempt}"
    marks.mkdir()
    study = f"agree-{attempt}"
    workers = [_worker(postgres, study, marks, 1.0, "agree", "5") for _ in range(2)]  # trials long enough to overlap
    outs = []
    for w in workers:
        out, _ = w.communicate(timeout=240)
        if w.returncode != 0:
            return f"a worker exited {w.returncode}: {out.decode()[-2000:]}"
        outs.append(json.loads(out.decode().strip().splitlines()[-1]))
    a, b = outs
    if not (a["recommended"] == b["recommended"] and a["by"] == b["by"] and a["speedup"] == b["speedup"]):
        return f"different conclusions: {a} / {b}"
    # the ranking and the verification ran once, by the worker that claimed the conclusion
    runs = sorted(o["concluding_runs"] for o in outs)
    if runs != [0, 3 * 2 + 2 * 2]:  # 3 contenders x 2 rounds, 2 + 2 repeats
        return f"concluding runs per worker {runs}, not [0, 10]"
    trials = optuna.load_study(study_name=study, storage=make_storage(postgres)).trials
    measured = [t for t in trials if t.user_attrs.get("status") in ("ok", "oom", "failed", "timeout", "pruned")]
    if len(measured) != 5:  # --n-trials is the study's total, not each worker's
        return f"{len(measured)} trials measured, not 5"
    return None


@pytest.mark.timeout(120 + 180 * TRIES)
def test_two_sweeps_on_one_study_agree_on_one_conclusion(postgres: str, tmp_path: Path) -> None:
    problems = {}
    for attempt in range(TRIES):
        t0 = time.monotonic()
        problem = _agree_once(postgres, tmp_path, attempt)
        print(f"agree try {attempt + 1}/{TRIES}: {problem or 'the same conclusion'} ({time.monotonic() - t0:.0f} s)")
        if problem:
            problems[attempt + 1] = problem
    assert not problems, f"{TRIES - len(problems)} of {TRIES} tries agreed; {problems}"
