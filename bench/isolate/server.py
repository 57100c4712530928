"""The pre-warmed server of the fast path: a per-user process that outlives the command.

Every variant of the fast path is a fresh child forked from a server that has imported the heavy
modules (torch, triton, numpy, the harness: ~3.6 s on the H200 host, ~3 s on the CI machine) and never
initialised CUDA. The server is kept between commands, so the next ``perflab run`` finds torch already
imported: without it, that import was the largest serial part of a chapter run on two GPUs (STATUS).

One server per *key*: the interpreter, Python's version, the harness's import path, the import path the
caller's children get, the Triton mode (interpreted or compiled: Triton fixes it at import), the
environment variables the preloaded modules read at import (TORCH*, TRITON*, CUDA* but the per-variant
CUDA_VISIBLE_DEVICES and CUBLAS_WORKSPACE_CONFIG, LD_*, OMP_*, ...), and the caller's cgroups and
resource limits (a command in a batch job never gets children outside that job's limits). A server
never serves stale code: before each fork it compares every module file it has loaded (outside the
standard library: the harness, torch, triton, numpy, ...) with the size and mtime it had at import; on
any change it refuses, stops listening and exits, and the caller starts a new one. It exits by itself
after ``PERFLAB_SERVER_IDLE_S`` seconds (default 900) with no child and no caller; ``perflab server
stop`` stops it at once.

Its socket lives in a directory only its user can enter (``$PERFLAB_RUNTIME_DIR``, else
``$XDG_RUNTIME_DIR/perflab``, else ``/tmp/perflab-<uid>``; mode 0700, checked), and it serves only
callers of its own uid (SO_PEERCRED). A child gets the caller's environment, import path, working
directory, CPU affinity, umask and nice level, its own session (so its process group can be killed as a
whole) and the caller's message pipe, passed as a descriptor over the socket. The caller watches the
child by pid and learns its exit status from the server; if the caller goes away first (killed,
crashed), the server kills the child's process group: nothing outlives the command that asked for it.

``--cold-start`` bypasses the server altogether.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import importlib
import json
import os
import pickle
import select
import selectors
import signal
import socket
import struct
import subprocess
import sys
import sysconfig
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.errors import PerflabError

# Imported once by each server, never again per variant (CUDA is never initialised there).
PRELOAD = [
    "bench.isolate.child", "bench.measure.compare", "bench.define.config", "bench.define.context",
    "bench.record.manifest", "bench.measure.clocks", "numpy",
    "nvtx", "torch", "triton",
    "bench.isolate.warm",  # after triton: its per-process caches (bench/isolate/warm.py), never CUDA
]  # fmt: skip
PROTOCOL = 1  # bump when the messages change: a server of another protocol gets another key
IDLE_S = 900.0
START_TIMEOUT_S = 30.0  # until the new server listens (its imports come after)
REPLY_TIMEOUT_S = 600.0  # until a server answers a fork request (a first server imports torch first)
KILL_GRACE_S = 2.0
SERVER_LOST = 254  # exit status reported when the server died before the child: unknown

# Environment variables a child sets for itself (applied before CUDA initialises): not part of the key.
_PER_CHILD = frozenset({"CUDA_VISIBLE_DEVICES", "CUBLAS_WORKSPACE_CONFIG", "PERFLAB_RUNTIME_DIR"})
_KEYED_PREFIXES = (
    "TORCH", "PYTORCH", "TRITON", "CUDA", "NVIDIA", "LD_", "OMP_", "MKL_", "KMP_", "OPENBLAS", "NUMPY", "PYTHON",
    "PERFLAB_",
)  # fmt: skip


class ServerError(PerflabError):
    """The server could not be started or reached, or refused a request."""


class StaleServer(ServerError):
    """The server's loaded code changed on disk; a new server must be started."""


# --- where servers live ---------------------------------------------------------------------------------


def runtime_dir() -> Path:
    """The private directory of this user's server sockets (created 0700; refused if not private)."""
    env = os.environ.get("PERFLAB_RUNTIME_DIR")
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if env:
        d = Path(env)
    elif xdg and Path(xdg).is_dir():
        d = Path(xdg) / "perflab"
    else:
        import tempfile

        d = Path(tempfile.gettempdir()) / f"perflab-{os.getuid()}"
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(d)
    if not os.path.isdir(d) or os.path.islink(d) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise ServerError(
            f"server directory {str(d)!r} must be a directory owned by uid {os.getuid()} with mode 0700 (it is "
            f"uid {st.st_uid}, mode {oct(st.st_mode & 0o777)}); remove it, or set PERFLAB_RUNTIME_DIR to a private one"
        )
    return d


