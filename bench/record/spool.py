"""A suite's results on disk, written before they are logged: what the store has not taken yet survives it.

``perflab run`` writes every finished variant here first (``Spool.add``, on the suite's own thread, before the
result is queued for MLflow), then uploads it (``bench.record.upload``); a suite whose results all reached the
store removes its spool. A spool that is left (a store that was down, slow or could not be written; a
command that was killed) is uploaded later by ``perflab import DIR``, idempotently: each entry records the
run id it was uploaded as, and runs carry the entry's ``perflab.uid``, which an upload that may have been
cut short looks up before logging again.

Layout, one directory per suite under ``<results>/spool/`` (``$PERFLAB_RESULTS_DIR`` or ``./perflab-results``)::

    20261126-081500-1a2b3c4d/
      suite.json            the parent run: uid, store, experiment, name, tags, host manifest; its run id once made
      0001-ch07-transpose-baseline/
        entry.json          key, uid, when it ended; ``attempted`` once an upload began; ``run_id`` once done
        result.json         the VariantResult (raw samples, stages, notes); its profile files in profile/, the
                            files it handed to the harness (``context().file``) in files/
        comparison.json     the pair, for an optimized variant
      end.json              the summary (summary.md text and summary.json), how the suite ended; ``run_id`` once
                            the parent was finished in the store
      errors.log            the store's errors in full (the console shows one line)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.define.result import Comparison, VariantResult
from bench.errors import PerflabError
from bench.record.store import results_dir

__all__ = ["Entry", "Spool", "absolute_uri", "find_spools"]

_SUITE, _END, _ENTRY = "suite.json", "end.json", "entry.json"


def absolute_uri(tracking_uri: str | None) -> str | None:
    """A ``sqlite:///relative.db`` URI made absolute: a spool may be imported from another directory."""
    if tracking_uri and tracking_uri.startswith("sqlite:///") and not tracking_uri.startswith("sqlite:////"):
        path, q, query = tracking_uri[len("sqlite:///") :].partition("?")
        if path and path != ":memory:":
            return f"sqlite:///{Path(path).absolute()}{q}{query}"
    return tracking_uri


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomically: a spool read after a crash never holds half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    tmp.replace(path)


@dataclass
class Entry:
    """One variant in a spool."""

    dir: Path
    key: str
    uid: str
    ended_ms: int
    attempted: bool = False  # an upload began: the store may hold a run with this uid
    run_id: str | None = None  # the run it was uploaded as

    def result(self) -> VariantResult:
        """As measured: its ``profile.dir`` is where the suite wrote the files (gone); they are in ``profile_dir``."""
        return VariantResult.model_validate_json((self.dir / "result.json").read_text())

    @property
    def profile_dir(self) -> str | None:
        d = self.dir / "profile"
        return str(d) if d.is_dir() else None

    @property
    def files_dir(self) -> str | None:
        """The files the variant handed to the harness, as spooled (its ``files`` is where the suite had them)."""
        d = self.dir / "files"
        return str(d) if d.is_dir() else None

    def comparison(self) -> Comparison | None:
        path = self.dir / "comparison.json"
        return Comparison.model_validate_json(path.read_text()) if path.exists() else None

    def save(self) -> None:
        data = {"key": self.key, "uid": self.uid, "ended_ms": self.ended_ms, "attempted": self.attempted,
                "run_id": self.run_id}  # fmt: skip
        _write_json(self.dir / _ENTRY, data)


