"""The child side of an isolated variant run: ``python -m bench._child JOB_JSON MSG_FD``.

It announces each stage on the message pipe (one JSON object per line) before and after running it;
the parent enforces each stage's limit and kills this process group when one expires. Data (effective
config, timing samples, memory, outputs, manifest) also travel as messages, so a crash late in the run
keeps what was measured before it. This process never imports mlflow and never decides "verified".
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys
import traceback
from typing import Any, Literal

_fd: int = -1


def _push(name: str) -> None:
    """Open the NVTX stage range ``name`` (bench.markers: nvtx imported at the first range; the server
    preloads it, and the parent, which imports this module, never needs it)."""
    from bench.markers import _module

    nvtx = _module()
    if nvtx is not None:
        nvtx.push_range(name)


def _pop() -> None:
    from bench.markers import _module

    nvtx = _module()
    if nvtx is not None:
        nvtx.pop_range()


def send(kind: str, /, **payload: Any) -> None:
    # Positional-only: error messages carry their own "kind" field in the payload.
    data = (json.dumps({"t": kind, **payload}, default=str) + "\n").encode()
    view = memoryview(data)
    while view:
        n = os.write(_fd, view)
        view = view[n:]


class _Stage:
    """Announces a stage to the parent and marks it as the NVTX range ``perflab:<stage>``."""

    def __init__(self, name: str, mark: bool = True) -> None:
        self.name = name
        self.mark = mark

    def __enter__(self) -> None:
        os.environ["PERFLAB_STAGE"] = self.name  # which stage a benchmark's code runs in (test fixtures read it)
        send("stage", name=self.name, event="start")
        if self.mark:
            _push(f"perflab:{self.name}")

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> Literal[False]:
        if exc is None:
            if self.mark:
                _pop()
            send("stage", name=self.name, event="end")
            return False
        if type(exc).__name__ == "Skip":  # context().require()/skip(): this host cannot run the variant
            send("skipped", stage=self.name, reason=str(exc))
            os._exit(0)
        kind = "protocol" if type(exc).__name__ == "ProtocolError" else "exception"
        send(
            "error",
            stage=self.name,
            kind=kind,
            message=f"{type(exc).__name__}: {exc}",
            traceback="".join(traceback.format_exception(exc)),
        )
        os._exit(3)  # skip teardown paths that may hang; the parent records the failure


def _outputs(obj: Any) -> list[Any] | None:
    import torch

    get = getattr(obj, "get_output", None)
    if get is None:
        return None
    out = get()
    if out is None:
        return None
    tensors = list(out) if isinstance(out, (tuple, list)) else [out]
    bad = [type(t).__name__ for t in tensors if not isinstance(t, torch.Tensor)]
    if bad:
        raise TypeError(f"get_output() must return a tensor or a tuple of tensors, got {bad}")
    return tensors


def _sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _seed_everything(seed: int, deterministic: bool) -> None:
    import random

    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device
    if deterministic:
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False


def run(job: dict[str, Any]) -> None:
    if "cuda_expected" in job:  # the parent built this environment on a guess (runner.cuda_guess): check it
        import torch

        if torch.cuda.is_available() != job["cuda_expected"]:
            os._exit(TRITON_MODE_MISMATCH)  # before any message: the parent re-runs this variant cold
    with _Stage("startup"):
        import torch

        from bench import guard
        from bench.config import BenchmarkConfig, host_clocked, resolve_config
        from bench.context import make_context, set_context
        from bench.generation import generation_clock
        from bench.machine import flags, gpu_uuid, snapshot
        from bench.manifest import device_manifest
        from bench.markers import per_call
        from bench.protocol import check_benchmark, import_file
        from bench.timing import clock_for, drift_note

        guard.bind_harness()  # the clocks as they are before any benchmark code runs (INTEGRITY #12)
        module = import_file(job["path"])

    with _Stage("setup"):
        factory = getattr(module, "get_benchmark", None)
        if not callable(factory):
            from bench.errors import ProtocolError

            raise ProtocolError(f"{job['path']}: no module-level get_benchmark() function")
        obj = check_benchmark(factory(), job["path"])
        get_config = getattr(obj, "get_config", None)  # optional protocol methods
        own = get_config() if callable(get_config) else None
        if own is not None and not isinstance(own, (BenchmarkConfig, dict)):
            raise TypeError(f"get_config() must return a BenchmarkConfig or None, got {type(own).__name__}")
        config = resolve_config(job["suite_layer"], own, job["cli_layer"])
        send("config", config=config.model_dump())
        ctx = make_context(config)
        set_context(ctx)
        device = ctx.device
        if device.type == "cuda":
            _cuda_start(device)
        if job.get("gate"):
            _wait_at_gate(device)
        _seed_everything(config.seed, config.deterministic)
        obj.setup()
        _sync(device)
        # The benchmark's own peak: its set-up, before the harness's fingerprints of the set-up tensors
        # (a float64 sum materialises a float64 copy) and its L2-flush buffer, neither the variant's.
        setup_peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else 0
        gen = generation_clock(obj, config, device)  # token generation (bench/generation.py); None otherwise
        send("device", device=str(device), manifest=device_manifest(device))
        if ctx.sizes:
            send("sizes", sizes=ctx.sizes)
        inputs, prints = _watch_inputs(obj, config)
        _check_timers("setup")
        gate = job.get("measure_gate")
        if gate and job.get("mode") == "run" and (gate != "host_bound" or host_clocked(config, str(device))):
            _wait_to_measure()

    if job.get("mode") == "verify":  # import + instantiate + setup only, no timing
        with _Stage("teardown"):
            obj.teardown()
        send("done")
        return
    if job.get("mode") == "profile":
        _profile_job(job, obj, config, device)
        return

    clock = gen if gen is not None else clock_for(config, device)  # a generation is timed step by step
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    # A range per call only while an NVTX tool listens (never in a timed child): see bench.markers.
    fn = per_call(obj.benchmark_fn)
    with _Stage("warmup"):
        first = clock.first_call(fn)  # compile/JIT/autotune included, recorded apart (INTEGRITY #8)
        clock.warmup(fn, max(config.warmup - 1, 0))
        if hasattr(clock, "check_capture"):
            clock.check_capture(lambda: _outputs(obj))

    poisoned = False
    with _Stage("measurement"):
        if config.poison_outputs:
            # INTEGRITY #6: outputs the timed calls do not rewrite keep the NaN and fail the check.
            for t in _outputs(obj) or []:
                if t.is_floating_point() or t.is_complex():
                    t.fill_(float("nan"))
                    poisoned = True
            _sync(device)
        uuid = gpu_uuid(device) if device.type == "cuda" else None
        before = snapshot(device.index or 0, uuid) if device.type == "cuda" else {}
        host_before, own_before = guard.cpu_times(), guard.process_cpu_s()
        m = clock.measure(fn, config.iterations, config.stop_rule())
        host_after, own_after = guard.cpu_times(), guard.process_cpu_s()
        after = snapshot(device.index or 0, uuid) if device.type == "cuda" else {}
    _check_timers("measurement")
    machine_flags = flags(before, after) if device.type == "cuda" else []
    if host_before and host_after:
        busy = guard.host_busy_share(host_before, host_after, own_after - own_before)
        if busy is not None and busy > HOST_BUSY_SHARE:
            machine_flags.append(
                f"host busy: other processes used {100 * busy:.0f} % of the host's CPU time during the measurement"
            )
    notes = clock.notes + m.notes + [n for n in [drift_note(m.samples_ms)] if n]
    send(
        "timing",
        mode=clock.mode,
        requested_mode=config.timing_mode,
        fallback=clock.fallback,
        method=clock.method,
        samples_ms=m.samples_ms,
        first_call_ms=first,
        warmup_calls=1 + clock.warmup_done,
        warmup_stable=clock.stable,
        l2_flushed=clock.l2_flushed,
        notes=notes,
        invalid=clock.invalid,
        stop_reason=m.stop_reason,
        noise=m.noise,
        noise_target=m.noise_target,
        target_met=m.target_met,
        machine_before=before,
        machine_after=after,
        machine_flags=machine_flags,
    )
    if gen is not None:  # token generation: TTFT, TPOT, throughput of the measured generations
        send("generation", **gen.result())

    # The variant's memory, taken before the check: the harness's own NaN check below allocates (a bool
    # per output element: 16 MiB more for a 64 MiB fp32 output, H100 session 6) and is not the variant's.
    memory = _memory(device, setup_peak, getattr(clock, "overhead_bytes", 0)) if config.enable_memory_tracking else None

    with _Stage("check"):
        tensors = _outputs(obj)
        output: dict[str, Any] = {"path": None, "tensors": [], "timed_calls_wrote_output": None}
        timed_sample = guard.subsample(tensors) if tensors is not None else None
        if tensors is not None:
            from bench import outputs

            if poisoned:  # on the tensors' own device: one reduction on the GPU, not a pass over a host copy
                output["timed_calls_wrote_output"] = not any(
                    bool(torch.isnan(t).any()) for t in tensors if t.is_floating_point() or t.is_complex()
                )
            path = os.path.join(job["workdir"], "outputs")
            if gen is not None:  # the generation clock poisoned the outputs before every generation
                output["timed_calls_wrote_output"] = gen.wrote_output()
            output["tensors"] = outputs.save(tensors, path)
            output["path"] = path
        send("output", **output)
        validate = getattr(obj, "validate_result", None)
        message = validate() if callable(validate) else None
        send("validation", message=message)
        get_work = getattr(obj, "get_work", None)
        work = get_work() if callable(get_work) else None
        if work is not None:
            send("work", **dict(work))
        if memory is not None:
            send("memory", **memory)
        mutated = {k: inputs[k] for k in guard.changed(prints, guard.fingerprints(inputs))}

    if config.measure_batch:
        with _Stage("batch"):
            import statistics

            batch = clock.measure_batch(fn, statistics.median(m.samples_ms))
            if batch is not None:
                send("batch", **{k: v for k, v in vars(batch).items()}, invalid=clock.invalid)
        _check_timers("batch")

    if config.check_inputs:
        with _Stage("recheck"):
            if mutated:  # set up again: the tensors to change next are the new set-up's
                inputs = _restored_call(obj, config, clock, fn, timed_sample, mutated)
            _changed_inputs(obj, inputs, fn, device, job)

    with _Stage("teardown"):
        obj.teardown()
        set_context(None)
    send("done")


# Other processes using more than this share of the host's CPU time during a measurement flag it: a
# 2-thread op read 16 ms instead of 0.03 ms on the 2-core CI machine beside a busy process.
HOST_BUSY_SHARE = 0.25


def _check_timers(stage: str) -> None:
    """A benchmark that replaced a clock the harness times with ends here as invalid (bench.guard)."""
    from bench import guard

    replaced = guard.tampered()
    if replaced:
        send("tampered", stage=stage, names=replaced[:20])
        os._exit(0)


def _watch_inputs(obj: Any, config: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The tensors set up in setup() (or declared by ``get_inputs()``) and their fingerprints."""
    if not config.check_inputs:
        return {}, {}
    from bench import guard

    inputs = guard.setup_tensors(obj, _outputs(obj) or [], _declared_inputs(obj))
    return inputs, guard.fingerprints(inputs)


