"""A variant's child process: its environment, where it comes from, running a function in a fresh one, and
killing one's process group.

The parent never imports torch (~4 s on a GPU host): whether CUDA is there is guessed from the install and
NVML (``cuda_guess``), and a child told a guess checks it before anything else (a wrong guess: the variant is
run again cold, with torch's answer). The guess picks the server's Triton mode (interpreted on a CPU,
compiled on a GPU), which Triton fixes at import.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
from pathlib import Path
from typing import Any, Protocol

from bench.define.config import BenchmarkConfig, resolve_config
from bench.define.result import Verification
from bench.measure.verify import FilePair, verify_all

KILL_GRACE_S = 2.0


def child_env(
    config: BenchmarkConfig, base: dict[str, str] | None = None, cold_dir: Path | None = None
) -> dict[str, str]:
    """Environment for a child: the parent's, plus what must be set before torch/triton import. Compile caches
    (``compile_caches``) persist between children and runs; with ``cold_compile``, an empty one in ``cold_dir``."""
    env = dict(os.environ if base is None else base)
    env.update(compile_caches(env, cold_dir if config.cold_compile else None))
    root = str(Path(__file__).resolve().parents[2])  # the directory holding the bench package
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    if config.device == "cpu" or (config.device == "auto" and not cuda_guess()[0]):
        env.setdefault("TRITON_INTERPRET", "1")  # Triton kernels run on the CPU through the interpreter
    if config.deterministic:
        env.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # must precede CUDA init
    # NVLink multicast (NVLS) stays off, whatever the caller's environment says: on the lent multi-GPU hosts it
    # must not be used (NCCL's NVLS algorithms, torch's symmetric memory). A variant's ranks inherit these.
    env["NCCL_NVLS_ENABLE"] = "0"
    env["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
    return env


# The compile caches a child is given, where the caller's environment names none: Inductor's (FX graphs, autotuning
# results, generated kernels) and Triton's (compiled kernels). Kept under the user's cache directory, so a variant
# compiled once is loaded, not compiled, by every later child and run: what is timed is the compiled code either
# way; the first call (time_first_call_ms) then holds a load instead of a compile.
CACHE_VARIABLES = {"TORCHINDUCTOR_CACHE_DIR": "inductor", "TRITON_CACHE_DIR": "triton"}


def compile_caches(env: dict[str, str], cold_dir: Path | None = None) -> dict[str, str]:
    """The cache variables to set for a child: those ``env`` lacks, under ~/.cache/perflab (XDG_CACHE_HOME);
    with ``cold_dir`` every one of them, new and empty under it (a cold compile, whatever ``env`` says)."""
    if cold_dir is not None:
        import shutil

        shutil.rmtree(cold_dir, ignore_errors=True)
        return {k: str(cold_dir / name) for k, name in CACHE_VARIABLES.items()}
    root = Path(env.get("XDG_CACHE_HOME") or Path(env.get("HOME") or Path.home()) / ".cache") / "perflab"
    return {k: str(root / name) for k, name in CACHE_VARIABLES.items() if not env.get(k)}


_CUDA: bool | None = None


def cuda_available() -> bool:
    global _CUDA
    if _CUDA is None:
        import torch

        _CUDA = bool(torch.cuda.is_available())
    return _CUDA


class _Process(Protocol):
    pid: int

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


def server_interpret(config: BenchmarkConfig, env: dict[str, str] | None = None) -> bool:
    """The Triton mode of the server ``config``'s variants are forked from (as ``child_env`` decides)."""
    return child_env(config, env).get("TRITON_INTERPRET") == "1"


_MODE: bool | None = None  # the Triton mode of the server this process last used (prestart or a variant)


def remember_mode(interpret: bool) -> None:
    """The server this process last forked a variant from was in this Triton mode (``in_server`` uses it)."""
    global _MODE
    _MODE = interpret


def in_server(fn: Any, *args: Any, timeout: float) -> Any:
    """``fn(*args)`` in a fresh child of the pre-warmed server (torch imported there, not here)."""
    from bench.isolate import server

    interpret = _MODE if _MODE is not None else server_interpret(resolve_config())
    return server.call(fn, *args, interpret=interpret, timeout=timeout)


