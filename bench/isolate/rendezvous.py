"""Where a caller and its pre-warmed server meet, and what they say: the private runtime directory, the key
that picks the server a caller needs, and the messages (a 4-byte length, then JSON; descriptors beside).

A server is one per *key*: the interpreter, Python's version, the harness's import path, the import path the
caller's children get, the Triton mode (interpreted or compiled: Triton fixes it at import), the environment
variables the preloaded modules read at import (TORCH*, TRITON*, CUDA* but the per-variant CUDA_VISIBLE_DEVICES
and CUBLAS_WORKSPACE_CONFIG, LD_*, OMP_*, ...) and those the server reads when it starts (of the harness's own
PERFLAB_*, only its idle limit and extra preloads: a child reads the others from its caller's environment), and
the caller's cgroups and resource limits (a command in a batch job never gets children outside that job's limits).
Its socket lives in a directory only its user can enter (``$PERFLAB_RUNTIME_DIR``, else ``$XDG_RUNTIME_DIR/perflab``,
else ``/tmp/perflab-<uid>``; mode 0700, checked).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import struct
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.errors import PerflabError

# Imported once by each server, never again per variant (CUDA is never initialised there): every module a timed
# child imports, so that none is imported per child (tests/bench/isolate/test_preload.py). A child of a server
# without numpy.ma and numpy.random (the first median, the seed) imported them in 0.13 s on the 2-core CPU host.
# torch._dynamo: every torch.optim optimizer imports it when constructed (its methods are wrapped to disable
# Dynamo), as does torch.compile: 1.0-1.6 s in each set-up of a training variant on the 2-core CPU host, paid again
# by every round's child. Its import initialises no CUDA and starts no thread. psutil: the host-busy check counts
# a variant's live workers with it. torch._inductor.compile_fx: what torch.compile's first call imports (Inductor,
# AOTAutograd: ~590 modules), 3.0 s beyond torch._dynamo's on the H200 host (2026-12-02 probe) and 1.5-2.3 s on the
# 2-core CPU host, in the set-up of every compiled variant even when its graph comes from the on-disk cache, and
# again in each round's child. Its import asks whether CUDA is available (Triton's driver, Inductor's device
# checks): imported under ``import_preload``'s NVML answer, no fork is marked unable to use CUDA.
PRELOAD = [
    "bench.isolate.child", "bench.isolate.timed", "bench.isolate.produced", "bench.isolate.ranks",
    "bench.isolate.recheck", "bench.measure.compare", "bench.measure.collective", "bench.measure.energy",
    "bench.measure.outputs", "bench.define.config", "bench.define.context", "bench.measure.machine",
    "bench.measure.timer", "bench.measure.generation_clock", "bench.measure.repeat",
    "numpy", "numpy.ma", "numpy.random", "random", "resource", "psutil", "nvtx", "torch", "torch._dynamo",
    "torch._inductor.compile_fx", "triton",
    "bench.isolate.warm",  # after triton: its per-process caches (bench/isolate/warm.py), never CUDA
    "bench.define.interpreter",  # the interpreter's scalars, mended in each child that interprets kernels
]  # fmt: skip
PROTOCOL = 1  # bump when the messages change: a server of another protocol gets another key
IDLE_S = 900.0
START_TIMEOUT_S = 30.0  # until the new server listens (its imports come after)
REPLY_TIMEOUT_S = 600.0  # until a server answers a fork request (a first server imports torch first)
KILL_GRACE_S = 2.0
SERVER_LOST = 254  # exit status reported when the server died before the child: unknown

# Environment variables a child sets for itself (applied before CUDA initialises): not part of the key.
_PER_CHILD = frozenset(
    {"CUDA_VISIBLE_DEVICES", "CUBLAS_WORKSPACE_CONFIG",
     "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"}  # read when a compile looks them up, never at import
)  # fmt: skip
_KEYED_PREFIXES = (
    "TORCH", "PYTORCH", "TRITON", "CUDA", "NVIDIA", "LD_", "OMP_", "MKL_", "KMP_", "OPENBLAS", "NUMPY", "PYTHON",
)  # fmt: skip
# The harness's own variables (PERFLAB_*) are read when a child runs, from its caller's environment (the child's is
# replaced by it before its target is imported: bench.isolate.serve), never by the preloaded modules at import
# (tests/bench/isolate/test_preload.py records the reads). Keyed are only those the server reads when it starts: its
# idle limit and its extra preloads. Keyed, $PERFLAB_ROUNDS or $PERFLAB_MIN_WARMUP_SECONDS started a second server
# in a process that changed them between variants (the tests' ``default_rounds``: ~7 s of CPU on the 2-core host).
_KEYED_HARNESS = frozenset({"PERFLAB_SERVER_IDLE_S", "PERFLAB_SERVER_PRELOAD"})


class ServerError(PerflabError):
    """The server could not be started or reached, or refused a request."""


class StaleServer(ServerError):
    """The server's loaded code changed on disk; a new server must be started."""


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