class Spool:
    """One suite's spool directory (see the module's docstring). ``add`` may be called from several threads."""

    def __init__(self, root: Path, suite: dict[str, Any], entries: list[Entry]) -> None:
        self.root = root
        self.suite = suite
        self._entries = entries
        self._added = max((int(e.dir.name.split("-", 1)[0]) for e in entries), default=0)  # directories numbered
        self._lock = threading.Lock()

    @classmethod
    def create(cls, suite: dict[str, Any], base: Path | None = None) -> Spool:
        """A new spool under ``base`` (default ``<results>/spool``) for a suite described by ``suite`` (the
        tracker's arguments); it gets a ``uid``, the parent run's ``perflab.uid``."""
        uid = uuid.uuid4().hex
        root = (base or results_dir() / "spool").absolute() / f"{time.strftime('%Y%m%d-%H%M%S')}-{uid[:8]}"
        try:
            root.mkdir(parents=True)
        except OSError as exc:
            why = exc.strerror or str(exc)
            raise PerflabError(f"cannot keep results in {root}: {why} (set PERFLAB_RESULTS_DIR elsewhere)") from exc
        spool = cls(root, {**suite, "uid": uid, "created_ms": int(time.time() * 1000)}, [])
        spool.save_suite()
        return spool

    @classmethod
    def open(cls, path: str | Path) -> Spool:
        root = Path(path).absolute()
        try:
            suite = json.loads((root / _SUITE).read_text())
        except (OSError, ValueError) as exc:
            raise PerflabError(f"{root} is not a perflab spool (no readable {_SUITE}): {exc}") from exc
        entries = []
        for d in sorted(p for p in root.iterdir() if (p / "result.json").is_file()):
            if (d / _ENTRY).is_file():
                data = json.loads((d / _ENTRY).read_text())
                entries.append(Entry(d, data["key"], data["uid"], int(data["ended_ms"]),
                                     bool(data.get("attempted")), data.get("run_id")))  # fmt: skip
            else:  # written up to its result when the command died: never uploaded
                result = VariantResult.model_validate_json((d / "result.json").read_text())
                entry = Entry(d, result.spec.key, uuid.uuid4().hex, int((d / "result.json").stat().st_mtime * 1000))
                entry.save()
                entries.append(entry)
        return cls(root, suite, entries)

    @property
    def uid(self) -> str:
        return str(self.suite["uid"])

    def save_suite(self) -> None:
        _write_json(self.root / _SUITE, self.suite)

    def add(self, result: VariantResult, comparison: Comparison | None = None) -> Entry:
        """Write one finished variant (and its profile's and its own files, which the suite's work directory will
        lose); it is an entry (``entries``) once all of it is on disk."""
        with self._lock:
            self._added += 1
            d = self.root / f"{self._added:04d}-{re.sub(r'[^A-Za-z0-9_.-]+', '-', result.spec.key)}"
            d.mkdir()
        entry = Entry(d, result.spec.key, uuid.uuid4().hex, int(time.time() * 1000))
        profile = Path(result.profile.dir) if result.profile and result.profile.dir else None
        if profile is not None and profile.is_dir():
            _copy_tree(profile, d / "profile")
        if result.files and Path(result.files).is_dir():
            _copy_tree(Path(result.files), d / "files")
        (d / "result.json").write_text(result.model_dump_json(indent=1))
        if comparison is not None:
            (d / "comparison.json").write_text(comparison.model_dump_json(indent=1))
        entry.save()  # last: a directory without it was never uploaded (``open`` makes it one)
        with self._lock:
            self._entries.append(entry)
        return entry

    def entries(self) -> list[Entry]:
        with self._lock:
            return list(self._entries)

    def entry(self, key: str) -> Entry:
        return next(e for e in self.entries() if e.key == key)

    def end(self, summary_md: str, summary_json: dict[str, Any], failed: bool, interrupted: bool = False) -> None:
        _write_json(self.root / _END, {"summary_md": summary_md, "summary_json": summary_json, "failed": failed,
                                       "interrupted": interrupted, "ended_ms": int(time.time() * 1000),
                                       "run_id": None})  # fmt: skip

    def ending(self) -> dict[str, Any] | None:
        """What ``end`` wrote (None: the suite never ended, e.g. its command was killed)."""
        try:
            return dict(json.loads((self.root / _END).read_text()))
        except (OSError, ValueError):
            return None

    def ended(self, run_id: str) -> None:
        """The parent was finished in the store."""
        data = self.ending() or {}
        _write_json(self.root / _END, {**data, "run_id": run_id})

    def note_error(self, text: str) -> None:
        with self._lock, (self.root / "errors.log").open("a") as f:
            f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {text.rstrip()}\n")

    def complete(self) -> bool:
        """Every entry and the end are in the store."""
        ending = self.ending()
        return ending is not None and ending.get("run_id") is not None and all(e.run_id for e in self.entries())

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def _copy_tree(src: Path, dst: Path) -> None:
    """Hard links where the file system allows (a profile's nsys report: hundreds of MB), else copies."""

    def link(a: str, b: str) -> None:
        try:
            os.link(a, b)
        except OSError:
            shutil.copy2(a, b)

    shutil.copytree(src, dst, copy_function=link)


def find_spools(path: str | Path) -> list[Spool]:
    """The spool at ``path``, or every spool directly under it (``perflab-results/spool``), oldest first."""
    root = Path(path)
    if (root / _SUITE).is_file():
        return [Spool.open(root)]
    if not root.is_dir():
        raise PerflabError(f"{root}: no such directory")
    found = [Spool.open(d) for d in sorted(root.iterdir()) if (d / _SUITE).is_file()]
    if not found:
        raise PerflabError(f"{root} holds no perflab spool (directories with a {_SUITE})")
    return found
