"""The pre-warmed server, the caller's side: start one or connect to it, fork a child in it, run a function in
a fresh child of it, list and stop this user's servers.

Every variant of the fast path is a fresh child forked from a server that has imported the heavy modules
(torch, triton, numpy, the harness: ~3.6 s on the H200 host, ~3 s on the CI machine) and never initialised
CUDA (``bench.isolate.serve`` is its process). The server is kept between commands, so the next ``perflab
run`` finds torch already imported. One server per key (``bench.isolate.rendezvous``: interpreter, import
paths, Triton mode, import-time environment, cgroups, resource limits); it serves only callers of its own
uid (SO_PEERCRED). A child gets the caller's environment, import path, working directory, CPU affinity,
umask and nice level, its own session (so its process group can be killed as a whole) and the caller's
message pipe, passed as a descriptor over the socket. The caller watches the child by pid and learns its
exit status from the server; if the caller goes away first (killed, crashed), the server kills the child's
process group: nothing outlives the command that asked for it. A server exits by itself after
``PERFLAB_SERVER_IDLE_S`` seconds (default 900) with no child and no caller; ``perflab server stop`` stops it
at once. ``--cold-start`` bypasses the server altogether.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import pickle
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.isolate.rendezvous import (
    PRELOAD,
    REPLY_TIMEOUT_S,
    SERVER_LOST,
    START_TIMEOUT_S,
    ServerError,
    StaleServer,
    alive,
    harness_root,
    idle_s,
    kill_group,
    recv,
    runtime_dir,
    send,
    server_key,
    server_path,
    umask,
)

__all__ = ["PRELOAD", "SERVER_LOST", "ServerError", "StaleServer", "call", "connect", "runtime_dir", "servers",
           "spawn", "stop_all"]  # fmt: skip

_START_LOCK = threading.Lock()
STARTED_HERE: set[str] = set()  # keys of the servers this process started (the others were kept)


def _connect(path: Path) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
        return None
    return sock


def connect(interpret: bool) -> socket.socket:
    """A connection to this user's server for ``interpret`` mode, starting the server if none listens.

    The server listens before it imports anything; a request sent now is answered once its imports are
    done. Two callers (threads or commands) never start two servers of one key: the start is made under
    an exclusive lock on ``<key>.lock``."""
    d = runtime_dir()
    key = server_key(interpret)
    path = d / f"{key}.sock"
    sock = _connect(path)
    if sock is not None:
        return sock
    with _START_LOCK, open(d / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        sock = _connect(path)
        if sock is not None:
            return sock
        _start(d, key, path, interpret)
        STARTED_HERE.add(key)
        sock = _connect(path)
    if sock is None:
        raise ServerError(f"the server {key} started but does not accept connections on {path}")
    return sock


def _start(d: Path, key: str, path: Path, interpret: bool) -> None:
    path.unlink(missing_ok=True)  # a dead server's socket (nothing accepted on it)
    log = d / f"{key}.log"
    env = dict(os.environ)
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    args = [
        sys.executable, "-m", "bench.isolate.serve", "--socket", str(path), "--idle", str(idle_s()),
        "--path", json.dumps(server_path()), "--key", key,
    ]  # fmt: skip
    with open(log, "wb") as out:
        # The launcher binds the socket, forks the server and exits: the server is nobody's child here.
        launcher = subprocess.Popen(
            args, cwd=harness_root(), env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        code = launcher.wait(timeout=START_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        launcher.kill()
        launcher.wait()
        code = None
    if code != 0:
        raise ServerError(f"the server did not start (launcher exit {code}); its log {log}:\n{_tail(log)}")


def _tail(path: Path, n: int = 3000) -> str:
    try:
        return path.read_bytes()[-n:].decode(errors="replace")
    except OSError:
        return ""


class ServerChild:
    """A child forked by the server, watched as a Popen: ``pid``, ``poll``, ``wait``, ``returncode``.

    Its exit status comes over the connection the request was made on; closing that connection (or
    this process dying) makes the server kill the child's process group."""

    def __init__(self, sock: socket.socket, pid: int) -> None:
        self._sock: socket.socket | None = sock
        self.pid = pid
        self.returncode: int | None = None

    def _read(self, timeout: float | None) -> None:
        if self.returncode is not None:
            return
        if self._sock is None:  # the server died before the child: watch the pid itself
            if alive(self.pid) and timeout:
                time.sleep(min(timeout, 0.05))
            if not alive(self.pid):
                self.returncode = SERVER_LOST
            return
        if not select.select([self._sock], [], [], timeout)[0]:
            return
        msg, _ = recv(self._sock)
        self.close()
        if msg is not None:
            self.returncode = int(msg["exit"])

    def poll(self) -> int | None:
        self._read(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired("server child", timeout or 0.0)
            self._read(left)
        return self.returncode

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def spawn(
    target: str,
    args: Sequence[Any],
    channel_fd: int,
    env: dict[str, str],
    cwd: str,
    log_path: str,
    interpret: bool,
) -> ServerChild:
    """Fork ``target`` ("module:function", called as ``function(*args, channel_fd)``) in the server.

    ``channel_fd`` (the caller's message pipe) is passed to the child; the caller may close its copy
    once this returns. A stale server (its code changed) is replaced once, transparently."""
    request = {
        "op": "spawn", "target": target, "args": list(args), "env": env, "cwd": cwd, "log": log_path,
        "path": list(sys.path), "affinity": sorted(os.sched_getaffinity(0)), "umask": umask(),
        "nice": os.getpriority(os.PRIO_PROCESS, 0),
        "interpret": "1" if interpret else "",
    }  # fmt: skip
    for attempt in (1, 2):
        sock = connect(interpret)
        try:
            send(sock, request, [channel_fd])
            if not select.select([sock], [], [], REPLY_TIMEOUT_S)[0]:
                raise ServerError(f"the server did not answer within {REPLY_TIMEOUT_S:.0f} s")
            reply, _ = recv(sock)
        except (OSError, ServerError):
            sock.close()
            raise
        if reply is None:
            sock.close()
            raise ServerError(f"the server closed the connection without an answer; its log: {_log_of(interpret)}")
        if "pid" in reply:
            return ServerChild(sock, int(reply["pid"]))
        sock.close()
        if "stale" in reply and attempt == 1:
            continue  # that server has stopped listening; the next connect starts a fresh one
        raise (StaleServer if "stale" in reply else ServerError)(str(reply.get("stale") or reply.get("error")))
    raise AssertionError("unreachable")


def _log_of(interpret: bool) -> Path:
    return runtime_dir() / f"{server_key(interpret)}.log"


def call(
    fn: Callable[..., Any],
    *args: Any,
    interpret: bool,
    timeout: float,
) -> Any:
    """``fn(*args)`` in a fresh child of the server; its return value, or its exception re-raised.

    ``fn``, ``args`` and the result travel pickled (``fn`` by reference: a module-level function). The
    child is killed (as a group) if it runs past ``timeout`` seconds; a child that dies without a
    result raises ServerError with its output."""
    import tempfile

    payload = base64.b64encode(pickle.dumps((fn, args))).decode()
    read_fd, write_fd = os.pipe()
    fd, log_path = tempfile.mkstemp(prefix="perflab-call-", suffix=".log")  # the child's output
    os.close(fd)
    try:
        try:
            child = spawn(
                "bench.isolate.server:_call_entry",
                [payload],
                write_fd,
                dict(os.environ),
                os.getcwd(),
                log_path,
                interpret,
            )
        finally:
            os.close(write_fd)
        data = b""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([read_fd], [], [], left)[0]:
                kill_group(child.pid)
                child.wait(10.0)
                raise ServerError(f"{_name(fn)} ran past {timeout:.0f} s in the server's child; killed")
            chunk = os.read(read_fd, 1 << 20)
            if not chunk:
                break
            data += chunk
        code = child.wait(max(1.0, deadline - time.monotonic()))
        kill_group(child.pid)  # whatever it left in its group
        if not data:
            raise ServerError(f"{_name(fn)} died in the server's child (exit {code}):\n{_tail(Path(log_path))}")
        ok, value = pickle.loads(data)
        if ok:
            return value
        raise value
    finally:
        os.close(read_fd)
        os.unlink(log_path)


def _name(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', fn)}"


def _call_entry(payload: str, fd: int) -> None:
    """Child side of ``call``: run the function, write (ok, value) pickled to the caller's pipe."""
    fn, args = pickle.loads(base64.b64decode(payload))
    try:
        out: tuple[bool, Any] = (True, fn(*args))
    except BaseException as exc:  # handed to the caller, with the child's traceback
        exc.add_note("".join(traceback.format_exception(exc)).rstrip())
        out = (False, exc)
    try:
        data = pickle.dumps(out)
    except Exception as exc:  # an unpicklable result or exception: say so, never hang
        data = pickle.dumps((False, ServerError(f"result of {_name(fn)} cannot be pickled: {exc}")))
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.close(fd)


def _servers() -> list[tuple[Path, int]]:
    """(pid file, pid) of every live server in this user's runtime directory; a dead one's files go."""
    found = []
    for pid_file in sorted(runtime_dir().glob("*.pid")):
        try:
            pid = int(pid_file.read_text())
        except (OSError, ValueError):
            continue
        if _is_server(pid):
            found.append((pid_file, pid))
        else:
            pid_file.unlink(missing_ok=True)
            pid_file.with_suffix(".sock").unlink(missing_ok=True)
    return found


def _ask(pid_file: Path, op: str, timeout: float) -> dict[str, Any] | None:
    """The server's answer to ``op``, or None when it cannot answer within ``timeout`` (still importing)."""
    sock = _connect(pid_file.with_suffix(".sock"))
    if sock is None:
        return None
    with sock:
        sock.settimeout(timeout)
        try:
            send(sock, {"op": op})
            return recv(sock)[0]
        except OSError:
            return None


def servers(timeout: float = 2.0) -> list[dict[str, Any]]:
    """Every live server of this user (this runtime directory): pid, key, Triton mode, uptime, children.
    One still importing cannot answer within ``timeout``: it is listed with ``"starting": True``."""
    return [
        _ask(pid_file, "ping", timeout) or {"pid": pid, "key": pid_file.stem, "starting": True}
        for pid_file, pid in _servers()
    ]


def own_keys() -> set[str]:
    """The keys of the servers a command of this interpreter, checkout and environment starts (both Triton modes)."""
    return {server_key(True), server_key(False)}


def stop_all(wait_s: float = 10.0, keys: set[str] | None = None) -> list[int]:
    """Stop every server of this user, or those of ``keys`` (``own_keys()``: this checkout's, leaving another
    checkout's and the suites it runs alone): each stops listening, kills its children's groups and exits (one
    still importing, which cannot answer yet, gets SIGTERM). Returns their pids; waits up to ``wait_s`` for them
    to be gone."""
    pids = []
    for pid_file, pid in _servers():
        if keys is not None and pid_file.stem not in keys:
            continue
        pids.append(pid)
        if _ask(pid_file, "stop", 2.0) is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + wait_s
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    return pids


def _is_server(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"bench.isolate.serve" in f.read() and alive(pid)
    except OSError:
        return False