def idle_s() -> float:
    """``$PERFLAB_SERVER_IDLE_S`` (seconds, ≥ 5), else 900."""
    raw = os.environ.get("PERFLAB_SERVER_IDLE_S")
    if raw is None:
        return IDLE_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value >= 5.0:
        raise ServerError(f"PERFLAB_SERVER_IDLE_S={raw!r} is not a number of seconds >= 5")
    return value


def _harness_root() -> str:
    return str(Path(__file__).resolve().parents[2])  # the directory holding the bench package


def server_path(sys_path: Sequence[str] | None = None) -> list[str]:
    """The server's import path: the harness's root, then the caller's path but its first entry (the
    script's directory or the working directory, which differ between ``perflab`` and ``python -m``)."""
    path = list(sys.path if sys_path is None else sys_path)[1:]
    root = _harness_root()
    return [root, *(p for p in path if p != root)]


def _preload() -> list[str]:
    extra = [m for m in os.environ.get("PERFLAB_SERVER_PRELOAD", "").split(",") if m.strip()]
    return [*PRELOAD, *extra]  # the extra modules: for tests of the stale-code check


def server_key(interpret: bool, env: dict[str, str] | None = None) -> str:
    """The key of the server a caller in this interpreter needs, in this Triton mode (16 hex digits)."""
    environ = os.environ if env is None else env
    keyed = {k: v for k, v in sorted(environ.items()) if k.startswith(_KEYED_PREFIXES) and k not in _PER_CHILD}
    keyed["TRITON_INTERPRET"] = "1" if interpret else ""
    doc = {
        "protocol": PROTOCOL,
        "executable": sys.executable,
        "version": sys.version,
        "path": server_path(),
        "preload": _preload(),
        "env": keyed,
        "confinement": confinement(),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def confinement() -> dict[str, Any]:
    """What the kernel confines this process by and a fork cannot change: its cgroups (a batch job's
    memory, CPU and GPU-device limits: SLURM) and its resource limits. Part of the key, so a command in
    another job or under another ``ulimit`` never gets children of a server started outside them."""
    import resource

    try:
        with open("/proc/self/cgroup") as f:
            cgroup = f.read()
    except OSError:
        cgroup = ""
    limits = {
        name: resource.getrlimit(getattr(resource, name))
        for name in sorted(dir(resource))
        if name.startswith("RLIMIT_") and isinstance(getattr(resource, name), int)
    }
    return {"cgroup": cgroup, "rlimits": limits}


def _umask() -> int:
    """This process's umask, read without changing it (os.umask sets it: a race with other threads)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


# --- messages: a 4-byte length, then JSON --------------------------------------------------------------


def _send(sock: socket.socket, msg: dict[str, Any], fds: Sequence[int] = ()) -> None:
    data = json.dumps(msg).encode()
    frame = struct.pack("!I", len(data)) + data
    if fds:
        n = socket.send_fds(sock, [frame], list(fds))
        frame = frame[n:]
    sock.sendall(frame)


def _recv(sock: socket.socket, with_fds: bool = False) -> tuple[dict[str, Any] | None, list[int]]:
    """One message (None at EOF) and the descriptors that came with it."""
    fds: list[int] = []
    buf = b""
    while len(buf) < 4 or len(buf) < 4 + struct.unpack("!I", buf[:4])[0]:
        if with_fds and not buf:
            chunk, got, _, _ = socket.recv_fds(sock, 1 << 16, 4)
            fds.extend(got)
        else:
            chunk = sock.recv(1 << 16)
        if not chunk:
            for fd in fds:
                os.close(fd)
            return None, []
        buf += chunk
    (n,) = struct.unpack("!I", buf[:4])
    return json.loads(buf[4 : 4 + n]), fds


# --- the caller's side ---------------------------------------------------------------------------------

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
        sys.executable, "-m", "bench.isolate.server", "serve", "--socket", str(path), "--idle", str(idle_s()),
        "--path", json.dumps(server_path()), "--key", key,
    ]  # fmt: skip
    with open(log, "wb") as out:
        # The launcher binds the socket, forks the server and exits: the server is nobody's child here.
        launcher = subprocess.Popen(
            args, cwd=_harness_root(), env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
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
            if _alive(self.pid) and timeout:
                time.sleep(min(timeout, 0.05))
            if not _alive(self.pid):
                self.returncode = SERVER_LOST
            return
        if not select.select([self._sock], [], [], timeout)[0]:
            return
        msg, _ = _recv(self._sock)
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


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


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
        "path": list(sys.path), "affinity": sorted(os.sched_getaffinity(0)), "umask": _umask(),
        "nice": os.getpriority(os.PRIO_PROCESS, 0),
        "interpret": "1" if interpret else "",
    }  # fmt: skip
    for attempt in (1, 2):
        sock = connect(interpret)
        try:
            _send(sock, request, [channel_fd])
            if not select.select([sock], [], [], REPLY_TIMEOUT_S)[0]:
                raise ServerError(f"the server did not answer within {REPLY_TIMEOUT_S:.0f} s")
            reply, _ = _recv(sock)
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
                "bench.isolate.server:_call_entry", [payload], write_fd, dict(os.environ), os.getcwd(), log_path,
                interpret,
            )
        finally:
            os.close(write_fd)
        data = b""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([read_fd], [], [], left)[0]:
                _kill_group(child.pid)
                child.wait(10.0)
                raise ServerError(f"{_name(fn)} ran past {timeout:.0f} s in the server's child; killed")
            chunk = os.read(read_fd, 1 << 20)
            if not chunk:
                break
            data += chunk
        code = child.wait(max(1.0, deadline - time.monotonic()))
        _kill_group(child.pid)  # whatever it left in its group
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


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


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
            _send(sock, {"op": op})
            return _recv(sock)[0]
        except OSError:
            return None


def servers(timeout: float = 2.0) -> list[dict[str, Any]]:
    """Every live server of this user (this runtime directory): pid, key, Triton mode, uptime, children.
    One still importing cannot answer within ``timeout``: it is listed with ``"starting": True``."""
    return [
        _ask(pid_file, "ping", timeout) or {"pid": pid, "key": pid_file.stem, "starting": True}
        for pid_file, pid in _servers()
    ]


def stop_all(wait_s: float = 10.0) -> list[int]:
    """Stop every server of this user: each stops listening, kills its children's groups and exits
    (one still importing, which cannot answer yet, gets SIGTERM). Returns their pids; waits up to
    ``wait_s`` for them to be gone."""
    pids = []
    for pid_file, pid in _servers():
        pids.append(pid)
        if _ask(pid_file, "stop", 2.0) is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + wait_s
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    return pids


def _is_server(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"bench.isolate.server" in f.read() and _alive(pid)
    except OSError:
        return False


# --- the server's side ---------------------------------------------------------------------------------


def _module_files() -> dict[str, tuple[int, int]]:
    """(mtime_ns, size) of every loaded module's file outside the standard library (~950 after
    PRELOAD: ~4 ms to re-check)."""
    paths = sysconfig.get_paths()
    stdlib = (paths["stdlib"], paths["platstdlib"])
    site = (paths["purelib"], paths["platlib"])
    files = {}
    for module in list(sys.modules.values()):
        f = getattr(module, "__file__", None)
        if not isinstance(f, str) or (f.startswith(stdlib) and not f.startswith(site)):
            continue
        try:
            st = os.stat(f)
        except OSError:
            continue
        files[f] = (st.st_mtime_ns, st.st_size)
    return files


def _changed(files: dict[str, tuple[int, int]]) -> str | None:
    for f, (mtime, size) in files.items():
        try:
            st = os.stat(f)
        except OSError:
            return f"{f} was removed"
        if (st.st_mtime_ns, st.st_size) != (mtime, size):
            return f"{f} changed since the server imported it"
    return None


class _Server:
    def __init__(self, listener: socket.socket, path: str, idle: float, key: str) -> None:
        self.listener = listener
        self.path = path
        self.inode = os.stat(path).st_ino
        self.idle = idle
        self.key = key
        self.mode = os.environ.get("TRITON_INTERPRET", "")
        self.started = time.time()
        self.preload_errors: dict[str, str] = {}
        self.files: dict[str, tuple[int, int]] = {}
        self.children: dict[int, socket.socket] = {}  # pid → the connection its exit status goes to
        self.kill_at: dict[int, float] = {}  # pid → when TERM turns into KILL
        self.listening = True
        self.last_busy = time.monotonic()
        self.spawns = 0
        self.check_s = 0.0  # time spent on the stale-code check, in all
        self.fork_s = 0.0  # time spent in fork(), in all
        self.sel = selectors.DefaultSelector()
        self.wake_r, self.wake_w = os.pipe()

    def preload(self) -> None:
        for name in _preload():
            try:
                importlib.import_module(name)
            except Exception as exc:  # as multiprocessing's forkserver: a child imports it (and fails) itself
                self.preload_errors[name] = f"{type(exc).__name__}: {exc}"
                print(f"preload {name}: {exc}", flush=True)
        self.files = _module_files()

    def stop_listening(self) -> None:
        if not self.listening:
            return
        self.listening = False
        self.sel.unregister(self.listener)
        self.listener.close()
        with contextlib.suppress(OSError):
            if os.stat(self.path).st_ino == self.inode:  # still ours, not a successor's
                os.unlink(self.path)

    def serve(self) -> None:
        os.set_blocking(self.wake_w, False)
        os.set_blocking(self.wake_r, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, lambda *_: self.stop_listening())
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        self.sel.register(self.listener, selectors.EVENT_READ, "accept")
        self.sel.register(self.wake_r, selectors.EVENT_READ, "signal")
        while self.listening or self.children:
            now = time.monotonic()
            timeout = min([*(t - now for t in self.kill_at.values()), 1.0])
            for key, _ in self.sel.select(max(timeout, 0.0)):
                if key.data == "accept":
                    self.accept()
                elif key.data == "signal":
                    with contextlib.suppress(BlockingIOError):
                        os.read(self.wake_r, 4096)
                else:
                    self.caller_event(key.fileobj, key.data)  # type: ignore[arg-type]
            self.reap()
            now = time.monotonic()
            for pid, at in list(self.kill_at.items()):
                if now >= at:
                    _kill_group(pid)
                    del self.kill_at[pid]
            if self.children:
                self.last_busy = now
            elif now - self.last_busy > self.idle:
                self.stop_listening()

    def accept(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        self.last_busy = time.monotonic()
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _, uid, _ = struct.unpack("3i", creds)
        if uid != os.getuid():
            conn.close()  # only this user's callers
            return
        conn.settimeout(10.0)
        try:
            msg, fds = _recv(conn, with_fds=True)
        except OSError:
            conn.close()
            return
        try:
            self.request(conn, msg, fds)
        except OSError:
            conn.close()
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def request(self, conn: socket.socket, msg: dict[str, Any] | None, fds: list[int]) -> None:
        op = (msg or {}).get("op")
        if op == "ping":
            _send(conn, self.status())
            conn.close()
        elif op == "stop":
            self.stop_listening()
            for pid in self.children:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGTERM)
                self.kill_at[pid] = time.monotonic() + KILL_GRACE_S
            _send(conn, self.status())
            conn.close()
        elif op == "spawn" and msg is not None:
            self.spawn(conn, msg, fds)
        else:
            conn.close()  # a bare connect (a caller checking that the server listens), or garbage

    def status(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(), "key": self.key, "triton_interpret": self.mode, "listening": self.listening,
            "children": len(self.children), "uptime_s": round(time.time() - self.started, 1),
            "idle_limit_s": self.idle, "preload_errors": self.preload_errors, "python": sys.executable,
            "spawns": self.spawns, "files_checked": len(self.files), "check_s": round(self.check_s, 4),
            "fork_s": round(self.fork_s, 4),
        }  # fmt: skip

    def spawn(self, conn: socket.socket, msg: dict[str, Any], fds: list[int]) -> None:
        if not self.listening:
            _send(conn, {"stale": "the server is stopping"})
            conn.close()
            return
        if msg.get("interpret", "") != self.mode:
            _send(conn, {"error": f"TRITON_INTERPRET={msg.get('interpret')!r} asked of a server in mode {self.mode!r}"})
            conn.close()
            return
        t0 = time.perf_counter()
        changed = _changed(self.files)
        self.check_s += time.perf_counter() - t0
        if changed:
            print(f"stale: {changed}; exiting once {len(self.children)} children are done", flush=True)
            self.stop_listening()
            _send(conn, {"stale": changed})
            conn.close()
            return
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            self._child(conn, msg, fds)  # never returns
        self.fork_s += time.perf_counter() - t0
        self.spawns += 1
        self.children[pid] = conn
        conn.settimeout(None)
        self.sel.register(conn, selectors.EVENT_READ, pid)
        _send(conn, {"pid": pid})

    def _child(self, conn: socket.socket, msg: dict[str, Any], fds: list[int]) -> None:
        code = 1
        try:
            signal.set_wakeup_fd(-1)
            for sig in (signal.SIGCHLD, signal.SIGTERM):
                signal.signal(sig, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            self.sel.close()
            for fd in (self.wake_r, self.wake_w):
                os.close(fd)
            for sock in (self.listener, conn, *self.children.values()):
                sock.close()
            os.setsid()  # own session and process group: killed as a whole on a stage timeout
            log = os.open(msg["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.close(log)
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.close(devnull)
            # What a fresh interpreter of the caller would have: its environment (CUDA_VISIBLE_DEVICES,
            # CUBLAS_WORKSPACE_CONFIG are read at CUDA's initialisation, which comes later), import path
            # (PYTHONPATH first), working directory, CPU affinity, umask and nice level (its cgroups and
            # resource limits are the server's own: they are in the key).
            os.environ.clear()
            os.environ.update(msg["env"])
            extra = [p for p in msg["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
            sys.path[:] = [*extra, *(p for p in msg["path"] if p not in extra)]
            os.chdir(msg["cwd"])
            with contextlib.suppress(OSError, ValueError):
                os.sched_setaffinity(0, msg["affinity"])
            os.umask(msg["umask"])
            with contextlib.suppress(OSError):  # lowering the priority always works; raising may not
                os.setpriority(os.PRIO_PROCESS, 0, msg["nice"])
            module, name = msg["target"].split(":")
            fn = getattr(importlib.import_module(module), name)
            fn(*msg["args"], fds[0])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            traceback.print_exc()
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)

    def caller_event(self, conn: socket.socket, pid: int) -> None:
        """A caller's connection is readable while its child runs: the caller has gone (EOF)."""
        try:
            data = conn.recv(1)
        except OSError:
            data = b""
        if data:
            return  # callers send nothing after the request; ignore
        self.sel.unregister(conn)
        conn.close()
        if pid in self.children:
            self.children[pid] = conn  # closed: the exit status has nowhere to go
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGTERM)
            self.kill_at[pid] = time.monotonic() + KILL_GRACE_S

    def reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            self.kill_at.pop(pid, None)
            if conn is None or conn.fileno() < 0:
                continue
            with contextlib.suppress(KeyError, ValueError):
                self.sel.unregister(conn)
            with contextlib.suppress(OSError):
                _send(conn, {"exit": os.waitstatus_to_exitcode(status)})
            conn.close()


