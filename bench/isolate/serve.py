"""The pre-warmed server's own process: ``python -m bench.isolate.serve --socket ... --key ...``.

It binds its socket, forks (the launcher exits, so the server is nobody's child), imports ``PRELOAD`` and
then serves: each request forks a child that takes the caller's environment, import path, working
directory, CPU affinity, umask and nice level, its own session, and the caller's message pipe. It never
serves stale code (before each fork it compares every loaded module file with its size and mtime at import;
on a change it stops listening and exits once its children are done), kills a child's process group when
the caller that asked for it goes away, and exits after ``idle`` seconds with no child and no caller.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import selectors
import signal
import socket
import struct
import sys
import sysconfig
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.isolate.rendezvous import KILL_GRACE_S, import_preload, kill_group, recv, send


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
        self.preload_errors = import_preload()
        for name, error in self.preload_errors.items():
            print(f"preload {name}: {error}", flush=True)
        self.files = _module_files()
        bad = bad_fork()
        if bad is not None:  # every child would fail at its first CUDA call: no server (callers start cold)
            print(f"perflab server {os.getpid()}: {bad}; not serving", flush=True)
            os._exit(1)

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
                    kill_group(pid)
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
            msg, fds = recv(conn, with_fds=True)
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
            send(conn, self.status())
            conn.close()
        elif op == "stop":
            self.stop_listening()
            for pid in self.children:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGTERM)
                self.kill_at[pid] = time.monotonic() + KILL_GRACE_S
            send(conn, self.status())
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
            send(conn, {"stale": "the server is stopping"})
            conn.close()
            return
        if msg.get("interpret", "") != self.mode:
            send(conn, {"error": f"TRITON_INTERPRET={msg.get('interpret')!r} asked of a server in mode {self.mode!r}"})
            conn.close()
            return
        t0 = time.perf_counter()
        changed = _changed(self.files)
        self.check_s += time.perf_counter() - t0
        if changed:
            print(f"stale: {changed}; exiting once {len(self.children)} children are done", flush=True)
            self.stop_listening()
            send(conn, {"stale": changed})
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
        send(conn, {"pid": pid})

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
                send(conn, {"exit": os.waitstatus_to_exitcode(status)})
            conn.close()


def bad_fork() -> str | None:
    """Why a child forked from this process could not use CUDA, or None: torch marks a fork "bad" once its parent
    asked CUDA anything (even the device count); a preloaded module that does so would fail every GPU variant
    ("Cannot re-initialize CUDA in forked subprocess": on the H200, importing ``torch._inductor.compile_fx`` did)."""
    torch = sys.modules.get("torch")
    check = getattr(getattr(torch, "_C", None), "_cuda_isInBadFork", None)
    if check is None:  # no torch, or a build without CUDA
        return None
    pid = os.fork()
    if pid == 0:
        os._exit(1 if check() else 0)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) == 0:
        return None
    return "a forked child cannot use CUDA: a preloaded module initialised it in this process"


def serve(path: str, idle: float, sys_path: list[str], key: str) -> None:
    """``python -m bench.isolate.serve``: bind, fork (the launcher exits: the caller waits for it),
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

    parser = argparse.ArgumentParser(prog="python -m bench.isolate.serve")
    parser.add_argument("--socket", required=True)
    parser.add_argument("--idle", type=float, required=True)
    parser.add_argument("--path", required=True)
    parser.add_argument("--key", required=True)
    args = parser.parse_args(argv)
    serve(args.socket, args.idle, json.loads(args.path), args.key)


if __name__ == "__main__":
    main()