def _declared_inputs(obj: Any) -> Any:
    get = getattr(obj, "get_inputs", None)
    return get() if callable(get) else None


def _restored_call(obj: Any, config: Any, clock: Any, fn: Any, timed: Any, mutated: dict[str, Any]) -> dict[str, Any]:
    """The timed calls changed tensors set up in setup() (INTEGRITY #6). A controlled comparison of two
    fresh set-ups that differ only in those tensors: one call from the set-up state (A) against one call
    with the tensors as the timed calls left them (B), RESTORE_ROUNDS of each, interleaved and ending on A.
    A much slower than B, or A's output unlike the timed calls', means the timed calls ran on what earlier
    calls left behind (an input sorted in place, an answer written into an input)."""
    from bench import guard
    from bench.compare import compare_tensors

    try:
        left = {k: t.detach().clone() for k, t in mutated.items()}
    except Exception:  # no room for a copy: the set-up state alone, against the warm-up's calls
        left = None
    a_ms: list[float] = []
    b_ms: list[float] = []

    def call_from(held: dict[str, Any] | None) -> dict[str, Any]:
        """One call of a fresh set-up: from the set-up state (``held`` None) or holding ``held``."""
        inputs = _set_up_again(obj, config)
        if held is not None:
            _restore(inputs, held)
        # Eager: a cold clock's captured graphs still point at the tensors of the first set-up.
        t = clock.eager(fn) if hasattr(clock, "eager") else clock.one(fn)
        (a_ms if held is None else b_ms).append(t)
        return inputs

    rounds = 0
    # A busy host only adds time, so the fastest of each side converges: more rounds while A looks much
    # slower than B (the verdict's own line, bench.runner), so noise alone does not make the variant invalid.
    while rounds < RESTORE_ROUNDS or (
        b_ms and rounds < RESTORE_MAX_ROUNDS and min(a_ms) > RESTORE_SLOWER * min(b_ms) + RESTORE_FLOOR_MS
    ):
        if left is not None:
            call_from(left)
        inputs = call_from(None)
        rounds += 1
    same = None
    after = _outputs(obj)
    if timed is not None and after is not None:
        same = compare_tensors(timed, guard.subsample(after), config.rtol).verified
    reference = min(b_ms) if b_ms else getattr(clock, "eager_ms", None)
    described = [f"{k}: {guard.describe(t)}" for k, t in mutated.items()]
    send("restore", mutated=described, time_ms=min(a_ms), reference_ms=reference, controlled=bool(b_ms),
         same_output=same, times_ms=a_ms, reference_times_ms=b_ms)  # fmt: skip
    return inputs


