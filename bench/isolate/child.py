"""The child side of an isolated variant run: ``python -m bench.isolate.child JOB_JSON CHANNEL`` (cold start, or
under a profiler), or ``entry`` in a fork of the pre-warmed server.

Stages, each announced to the parent (``bench.isolate.channel``), whose watchdog enforces its limit: startup
(the harness's clocks bound before any benchmark code runs, the benchmark file imported) → setup (the
benchmark object, its config, CUDA's start, the holds a worker may put it at, the seed, ``setup()``) → then by
job mode: "run" the timed stages (``bench.isolate.timed``), "verify" nothing more, "profile" the profiled
calls → teardown. This process never imports mlflow and never decides "verified".
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys
from typing import Any

from bench.isolate.channel import Stage, attach, send, wait_for

# The Triton mode this module was imported in (in the server: the server's mode).
_IMPORT_MODE = os.environ.get("TRITON_INTERPRET", "")
# Exit code of a forked child that cannot run in this server (EX_TEMPFAIL): the parent retries cold.
TRITON_MODE_MISMATCH = 75


def run(job: dict[str, Any]) -> None:
    if "cuda_expected" in job:  # the parent built this environment on a guess (process.cuda_guess): check it
        import torch

        if torch.cuda.is_available() != job["cuda_expected"]:
            os._exit(TRITON_MODE_MISMATCH)  # before any message: the parent re-runs this variant cold
    with Stage("startup"):
        module = _startup(job)
    with Stage("setup"):
        v = _setup(job, module)
    if job.get("mode") == "verify":  # import + instantiate + setup only, no timing
        with Stage("teardown"):
            v.obj.teardown()
        send("done")
    elif job.get("mode") == "profile":
        _profile(v)
    else:
        from bench.isolate.timed import run_timed

        run_timed(v)


def _startup(job: dict[str, Any]) -> Any:
    """The harness's measuring code imported and its clocks bound, then the benchmark's module imported."""
    import torch  # noqa: F401  (imported here, inside the stage: a cold start's heaviest import)

    from bench.define.protocol import import_file
    from bench.isolate import ranks, timed  # noqa: F401  (the timed stages' and the ranks' code, bound below)
    from bench.measure import clocks, collective, energy, generation_clock, gpu_clocks, guard  # noqa: F401

    guard.bind_harness()  # the clocks as they are before any benchmark code runs (INTEGRITY #12)
    if os.environ.get("TRITON_INTERPRET") == "1":  # kernels on the CPU: the same scalars in every Triton release
        from bench.define import interpreter

        interpreter.mend()
    if job.get("world_size", 1) > 1:  # a rank: code written for torchrun joins the harness's group
        from bench.isolate.torchrun import install

        install()
    _seed(job)  # inputs drawn at import, as a script draws them, are the run's seed's, as setup()'s are
    return import_file(job["path"])


def _seed(job: dict[str, Any]) -> None:
    """Seed the generators with the run's seed (its config file's and flags'; a benchmark's own ``get_config()`` seed
    applies from ``setup()`` on): inputs drawn at import or in ``__init__`` are then the same on both sides of a pair,
    whatever the style each side is written in, and follow ``--seed``."""
    from bench.define.config import resolve_config
    from bench.define.context import seed_everything

    seed_everything(resolve_config(job.get("suite_layer"), job.get("cli_layer")).seed, deterministic=False)


def _setup(job: dict[str, Any], module: Any) -> Any:
    """The benchmark object and its effective config; CUDA's start; the gate (started ahead); the seed and
    ``setup()``; the set-up tensors watched; the measure hold (a worker may park the child here)."""
    from bench.define.config import BenchmarkConfig, benchmark_layer, host_clocked, resolve_config
    from bench.define.context import FILES, make_context, seed_everything, set_context, synchronize
    from bench.define.protocol import check_benchmark
    from bench.isolate.recheck import watch_inputs
    from bench.isolate.timed import SetUp, check_timers
    from bench.measure.generation_clock import generation_clock
    from bench.measure.machine import device_manifest

    factory = _factory(module, job)
    _seed(job)  # an __init__ that draws the inputs draws the run's seed's
    obj = check_benchmark(factory(), job["path"])
    get_config = getattr(obj, "get_config", None)  # optional protocol methods
    own = get_config() if callable(get_config) else None
    if own is not None and not isinstance(own, (BenchmarkConfig, dict)):
        raise TypeError(f"get_config() must return a BenchmarkConfig or None, got {type(own).__name__}")
    config = resolve_config(job["suite_layer"], benchmark_layer(own), job["cli_layer"])
    send("config", config=config.model_dump())
    if (config.world_size > 1 or _several_gpus(config)) and "rank" not in job:  # it coordinates the variant's ranks
        from bench.isolate.ranks import coordinate

        coordinate(job, config, rank_main)  # never returns
    ctx = make_context(config, files_dir=os.path.join(job["workdir"], FILES), timing_only=bool(job.get("timing_only")))
    set_context(ctx)
    device = ctx.device
    if device.type == "cuda":
        _cuda_start(device)
    if ctx.world_size > 1:
        from bench.isolate.ranks import join_group

        join_group(ctx, job)
    if job.get("gate"):
        _wait_at_gate(device)
    if job.get("threads") and host_clocked(config, str(device)):  # before setup(): a benchmark's own count wins
        from bench.measure.cores import cap_threads

        if cap_threads(int(job["threads"])):
            send("threads", note=job.get("threads_note", ""))
    seed_everything(config.seed, config.deterministic)
    obj.setup()
    synchronize(device)
    # The benchmark's own peak: its set-up, before the harness's fingerprints of the set-up tensors (a float64
    # sum materialises a float64 copy) and its L2-flush buffer, neither the variant's.
    import torch

    setup_peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else 0
    gen = generation_clock(obj, config, device)  # token generation (bench/measure/generation.py); None otherwise
    send("device", device=str(device), manifest=device_manifest(device))
    if ctx.sizes:
        send("sizes", sizes=ctx.sizes)
    inputs, prints = watch_inputs(obj, config)
    check_timers("setup")
    gate = job.get("measure_gate")
    if gate and job.get("mode") == "run" and (gate != "host_bound" or host_clocked(config, str(device))):
        _wait_to_measure()
    return SetUp(job, obj, config, device, gen, inputs, prints, setup_peak)


def _factory(module: Any, job: dict[str, Any]) -> Any:
    """The benchmark file's ``get_benchmark`` (or its module, of module-level ``setup()`` and ``benchmark_fn()``); for
    a KernelBench-format file (Model / ModelNew), the harness's own
    (bench.define.kernelbench); else a ProtocolError naming the file."""
    from bench.define.protocol import benchmark_factory

    factory = benchmark_factory(module)
    if factory is not None:
        return factory
    from bench.define.kernelbench import problem_factory

    return problem_factory(module, job["path"], job.get("reference"))


def _several_gpus(config: Any) -> bool:
    """A variant of one process on several GPUs (``gpus``), on a GPU host: it runs as one rank that sees them all
    (CUDA reads which GPUs it sees once, when it starts; this child may be pinned to one)."""
    if config.gpus < 2 or config.device == "cpu":
        return False
    import torch

    return torch.cuda.is_available()


def _cuda_start(device: Any) -> None:
    """Create this process's CUDA context (cuInit, primary context) and report how long it took.

    Two children doing this at once on two GPUs each take ~1.8x as long as one alone: the driver
    serialises most of it across GPUs (docs/results/h200x2.md). Taking turns under a host-wide lock did not
    help (chapter 7's two-GPU ratio 0.658 with the lock, 0.640 without; each child then waited for the
    other's context or its exit instead), so children start as they come."""
    import time

    import torch

    t0 = time.monotonic()
    torch.cuda.set_device(device)
    torch.cuda.synchronize(device)  # the primary context exists once this returns
    send("cuda_start", start_s=time.monotonic() - t0)


def _wait_at_gate(device: Any) -> None:
    """Started ahead (``bench.isolate.runner.Gate``): with the CUDA context made (``_cuda_start``), open NVML
    now, while the previous variant on this GPU finishes; then wait for the parent's go, before the
    benchmark's setup() allocates."""
    if device.type == "cuda":
        from bench.measure.machine import nvml_ready

        nvml_ready()
    send("gate")
    wait_for(b"g")


def _wait_to_measure() -> None:
    """Set up: tell the parent, and wait for its go before the warm-up (the runner's ``before_measure``: a
    host-clocked measurement runs alone on the host, and the other workers wait for it here;
    bench.isolate.workers)."""
    send("ready")
    wait_for(b"m")


def _profile(v: Any) -> None:
    """Job mode "profile": warm up, then the profiled calls inside the NVTX range ``perflab_timed``
    (the outermost range there, for ncu's filter): under torch.profiler here, or plainly when ncu or
    nsys wraps this process. Nothing is timed."""
    from bench.define.context import set_context, synchronize
    from bench.define.protocol import keep_returned
    from bench.profile.markers import TIMED_RANGE, nvtx_range, per_call
    from bench.profile.tools import PROFILE_CALLS, capture_torch

    fn = keep_returned(v.obj, per_call(v.obj.benchmark_fn))
    with Stage("warmup"):
        for _ in range(max(v.config.warmup, 1)):  # compile/autotune before the profiled calls
            fn()
        synchronize(v.device)
    with Stage("profiling", mark=False):
        tool = v.job.get("profile_tool", "torch")
        if tool == "torch":
            send("profile", **capture_torch(fn, v.device, os.path.join(v.job["workdir"], "out"), PROFILE_CALLS))
        else:
            with nvtx_range(TIMED_RANGE):
                for _ in range(PROFILE_CALLS):
                    fn()
                synchronize(v.device)
            send("profile", tool=tool)
    with Stage("teardown"):
        v.obj.teardown()
        set_context(None)
    send("done")


def _finish(job_path: str) -> None:
    faulthandler.enable()  # a segfault prints the Python stack to the log the parent keeps
    with open(job_path) as f:
        job = json.load(f)
    run(job)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip interpreter teardown (CUDA context destruction is slow and can hang)


def rank_main(rank: int, job_path: str, conn: Any) -> None:
    """One rank of a variant with world_size > 1 (bench.isolate.ranks), in a fresh interpreter: these stages, its
    messages to the coordinator on ``conn`` (a pipe)."""
    from bench.define.context import set_rank

    attach(conn.fileno())
    set_rank(rank)
    _finish(job_path)


def main() -> None:
    """Cold path: a brand-new interpreter started by the parent (``--cold-start``)."""
    # A descriptor inherited from the parent, or a FIFO's path when a profiler wraps this process
    # (ncu/nsys need not pass descriptors through to the process they launch).
    channel = sys.argv[2]
    attach(int(channel) if channel.isdigit() else os.open(channel, os.O_WRONLY))
    _finish(sys.argv[1])


def entry(job_path: str, fd: int) -> None:
    """Fast path: forked from the pre-warmed server (bench.isolate.serve: torch, triton, numpy, the harness
    imported; CUDA never initialised there), which has already given this process what a fresh
    interpreter would get from the caller (environment, import path, working directory, own session,
    output to the log); ``fd`` is the message pipe."""
    # Triton decides interpreted-or-compiled when its own helpers (tl.sum, tl.zeros, ...) are defined,
    # at import. A server that imported it in the other mode cannot serve this variant: say so before
    # anything runs; the parent starts it cold instead. (Servers are keyed by mode: a safeguard.)
    if "triton" in sys.modules and _IMPORT_MODE != os.environ.get("TRITON_INTERPRET", ""):
        os._exit(TRITON_MODE_MISMATCH)
    attach(fd)
    _finish(job_path)


if __name__ == "__main__":
    main()