def verify_in_server(
    pairs: list[FilePair], rtol: float | None, limit_s: float, mode: str = "exact"
) -> list[Verification]:
    """``verify_all`` in a fresh child of the pre-warmed server (the parent never imports torch); here, should
    that child fail rather than the comparison. The ``verify`` a suite hands to ``bench.measure.compare``."""
    from bench.isolate.server import ServerError

    try:
        return in_server(verify_all, pairs, rtol, mode, timeout=limit_s)  # type: ignore[no-any-return]
    except (OSError, ServerError):
        return verify_all(pairs, rtol, mode)


def confirm_cuda(answer: bool) -> None:
    """A child checked the guess against torch and went on: the answer is exact from now on, and later
    children skip the check (``torch.cuda.is_available()``: ~0.08 s of each variant's start-up on the
    H200 host, where the parent no longer imports torch to learn it)."""
    global _CUDA
    if _CUDA is None:
        _CUDA = answer


def cuda_guess() -> tuple[bool, bool]:
    """(CUDA available, exactly known): torch's answer once this process has it, else ``cuda_likely()``.

    The parent does not import torch (~4 s on a GPU host), so variants go by the guess: a child told a
    guess checks it against torch before anything else and exits with TRITON_MODE_MISMATCH when it was
    wrong (the parent then asks torch and re-runs the variant cold); when it was right, the answer is
    exact from then on (``confirm_cuda``)."""
    return (_CUDA, True) if _CUDA is not None else (cuda_likely(), False)


def cuda_likely() -> bool:
    """Whether torch will see a CUDA device, without importing torch (~4 s on a GPU host): a CUDA build
    of torch (``torch/lib/libtorch_cuda.so``), NVML reporting a GPU, and CUDA_VISIBLE_DEVICES not hiding
    them all. Only for guesses that a wrong answer cannot make wrong (the server's Triton mode: a variant
    needing the other one is re-run cold); ``cuda_available`` answers exactly."""
    return _CUDA if _CUDA is not None else _probe_cuda()


@functools.cache
def _probe_cuda() -> bool:
    """cuda_likely's probe, once per process (every variant asks while torch is still importing)."""
    import importlib.util

    spec = importlib.util.find_spec("torch")  # locates the package; does not import it
    roots = list(spec.submodule_search_locations or []) if spec else []
    if not any((Path(r) / "lib" / "libtorch_cuda.so").exists() for r in roots):
        return False
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and (not visible.strip() or visible.strip().startswith("-")):
        return False
    count = nvml_gpu_count()
    return count > 0 if count is not None else cuda_available()  # no NVML (or MIG): ask torch


def nvml_gpu_count() -> int | None:
    """The GPUs NVML sees (no CUDA context: safe before a fork), or None where NVML is missing or a GPU
    is in MIG mode (then ask torch)."""
    try:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        count = pynvml.nvmlDeviceGetCount()
        for i in range(count):
            try:
                current, _ = pynvml.nvmlDeviceGetMigMode(pynvml.nvmlDeviceGetHandleByIndex(i))
            except Exception:  # NVMLError: not MIG-capable; AttributeError: an NVML without MIG
                continue
            if current:
                return None
        return count
    except Exception:
        return None
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def prestart_server(config: BenchmarkConfig) -> bool:
    """Make sure this user's pre-warmed server for ``config``'s Triton mode is running; returns that mode.

    A server kept from an earlier command answers at once; otherwise one starts now and imports torch and
    triton (~4 s on a GPU host) while the parent goes on (importing mlflow, opening the store) instead of
    delaying the first variant. The mode comes from ``cuda_guess()``, not from importing torch here:
    that import would cost as long again, and the parent needs no torch (outputs are compared in a child
    of the server). A variant that turns out to need the other mode is re-run cold.
    """
    from bench.isolate import server

    interpret = server_interpret(config)
    server.connect(interpret).close()  # connected: it listens (a new one is importing; requests wait)
    remember_mode(interpret)
    return interpret


def _signal_group(pid: int, sig: int) -> bool:
    """Signal the child's process group (or the child alone, before its setsid ran); False if gone."""
    try:
        os.killpg(pid, sig)
        return True
    except ProcessLookupError:
        try:
            os.kill(pid, sig)
            return True
        except ProcessLookupError:
            return False


def kill_group(proc: _Process) -> None:
    """TERM the child's process group, then KILL whatever is left after the grace period."""
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, 10.0)):
        if not _signal_group(proc.pid, sig):
            return
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        if sig == signal.SIGTERM:
            # The leader died on TERM; make sure no grandchild survived it.
            _signal_group(proc.pid, signal.SIGKILL)
        return