# Calls from each state in the restore comparison (the fastest of each counts), and at most this many
# when the first rounds look like skipped work.
RESTORE_ROUNDS = 2
RESTORE_MAX_ROUNDS = 8
RESTORE_FLOOR_MS = 0.005  # below this gap (ms) a slower call from the set-up state is clock noise
# A call from the set-up state this much slower than one holding what the timed calls left (both the fastest
# of their rounds, and A's rounds slower than B's beyond chance: bench.runner) means the timed calls did less
# work.
RESTORE_SLOWER = 1.1


def _set_up_again(obj: Any, config: Any) -> dict[str, Any]:
    from bench.context import make_context, set_context

    obj.teardown()
    ctx = make_context(config)
    set_context(ctx)
    _seed_everything(config.seed, config.deterministic)
    obj.setup()
    _sync(ctx.device)
    inputs, _ = _watch_inputs(obj, config)
    return inputs


def _restore(inputs: dict[str, Any], left: dict[str, Any]) -> None:
    """Put the contents the timed calls left into the new set-up's tensors of the same name and shape."""
    import torch

    with torch.no_grad():
        for key, value in left.items():
            t = inputs.get(key)
            if t is not None and t.shape == value.shape and t.dtype == value.dtype:
                t.copy_(value)
    if left:
        _sync(next(iter(left.values())).device)


