"""A store MLflow cannot open or read, as one line: a ``file:`` store (MLflow 3 keeps that backend in maintenance
mode and refuses it), a ``.db`` that is no SQLite file, a damaged or truncated one. MLflow's and SQLAlchemy's
tracebacks of these run to 150-300 lines and name neither the store nor what is accepted; ``store.client`` and
the read helpers (``reads``) raise ``ConfigError`` with ``unopened``'s line instead (exit status 2).
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from typing import Any, TypeVar

from bench.errors import ConfigError

_T = TypeVar("_T")


def reads(fn: Callable[..., _T]) -> Callable[..., _T]:
    """A read of the store whose SQLite file turns out damaged past its first pages (a truncated copy opens, then
    its queries fail "database disk image is malformed", wrapped in an MlflowException): ``ConfigError`` naming
    the store, as ``client`` does for one that does not open at all."""

    @functools.wraps(fn)
    def read(*args: Any, **kwargs: Any) -> _T:
        uri = signature.bind(*args, **kwargs).arguments.get("tracking_uri") or os.environ.get("MLFLOW_TRACKING_URI")
        absent(uri)
        try:
            return fn(*args, **kwargs)
        except ConfigError:
            raise  # said already (client)
        except Exception as exc:
            if not damaged(exc):
                raise
            raise ConfigError(unopened(uri, exc)) from None

    signature = inspect.signature(fn)

    return read


def absent(uri: str | None) -> None:
    """A read of a SQLite store whose file does not exist (``perflab show`` in a fresh directory, a mistyped path):
    ``ConfigError`` naming it, rather than an empty store created there (and MLflow's "Creating initial MLflow
    database tables" lines) before "no suite in the store"."""
    if not uri:
        import mlflow

        uri = mlflow.get_tracking_uri()  # MLflow's default store: ./mlflow.db
    path = sqlite_path(uri)
    if path and not os.path.exists(path):
        raise ConfigError(f"tracking URI {uri!r}: no MLflow store at {os.path.abspath(path)!r} (nothing was logged "
                          "there); run a suite first (perflab run, perflab ab), or name the store with --tracking-uri "
                          "or MLFLOW_TRACKING_URI")  # fmt: skip


def sqlite_path(uri: str) -> str | None:
    """The file of a ``sqlite:///`` store (``sqlite:///x.db`` relative, ``sqlite:////abs/x.db`` absolute); None for
    another store or an in-memory one."""
    scheme, _, rest = uri.partition(":")
    if scheme != "sqlite" or not rest.startswith("///"):
        return None
    path = rest[3:].split("?", 1)[0]
    return path if path and path != ":memory:" else None


def damaged(exc: BaseException | None) -> bool:
    """Whether SQLite found the file no database, or a damaged one (sqlite3's DatabaseError, however wrapped);
    not a locked one (OperationalError: the store is busy, not broken)."""
    while exc is not None:
        if "(sqlite3.DatabaseError)" in str(exc) or type(exc).__name__ == "DatabaseError":
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def unopened(uri: str | None, exc: Exception) -> str:
    """The line for a store MLflow cannot open: a ``file:`` store (MLflow 3 keeps it in maintenance mode and
    refuses it), a ``.db`` that is not SQLite or is damaged (SQLAlchemy's "file is not a database"). Its
    traceback runs to 300 lines and says neither which store nor what is accepted."""
    store = repr(uri) if uri else "MLflow's default store"
    text = str(exc)
    if "maintenance mode" in text or "MLFLOW_ALLOW_FILE_STORE" in text:
        return (f"tracking URI {store}: this MLflow no longer opens a file-system store (file:DIR, ./mlruns); "
                "accepted: sqlite:///PATH.db or a server http(s)://HOST (`mlflow migrate-filestore` moves a file "
                "store into SQLite; MLFLOW_ALLOW_FILE_STORE=true opens it as it is)")  # fmt: skip
    gist = next((line.strip() for line in text.splitlines() if line.strip()), "")[:300]
    return (
        f"tracking URI {store}: the store cannot be opened ({type(exc).__name__}: {gist}); accepted: an MLflow "
        "SQLite file sqlite:///PATH.db (a new path makes a new store) or a server http(s)://HOST"
    )