def harness_root() -> str:
    return str(Path(__file__).resolve().parents[2])  # the directory holding the bench package


def server_path(sys_path: Sequence[str] | None = None) -> list[str]:
    """The server's import path: the harness's root, then the caller's path but its first entry (the
    script's directory or the working directory, which differ between ``perflab`` and ``python -m``) and
    setuptools' vendored packages where ``import setuptools`` put them (``added_by_setuptools``)."""
    path = list(sys.path if sys_path is None else sys_path)[1:]
    root = harness_root()
    stated = set(os.environ.get("PYTHONPATH", "").split(os.pathsep)) - {""}
    return [root, *(p for p in path if p != root and (p in stated or not added_by_setuptools(p)))]


def added_by_setuptools(entry: str) -> bool:
    """Whether ``entry`` is setuptools' ``_vendor`` directory, which ``import setuptools`` appends to the importing
    process's ``sys.path`` (setuptools/__init__.py; torch.utils.cpp_extension, which CPU Inductor's C++ builder
    uses, imports it). Left out of the server's path, and so of its key: it is not the caller's setting
    but an import's side effect, which a fresh interpreter of the caller (``--cold-start``'s child) has not had,
    and which a server whose preload imports setuptools makes again itself. The child still gets the caller's whole
    path (appended last, the entry shadows nothing found before it). Kept when $PYTHONPATH names it."""
    p = Path(entry)
    return p.name == "_vendor" and p.parent.name == "setuptools" and (p.parent / "__init__.py").is_file()


def preload_modules() -> list[str]:
    extra = [m for m in os.environ.get("PERFLAB_SERVER_PRELOAD", "").split(",") if m.strip()]
    return [*PRELOAD, *extra]  # the extra modules: for tests of the stale-code check


NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"


def import_preload() -> dict[str, str]:
    """Import ``preload_modules()`` as a server does; a module that fails is left to the children (as
    multiprocessing's forkserver does), its error returned by name. While they import, ``torch.cuda.is_available()``
    answers from NVML (``PYTORCH_NVML_BASED_CUDA_CHECK=1``) instead of the CUDA runtime: the runtime's answer marks
    every later fork of this process unable to use CUDA ("Cannot re-initialize CUDA in forked subprocess"), and
    Inductor's and Triton's imports ask it. A child takes its caller's environment, so the setting ends here."""
    import importlib

    errors: dict[str, str] = {}
    before = os.environ.get(NVML_CHECK)
    os.environ[NVML_CHECK] = "1"
    try:
        for name in preload_modules():
            try:
                importlib.import_module(name)
            except Exception as exc:
                errors[name] = f"{type(exc).__name__}: {exc}"
    finally:
        if before is None:
            os.environ.pop(NVML_CHECK, None)
        else:
            os.environ[NVML_CHECK] = before
    return errors


def server_key(interpret: bool, env: dict[str, str] | None = None) -> str:
    """The key of the server a caller in this interpreter needs, in this Triton mode (16 hex digits)."""
    environ = os.environ if env is None else env
    keyed = {
        k: v for k, v in sorted(environ.items())
        if (k.startswith(_KEYED_PREFIXES) and k not in _PER_CHILD) or k in _KEYED_HARNESS
    }  # fmt: skip
    keyed["TRITON_INTERPRET"] = "1" if interpret else ""
    doc = {
        "protocol": PROTOCOL,
        "executable": sys.executable,
        "version": sys.version,
        "path": server_path(),
        "preload": preload_modules(),
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


def umask() -> int:
    """This process's umask, read without changing it (os.umask sets it: a race with other threads)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def send(sock: socket.socket, msg: dict[str, Any], fds: Sequence[int] = ()) -> None:
    data = json.dumps(msg).encode()
    frame = struct.pack("!I", len(data)) + data
    if fds:
        n = socket.send_fds(sock, [frame], list(fds))
        frame = frame[n:]
    sock.sendall(frame)


def recv(sock: socket.socket, with_fds: bool = False) -> tuple[dict[str, Any] | None, list[int]]:
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


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