def _changed_inputs(obj: Any, inputs: dict[str, Any], fn: Any, device: Any, job: Any) -> None:
    """Change every floating tensor set up in setup() (``inputs``: not those made later, a cache among them)
    in place (bench.guard.perturb), make one call, and keep a sample of its output: it must differ from
    before, and match the baseline's on the same change."""
    from bench import guard, outputs

    before = _outputs(obj)
    if before is None:
        return
    sample = guard.subsample(before)
    changed = guard.perturb(inputs)
    if not changed:
        send("fresh", perturbed=0, path=None, tensors=[], output_changed=None)
        return
    fn()
    _sync(device)
    fresh = guard.subsample(_outputs(obj) or [])
    differs = len(fresh) != len(sample) or any(
        a.shape != b.shape or not bool((a == b).all()) for a, b in zip(sample, fresh, strict=False)
    )
    path = os.path.join(job["workdir"], "fresh")
    send("fresh", perturbed=changed, path=path, tensors=outputs.save(fresh, path), output_changed=differs)


def _cuda_start(device: Any) -> None:
    """Create this process's CUDA context (cuInit, primary context) and report how long it took.

    Two children doing this at once on two GPUs each take ~1.8x as long as one alone: the driver
    serialises most of it across GPUs (H200 x 2, session 6). Taking turns under a host-wide lock did
    not help (session 7, call Z1: chapter 7's two-GPU ratio 0.658 with the lock, 0.640 without; each
    child then waited for the other's context or its exit instead), so children start as they come."""
    import time

    import torch

    t0 = time.monotonic()
    torch.cuda.set_device(device)
    torch.cuda.synchronize(device)  # the primary context exists once this returns
    send("cuda_start", start_s=time.monotonic() - t0)


