"""Where studies live, how several workers share one, and what makes a study the same study.

* Files a sweep writes by itself (its data, ``optuna.db``) go under the results directory,
  ``./perflab-results/`` (git-ignored) or ``$PERFLAB_RESULTS_DIR``, never loose in a checkout.
* An RDB storage (SQLite, PostgreSQL, MySQL URL) records a heartbeat per running trial every
  ``heartbeat_interval_s``. A trial whose worker has been silent for ``heartbeat_grace_s`` (killed,
  host lost) is failed by whichever worker looks next, and ``RetryFailedTrialCallback`` queues its
  configuration again, so sweep workers on several hosts can share one PostgreSQL study and lose
  nothing when one dies.
* A study carries a fingerprint of what it measured (workload, data, search space, steps, device,
  strategy). A sweep that finds a study of the same name measured otherwise is refused with the two
  ways on (``--study-name`` for a new one, ``--resume`` to add to it anyway) rather than silently
  resuming it, which would show the old measurements as the new sweep's.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import time
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import optuna

from bench.errors import ConfigError
from bench.record import results_dir

__all__ = ["check_fingerprint", "data_digest", "default_storage", "make_storage", "quiet_optuna", "results_dir"]

FINGERPRINT = "perflab.fingerprint"


def default_storage() -> str:
    """SQLite in the results directory (created on first use)."""
    d = results_dir().resolve()
    d.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{d / 'optuna.db'}"


def check_storage_url(url: str) -> None:
    """A ConfigError unless ``url`` is an SQLAlchemy URL of a database Optuna's RDB storage takes."""
    if url.split(":", 1)[0].split("+", 1)[0] not in ("sqlite", "postgresql", "mysql"):
        raise ConfigError(f"--storage {url!r}: expected an SQLAlchemy URL such as sqlite:///optuna.db or "
                          "postgresql://user@host:5432/db")  # fmt: skip


def make_storage(
    url: str | optuna.storages.BaseStorage | None, heartbeat_s: int = 5, grace_s: int = 20, max_retry: int = 2
) -> optuna.storages.BaseStorage:
    """An Optuna storage for ``url`` (default: :func:`default_storage`); RDB URLs get heartbeats and retries."""
    if isinstance(url, optuna.storages.BaseStorage):
        return url
    url = url or default_storage()
    check_storage_url(url)
    from optuna.storages import RDBStorage

    url = _with_driver(url)
    for attempt in range(3):
        try:
            with quiet_optuna():
                # Optuna >= 4.9 names the retry hook heartbeat_stale_trial_callback; older ones failed_trial_callback
                new = getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None)
                retry: dict[str, Any] = (
                    {"heartbeat_stale_trial_callback": new(max_retry=max_retry)} if new is not None
                    else {"failed_trial_callback": optuna.storages.RetryFailedTrialCallback(max_retry=max_retry)}
                )  # fmt: skip
                return RDBStorage(
                    url,
                    heartbeat_interval=heartbeat_s,
                    grace_period=max(grace_s, 2 * heartbeat_s),
                    engine_kwargs={"pool_pre_ping": True} if not url.startswith("sqlite") else None,
                    **retry,
                )
        except Exception as exc:  # a driver missing, a server not reachable: one line, not a traceback
            # Workers started together race to create the schema on a fresh database; the loser's
            # CREATE (or its schema-version row: SQLite's UNIQUE constraint) fails on the winner's, and a
            # second look finds them made.
            if attempt < 2 and any(m in str(exc) for m in _SCHEMA_RACE):
                time.sleep(0.5 + random.random())
                continue
            raise ConfigError(f"--storage {_redact(url)}: {type(exc).__name__}: {str(exc).splitlines()[0]}") from None
    raise AssertionError("unreachable")


_SCHEMA_RACE = ("already exists", "duplicate key", "UNIQUE constraint failed", "database is locked")


def _with_driver(url: str) -> str:
    """``postgresql://`` means psycopg (3) to SQLAlchemy 2.1 and psycopg2 to older ones: name the one installed."""
    if not url.startswith("postgresql://"):
        return url
    import importlib.util

    for module, driver in (("psycopg", "psycopg"), ("psycopg2", "psycopg2")):
        if importlib.util.find_spec(module) is not None:
            return url.replace("postgresql://", f"postgresql+{driver}://", 1)
    raise ConfigError(f"--storage {_redact(url)}: no PostgreSQL driver: pip install 'psycopg[binary]'")


@contextlib.contextmanager
def quiet_optuna() -> Iterator[None]:
    """Heartbeats and their retry hook are "experimental" (or renamed) in Optuna's words: said once in
    docs/sweeps.md, not on every sweep's terminal."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        warnings.simplefilter("ignore", FutureWarning)
        yield


def _redact(url: str) -> str:
    """The URL without its password, for messages."""
    head, at, tail = url.rpartition("@")
    if not at or "://" not in head:
        return url
    scheme, _, creds = head.partition("://")
    return f"{scheme}://{creds.split(':', 1)[0]}@{tail}"


def data_digest(path: str | Path | None) -> str | None:
    """Identity of a data file without reading all of it: size + SHA-256 of its first and last MiB."""
    if path is None:
        return None
    p = Path(path)
    if not p.is_file():
        return f"missing:{p}"
    size = p.stat().st_size
    h = hashlib.sha256(str(size).encode())
    with p.open("rb") as f:
        h.update(f.read(1 << 20))
        if size > 2 << 20:
            f.seek(-(1 << 20), os.SEEK_END)
            h.update(f.read(1 << 20))
    return f"{size}:{h.hexdigest()[:16]}"


def check_fingerprint(study: optuna.Study, fingerprint: Mapping[str, Any], resume: bool = False) -> str | None:
    """Stamp a new study; refuse a study measured otherwise unless ``resume``. Returns a note to print."""
    fp = json.loads(json.dumps(fingerprint, default=str))  # as stored: lists, strings
    old = study.user_attrs.get(FINGERPRINT)
    trials = len(study.get_trials(deepcopy=False))
    name = study.study_name
    if old is None:
        if trials and not resume:
            raise ConfigError(
                f"study {name!r} already holds {trials} trials but no record of what they measured (an older "
                f"perflab): pass --study-name NEW for a new study, or --resume to add to it anyway"
            )
        study.set_user_attr(FINGERPRINT, fp)
        return None
    diff = [k for k in sorted(set(fp) | set(old)) if fp.get(k) != old.get(k)]
    if not diff:
        return None
    shown = "; ".join(_changed(k, old.get(k), fp.get(k)) for k in diff)
    if not resume:
        raise ConfigError(
            f"study {name!r} ({trials} trials) was measured with a different {', '.join(diff)} ({shown}): "
            f"pass --study-name NEW for a new study, or --resume to add these trials to it anyway"
        )
    return f"--resume: adding to study {name!r} although its {', '.join(diff)} differ ({shown})"


def _changed(key: str, then: Any, now: Any) -> str:
    """``key: THEN then, NOW now``; of two mappings (the space), only the entries that differ, each by its name: the
    whole space cut at 60 characters hid the one flag that changed."""
    if isinstance(then, Mapping) and isinstance(now, Mapping):
        subs = [k for k in sorted(set(then) | set(now)) if then.get(k) != now.get(k)]
        return "; ".join(_changed(f"{key}.{k}", then.get(k), now.get(k)) for k in subs)
    return f"{key}: {_short(then)} then, {_short(now)} now"


def _short(v: Any) -> str:
    text = json.dumps(v, default=str)
    return text if len(text) <= 60 else text[:57] + "..."
