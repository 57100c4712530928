"""One conclusion per study: every worker on a shared study ends with the same recommendation.

Once the study's trials have all ended, each worker tries to *claim* the conclusion of this state of
the study (its count of measured configurations: a study resumed later with more trials concludes
again). The claim is one row inserted into Optuna's ``study_user_attributes`` table, whose
(study, key) pair is unique: on SQLite and PostgreSQL alike exactly one insert succeeds, whichever
worker and host it comes from. The winner ranks, probes and verifies, then publishes the conclusion
(JSON) under the same key; the others wait for it and report it as theirs. So the ranking and the
verification run once, on the study's whole table. A winner that dies before publishing is succeeded:
after waiting, the others claim a second key, and so on.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable
from typing import Any

import optuna

from bench.errors import PerflabError

__all__ = ["ConclusionLost", "conclude_once", "worker_id"]

_CLAIM = "perflab.conclusion.{n}.by"
_RESULT = "perflab.conclusion.{n}"
_POLL_S = 1.0
_ATTEMPTS = 3  # claims in turn when a winner dies before publishing


class ConclusionLost(PerflabError, RuntimeError):
    """The worker that claimed the conclusion published none in time (it died or was stopped)."""


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _claim(study: optuna.Study, storage: Any, key: str, me: str) -> bool:
    """True when this worker's claim is the one recorded (an atomic insert on an RDB storage)."""
    engine = getattr(storage, "engine", None)
    if engine is None:  # in memory: one process, no race
        if key in study.user_attrs:
            return False
        study.set_user_attr(key, me)
        return True
    import sqlalchemy
    from optuna.storages._rdb.models import StudyUserAttributeModel  # the table set_user_attr writes

    row = {"study_id": study._study_id, "key": key, "value_json": json.dumps(me)}
    try:
        with engine.begin() as conn:
            conn.execute(sqlalchemy.insert(StudyUserAttributeModel.__table__).values(**row))
    except sqlalchemy.exc.IntegrityError:  # another worker's row is there: (study_id, key) is unique
        return False
    return True


def conclude_once(
    study: optuna.Study,
    storage: Any,
    measured: int,
    conclude: Callable[[], dict[str, Any]],
    echo: Callable[[str], None],
    wait_s: float,
) -> tuple[dict[str, Any], bool]:
    """The study's conclusion at ``measured`` configurations: computed here by ``conclude`` (JSON-able)
    when this worker wins the claim, else the winner's, waited for up to ``wait_s``. A winner that
    publishes nothing in that time (it died) is succeeded: the waiting workers claim again, and one of
    them concludes. Returns the conclusion and whether it was computed here."""
    result = _RESULT.format(n=measured)
    me = worker_id()
    for attempt in range(1, _ATTEMPTS + 1):
        claim = _CLAIM.format(n=measured) + ("" if attempt == 1 else f".{attempt}")
        found = _published(study, result)
        if found is not None:
            return found, False
        if _claim(study, storage, claim, me):
            conclusion = {**conclude(), "by": me}
            if _published(study, result) is None:  # a slow predecessor may have published meanwhile
                study.set_user_attr(result, conclusion)
            return conclusion, True
        by = _published(study, claim) or "another worker"
        if _gone(by):  # a sweep of this host interrupted while concluding: no need to wait for it
            echo(f"worker {by} claimed this study's conclusion and is gone: claiming it again")
            continue
        echo(f"worker {by} concludes this study (ranking, bottleneck, verification): waiting for its result")
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            found = _published(study, result)
            if found is not None:
                return found, False
            time.sleep(_POLL_S)
        echo(f"worker {by} published no conclusion in {wait_s:.0f} s: claiming it again")
    raise ConclusionLost(f"study {study.study_name!r}: {_ATTEMPTS} workers claimed its conclusion and none "
                         "published it (each died or was stopped); its trials are kept in the study")  # fmt: skip


def _gone(worker: str) -> bool:
    """True when ``worker`` (host:pid) ran on this host and its process has ended."""
    host, _, pid = worker.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


def _published(study: optuna.Study, key: str) -> Any:
    return study._storage.get_study_user_attrs(study._study_id).get(key)