def _wait_at_gate(device: Any) -> None:
    """Started ahead (runner.Gate): with the CUDA context made (``_cuda_start``), open NVML now, while
    the previous variant on this GPU finishes; then wait for the parent's go, before the benchmark's
    setup() allocates."""
    if device.type == "cuda":
        from bench.machine import nvml_ready

        nvml_ready()
    send("gate")
    if os.read(_fd, 1) != b"g":  # EOF: the parent is gone
        os._exit(4)


def _wait_to_measure() -> None:
    """Set up: tell the parent, and wait for its go before the warm-up (runner's ``before_measure``: a
    host-bound measurement runs alone on the host, and the other workers wait for it here; suite._Host)."""
    send("ready")
    if os.read(_fd, 1) != b"m":  # EOF: the parent is gone
        os._exit(4)


def _memory(device: Any, setup_peak: int = 0, harness_bytes: int = 0) -> dict[str, Any]:
    """Peak memory of the variant: on GPU the larger of the setup peak and the run peak less the
    harness's own buffers (L2 flush); on CPU the child's peak RSS (includes the interpreter and torch)."""
    import resource

    import torch

    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux
    if device.type == "cuda":
        run_peak = torch.cuda.max_memory_allocated(device) - harness_bytes
        return {
            "device": str(device),
            "peak_mb": max(setup_peak, run_peak) / 2**20,
            "allocated_mb": (torch.cuda.memory_allocated(device) - harness_bytes) / 2**20,
            "reserved_mb": torch.cuda.max_memory_reserved(device) / 2**20,
            "rss_peak_mb": rss_mb,
            "harness_mb": harness_bytes / 2**20,
        }
    return {"device": str(device), "peak_mb": rss_mb, "rss_peak_mb": rss_mb}


def _profile_job(job: dict[str, Any], obj: Any, config: Any, device: Any) -> None:
    """Job mode "profile": warm up, then the profiled calls inside the NVTX range ``perflab_timed``
    (the outermost range there, for ncu's filter): under torch.profiler here, or plainly when ncu or
    nsys wraps this process. Nothing is timed."""
    from bench.context import set_context
    from bench.markers import TIMED_RANGE, nvtx_range, per_call
    from bench.profiling import PROFILE_CALLS, capture_torch

    fn = per_call(obj.benchmark_fn)
    with _Stage("warmup"):
        for _ in range(max(config.warmup, 1)):  # compile/autotune before the profiled calls
            fn()
        _sync(device)
    with _Stage("profiling", mark=False):
        if job.get("profile_tool", "torch") == "torch":
            send("profile", **capture_torch(fn, device, os.path.join(job["workdir"], "out"), PROFILE_CALLS))
        else:
            with nvtx_range(TIMED_RANGE):
                for _ in range(PROFILE_CALLS):
                    fn()
                _sync(device)
            send("profile", tool=job.get("profile_tool"))
    with _Stage("teardown"):
        obj.teardown()
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


def main() -> None:
    """Cold path: a brand-new interpreter started by the parent (``--cold-start``)."""
    global _fd
    # A descriptor inherited from the parent, or a FIFO's path when a profiler wraps this process
    # (ncu/nsys need not pass descriptors through to the process they launch).
    channel = sys.argv[2]
    _fd = int(channel) if channel.isdigit() else os.open(channel, os.O_WRONLY)
    _finish(sys.argv[1])


def entry(job_path: str, fd: int) -> None:
    """Fast path: forked from the pre-warmed server (bench.server: torch, triton, numpy, the harness
    imported; CUDA never initialised there), which has already given this process what a fresh
    interpreter would get from the caller (environment, import path, working directory, own session,
    output to the log); ``fd`` is the message pipe."""
    global _fd
    # Triton decides interpreted-or-compiled when its own helpers (tl.sum, tl.zeros, ...) are defined,
    # at import. A server that imported it in the other mode cannot serve this variant: say so before
    # anything runs; the parent starts it cold instead. (Servers are keyed by mode: a safeguard.)
    if "triton" in sys.modules and _IMPORT_MODE != os.environ.get("TRITON_INTERPRET", ""):
        os._exit(TRITON_MODE_MISMATCH)
    _fd = fd
    _finish(job_path)


# The Triton mode this module was imported in (in the server: the server's mode).
_IMPORT_MODE = os.environ.get("TRITON_INTERPRET", "")
# Exit code of a forked child that cannot run in this server (EX_TEMPFAIL): the parent retries cold.
TRITON_MODE_MISMATCH = 75


if __name__ == "__main__":
    main()