def serve(path: str, idle: float, sys_path: list[str], key: str) -> None:
    """``python -m bench.isolate.server serve``: bind, fork (the launcher exits: the caller waits for it),
    then import PRELOAD and serve until idle, stale or stopped."""
    old = os.umask(0o077)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(path)
    finally:
        os.umask(old)
    listener.listen(128)
    pid_file = Path(path).with_suffix(".pid")
    child = os.fork()
    if child != 0:  # the launcher: the caller connects once it has exited; requests wait for the imports
        pid_file.write_text(str(child))
        os._exit(0)
    sys.path[:] = sys_path
    server = _Server(listener, path, idle, key)
    print(f"perflab server {os.getpid()} key {key} on {path} (TRITON_INTERPRET={server.mode!r})", flush=True)
    server.preload()
    server.serve()
    with contextlib.suppress(OSError, ValueError):
        if int(pid_file.read_text()) == os.getpid():
            pid_file.unlink()
    os._exit(0)  # the children are independent processes; nothing to tear down


def main(argv: Sequence[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.isolate.server")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--socket", required=True)
    s.add_argument("--idle", type=float, required=True)
    s.add_argument("--path", required=True)
    s.add_argument("--key", required=True)
    args = parser.parse_args(argv)
    serve(args.socket, args.idle, json.loads(args.path), args.key)


if __name__ == "__main__":
    main()
