"""The timed stages of a variant's child, after its set-up: warmup → measurement → check → batch → energy →
recheck → teardown.

The clock (``bench.measure.clocks``, or the generation clock) does the timing; this module runs the stages
around it in the order that keeps each number honest: the benchmark's memory peak before the harness's own
buffers, outputs NaN-poisoned before the timed calls, the GPU's state (NVML) and the host's CPU time read
around the measurement, the clocks checked after set-up, measurement and batch (a replaced timer ends the
child as ``invalid``), the variant's memory taken before the check allocates.
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import dataclass
from typing import Any

from bench.define.config import host_clocked
from bench.define.context import set_context, synchronize
from bench.define.protocol import declared_work, keep_returned, output_style, outputs_of, returned_type
from bench.isolate.channel import PARKED_FILE, Stage, send
from bench.isolate.recheck import changed_inputs, restored_call
from bench.measure.repeat import looked, repeats

HOST_BUSY_SHARE = 0.25  # others' share of the host's CPU time that flags a measurement (2-core op: 16 ms, not 0.03)
KEPT_NOTE = "rounds after the first timed in round 0's child, parked between them: set-up once (round_children)"


@dataclass
class SetUp:
    """A variant set up in its child: what the timed stages need."""

    job: dict[str, Any]
    obj: Any  # the benchmark object
    config: Any  # its effective BenchmarkConfig
    device: Any  # torch.device
    gen: Any  # the generation clock of a token-generating benchmark (bench.measure.generation), else None
    inputs: dict[str, Any]  # tensors set up in setup() (bench.measure.guard.setup_tensors)
    prints: dict[str, Any]  # and their fingerprints
    setup_peak: int = 0  # CUDA max allocated after setup(), before the harness allocated anything


def parked_pids(job: dict[str, Any]) -> list[int]:
    """The pids of the children its example keeps parked between rounds (bench.isolate.kept): on the GPU, holding a
    context and memory, running nothing: not "other processes" sharing the measurement."""
    try:
        with open(os.path.join(os.path.dirname(job["workdir"]), PARKED_FILE)) as f:
            return [int(line) for line in f if line.strip().isdigit()]
    except OSError:
        return []


def check_timers(stage: str) -> None:
    """A benchmark that replaced a clock the harness times with ends here as invalid (bench.measure.guard)."""
    from bench.measure import guard

    replaced = guard.tampered()
    if replaced:
        send("tampered", stage=stage, names=replaced[:20])
        os._exit(0)


def run_timed(v: SetUp) -> None:
    """The timed stages; in a kept child (``keeps``), a timing-only round at each of the parent's orders while it is
    parked between rounds (bench.isolate.kept); then teardown and "done"."""
    import torch

    from bench.measure.memory import declared_metric
    from bench.measure.timer import clock_for
    from bench.profile.markers import per_call

    config, device = v.config, v.device
    metric = declared_metric(v.obj) if v.gen is None else "time"  # a bad value ends the child before warm-up
    clock = v.gen if v.gen is not None else clock_for(config, device)  # a generation is timed step by step
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    # A range per call only while an NVTX tool listens (never in a timed child): see bench.profile.markers.
    fn = keep_returned(v.obj, per_call(v.obj.benchmark_fn))  # a returned output is kept as the output
    _stages(v, clock, fn, metric)
    if keeps(v):
        while "round" in (order := _park(v)):
            later = _resumed(v, order)
            _stages(later, later.gen if later.gen is not None else clock, fn, metric)
    with Stage("teardown"):
        v.obj.teardown()
        set_context(None)
    send("done")


def keeps(v: SetUp) -> bool:
    """Whether this child stays for its pair's later rounds (the parent asked, ``round_children`` allows): one
    process on one device (a token-generating one too: each later round takes a clock of its own, ``_resumed``)."""
    c = v.config
    one_process = c.world_size == 1 and c.gpus <= 1
    return bool(v.job.get("keep")) and one_process and c.round_children != "fresh"


def _park(v: SetUp) -> dict[str, Any]:
    """Parked between rounds with its set-up held: say so, with the device memory it holds (the parent keeps
    parked children within half the device's), and wait for the parent's order."""
    from bench.isolate.channel import command

    held: dict[str, Any] = {}
    if v.device.type == "cuda":
        import torch

        _, total = torch.cuda.mem_get_info(v.device)
        held = {"reserved_mb": torch.cuda.memory_reserved(v.device) / 2**20, "total_mb": total / 2**20}
    send("kept", **held)
    return command()


def _resumed(v: SetUp, order: dict[str, Any]) -> SetUp:
    """The set-up as a later round times it: TIMING_ONLY on its config, the batch only where the order says a
    speedup of the example is on it; held before its warm-up where round 0's was (a host-clocked one waits to
    measure alone). A token-generating one gets a new generation clock on the same set-up: the previous round's
    holds that round's measured generations and the poison they left (its ``result()`` and ``wrote_output()``),
    so this round reports its own generations only, as a fresh child of the round would; the request set and a
    greedy_tokens output's offsets are read and checked again. Its warm-up is its first call alone (a fresh child's:
    ``warmup`` - 1 generations more; ``min_warmup_seconds`` still applies, from that call's start): round 0 of this
    process paid every one-time cost (allocator, cuBLAS heuristics, graph capture), parking changes only the GPU's
    idle time, and the round's first call, a whole generation, untimed and recorded as ``first_call_ms``, brings
    the clocks back (``GenerationClock.again``)."""
    from dataclasses import replace

    from bench.define.config import TIMING_ONLY
    from bench.isolate.channel import wait_for
    from bench.measure.generation_clock import generation_clock

    gate = v.job.get("measure_gate")
    if gate and (gate != "host_bound" or host_clocked(v.config, str(v.device))):
        send("ready")
        wait_for(b"m")
    config = v.config.model_copy(update={**TIMING_ONLY, "measure_batch": v.config.measure_batch and order["batch"]})
    gen = generation_clock(v.obj, config, v.device, again=True) if v.gen is not None else None
    return replace(v, config=config, gen=gen, job={**v.job, "timing_only": True, "resumed": order["round"]})


def _stages(v: SetUp, clock: Any, fn: Any, metric: str) -> None:
    """Warm-up, measurement, check, batch, energy, recheck: as the config and the job (a later round's
    ``timing_only``) ask."""
    from bench.isolate.ranks import any_rank
    from bench.measure.clocks import batch_rule, warmup_count
    from bench.measure.memory import MEMORY_METRICS

    config, device = v.config, v.device
    with Stage("warmup"):
        first = clock.first_call(fn)  # compile/JIT/autotune included, recorded apart (INTEGRITY #8)
        send("first_call", ms=first)  # the parent's limits of the warm-up and measurement scale with it
        # The count yields to the steady-state rule by default; the generation clock has none: its count stands (none
        # after the first call in a kept child's later round). A later round: back to the steady state round 0 reached
        # (a kept child's clock holds it; a fresh child's job carries it, bench.isolate.rounds), within one window.
        if v.job.get("steady_ms") and getattr(clock, "steady", False) is None:
            clock.steady = v.job["steady_ms"]
        again = getattr(clock, "steady", None) is not None
        clock.warmup(fn, warmup_count(config, first, again) if v.gen is None else clock.warmup_count(config))
        if hasattr(clock, "check_capture"):
            clock.check_capture(lambda: outputs_of(v.obj))
    m, poisoned, cold_s = _measure(v, clock, fn, first)
    if v.gen is not None:  # token generation: TTFT, TPOT, throughput of the measured generations
        send("generation", **v.gen.result())
    # The variant's memory, taken before the check: the harness's own NaN check below allocates (a bool
    # per output element: 16 MiB more for a 64 MiB fp32 output) and is not the variant's.
    overhead = getattr(clock, "overhead_bytes", 0)
    tracked = config.enable_memory_tracking or metric in MEMORY_METRICS
    memory = _memory(device, v.setup_peak, overhead) if tracked else None
    timed_sample, mutated = None, {}
    if not v.job.get("timing_only"):  # a later round of a pair (bench.isolate.rounds): its first round checked
        with Stage("check"):
            timed_sample, mutated = _checks(v, fn, m, poisoned, memory, metric, overhead)
    elif memory is not None and metric in MEMORY_METRICS:  # a memory pair's later round: its readings again
        with Stage("check"):
            _send_memory(v, fn, memory, metric, overhead)
    batch = None
    if config.measure_batch:
        with Stage("batch"):
            batch = clock.measure_batch(fn, statistics.median(m.samples_ms), batch_rule(cold_s))
            if batch is not None:
                send("batch", **{k: val for k, val in vars(batch).items()}, invalid=clock.invalid)
        check_timers("batch")
    if config.measure_energy:
        with Stage("energy"):
            batch_ms = statistics.median(batch.samples_ms) if batch else None
            send("energy", **_energy(v, clock, fn, batch_ms, statistics.median(m.samples_ms)))
        check_timers("energy")
    if config.check_inputs:
        with Stage("recheck"):
            inputs = v.inputs
            # set up again (on every rank, if any saw a change): the tensors to change next are the new set-up's
            if any_rank(bool(mutated), config.world_size):
                inputs = restored_call(
                    v.obj, config, clock, fn, timed_sample, mutated, statistics.median(m.samples_ms) / 1e3
                )
            changed_inputs(v.obj, inputs, fn, device, v.job, config.world_size)


def _checks(v: SetUp, fn: Any, m: Any, poisoned: bool, memory: dict[str, Any] | None, metric: str,
            overhead: int) -> tuple[Any, dict[str, Any]]:  # fmt: skip
    """The check stage: the outputs and the rest (``_check``), a memory or quality pair's readings, and that the
    output is the call's (bench.isolate.produced; not for a generation)."""
    from bench.isolate.ranks import any_rank, produced_merged
    from bench.measure.quality import QUALITY_METRICS, readings

    timed_sample, mutated = _check(v, poisoned)
    if memory is not None:
        _send_memory(v, fn, memory, metric, overhead)
    # what the timed calls produced, scored by the benchmark (bench.measure.quality): a quality verdict's readings,
    # or a lossy pair's (verify="quality")
    scored = metric if metric in QUALITY_METRICS else "quality" if v.config.verify == "quality" else None
    if scored is not None:
        send("quality", metric=scored, readings=readings(v.obj, scored), verdict=metric in QUALITY_METRICS)
    world = v.config.world_size
    if v.gen is None and any_rank(timed_sample is not None, world):  # every rank makes the look's call, or none
        from bench.isolate.produced import check_produced

        median_ms = statistics.median(m.samples_ms)
        budget_s = 0.5 * v.config.stage_limit("check", median_ms / 1e3)  # the rest: the settle call, the outputs
        found = check_produced(v.obj, fn, v.device, median_ms, v.inputs, budget_s, ranks=world > 1)
        send("produced", **produced_merged(found, world))
    if timed_sample is not None and looked(v.config, statistics.median(m.samples_ms), bool(mutated), v.gen):
        send("repeat", **_repeat(v, fn, timed_sample))
    return timed_sample, mutated


def _repeat(v: SetUp, fn: Any, timed_sample: Any) -> dict[str, Any]:
    """One call more on the same inputs, after the check's looks and timed by none: whether its output is the timed
    calls' (``timed_sample``) again, as the pair's outputs are compared (bench.measure.repeat)."""
    from bench.measure import guard, outputs

    fn()
    synchronize(v.device)
    after = outputs_of(v.obj)
    if after is None:
        return {"repeated": False, "max_abs_diff": None}
    repeated, diff = repeats(timed_sample, guard.subsample(outputs.whole(after)), v.config.rtol, v.config.verify)
    return {"repeated": repeated, "max_abs_diff": diff if diff is not None and math.isfinite(diff) else None}


def _measure(v: SetUp, clock: Any, fn: Any, first: float) -> tuple[Any, bool, float]:
    """The measurement stage: outputs poisoned, the GPU's state, the host's CPU time and speed read around the
    clock's samples; then the timing message. Returns the measurement, whether outputs were poisoned, and the
    clock's seconds."""
    from bench.measure import cores, guard, hostspeed, outputs
    from bench.measure.machine import gpu_uuid, snapshot
    from bench.measure.stopping import rule_for

    config, device = v.config, v.device
    poisoned = False
    with Stage("measurement"):
        if config.poison_outputs:
            # INTEGRITY #6: outputs the timed calls do not rewrite keep the NaN and fail the check.
            for t in outputs_of(v.obj) or []:
                if t.is_floating_point() or t.is_complex():
                    with outputs.writable(t):
                        outputs.local(t).fill_(float("nan"))  # a DTensor: this rank's shard
                    poisoned = True
            synchronize(device)
        uuid = gpu_uuid(device) if device.type == "cuda" else None
        parked = parked_pids(v.job) if device.type == "cuda" else ()
        before = snapshot(device.index or 0, uuid, parked) if device.type == "cuda" else {}
        own = getattr(clock, "cpu_s", cores.process_cpu_s)  # a variant's ranks: all of their processes
        ref0, host_before, own_before = hostspeed.reference_ms(), cores.cpu_times(), own()  # the host's CPU speed
        t0 = guard.BOUND.perf_counter()
        m = clock.measure(fn, config.iterations, rule_for(config))
        cold_s = guard.BOUND.perf_counter() - t0
        host_after, own_after, ref1 = cores.cpu_times(), own(), hostspeed.reference_ms()
        after = snapshot(device.index or 0, uuid, parked) if device.type == "cuda" else {}
    check_timers("measurement")
    busy = None
    if host_before and host_after:
        busy = cores.host_busy_share(host_before, host_after, own_after - own_before)
    _send_timing(v, clock, m, first, before, after, busy, [ref0, ref1])
    return m, poisoned, cold_s


def _send_timing(v: SetUp, clock: Any, m: Any, first: float, before: dict[str, Any], after: dict[str, Any],
                 busy: float | None, ref: list[float]) -> None:  # fmt: skip
    from bench.measure.clocks import drift_note
    from bench.measure.machine import flags

    machine_flags = flags(before, after) if v.device.type == "cuda" else []
    if busy is not None and busy > HOST_BUSY_SHARE:
        machine_flags.append(
            f"host busy: other processes used {100 * busy:.0f} % of the host's CPU time during the measurement"
        )
    notes = clock.notes + m.notes + [n for n in [drift_note(m.samples_ms), v.job.get("resumed") and KEPT_NOTE] if n]
    threads = None
    if host_clocked(v.config, str(v.device)):  # its intra-op threads are part of what was timed
        import torch

        threads = [torch.get_num_threads()]
    send(
        "timing", mode=clock.mode, requested_mode=v.config.timing_mode, fallback=clock.fallback,
        method=clock.method, samples_ms=m.samples_ms, first_call_ms=first, warmup_calls=1 + clock.warmup_done,
        warmup_stable=clock.stable, warmup_steady_ms=getattr(clock, "steady", None), l2_flushed=clock.l2_flushed,
        notes=notes, invalid=clock.invalid,
        stop_reason=m.stop_reason, noise=m.noise, noise_target=m.noise_target, target_met=m.target_met,
        machine_before=before, machine_after=after, machine_flags=machine_flags,
        rank_samples_ms=getattr(clock, "rank_samples_ms", None), threads=threads, host_ref_ms=[ref],
        host_ref_during_ms=getattr(clock, "host_refs_ms", None) or None,
    )  # fmt: skip


def _energy(v: SetUp, clock: Any, fn: Any, batch_ms: float | None, call_ms: float) -> dict[str, Any]:
    """The energy stage: the board's energy per call over a window of the batch's unit run back to back (eager
    calls where there is none), or why it cannot be measured here."""
    from bench.measure.energy import EnergyCounter, Unavailable, measure_energy
    from bench.measure.machine import gpu_uuid

    if v.device.type != "cuda":
        return {"unavailable": "energy is read from a GPU's energy counter (NVML); this variant ran on the CPU"}
    if v.config.world_size > 1 or v.config.gpus > 1:
        gpus = max(v.config.world_size, v.config.gpus)
        return {"unavailable": f"energy is measured for one-GPU variants; this one ran on {gpus} GPUs"}
    work, calls, how = getattr(clock, "batch_unit", None) or (fn, 1, "eager calls")
    try:
        counter = EnergyCounter(v.device.index or 0, gpu_uuid(v.device))
        return vars(measure_energy(work, calls, how, counter, v.config.energy_seconds, batch_ms, call_ms))
    except Unavailable as exc:
        return {"unavailable": str(exc)}


def _send_memory(v: SetUp, fn: Any, memory: dict[str, Any], metric: str, overhead: int) -> None:
    """The variant's memory with a memory pair's readings; several ranks: rank 0 sends the max over every rank's."""
    from bench.isolate.ranks import memory_merged

    send("memory", **memory_merged({**memory, **_memory_verdict(v, fn, metric, overhead)}, v.config.world_size))


def _memory_verdict(v: SetUp, fn: Any, metric: str, harness_bytes: int) -> dict[str, Any]:
    """A memory pair's readings (bench.measure.memory), taken after the check saved the timed calls' output: one
    peak per call on a GPU, each rank its own (the ranks call together; rank 0 reports their max); none on a CPU,
    nor for one process on several GPUs (the peak read is one device's)."""
    from bench.measure.memory import MEMORY_METRICS, call_peaks

    if metric not in MEMORY_METRICS:
        return {}
    if v.device.type != "cuda" or v.config.gpus > 1:
        return {"metric": metric}
    return {"metric": metric, "call_peaks_mb": call_peaks(fn, v.device, metric, harness_bytes)}


def _check(v: SetUp, poisoned: bool) -> tuple[Any, dict[str, Any]]:
    """The check stage: the outputs saved for the comparison (and whether the timed calls overwrote the
    poison), ``validate_result()``, the declared work; a sample of the timed calls' output and the
    set-up tensors they changed, for the recheck."""

    from bench.isolate.ranks import gathered
    from bench.measure import guard, outputs

    tensors = outputs_of(v.obj)
    tensors = outputs.whole(tensors) if tensors is not None else None  # a DTensor as the tensor it stands for
    timed_sample = guard.subsample(tensors) if tensors is not None else None
    wrote = None
    if tensors is not None and poisoned:  # on the tensors' own device: one reduction on the GPU, not a host copy
        wrote = not any(guard.has_nan(t) for t in tensors if t.is_floating_point() or t.is_complex())
    if tensors is not None and v.gen is not None:  # the generation clock poisoned the outputs before each one
        wrote = v.gen.wrote_output()
    validate = getattr(v.obj, "validate_result", None)
    message = validate() if callable(validate) else None
    tensors, wrote, message = gathered(tensors, wrote, message, v.config.world_size)  # several ranks: rank 0 has all
    output: dict[str, Any] = {"path": None, "tensors": [], "timed_calls_wrote_output": wrote,
                              "style": output_style(v.obj)}  # fmt: skip
    if tensors is not None and v.job.get("rank", 0) == 0:  # another rank's are in rank 0's (gathered)
        path = os.path.join(v.job["workdir"], "outputs")
        output["tensors"] = outputs.save(tensors, path)
        output["path"] = path
    elif tensors is None:
        output["returned"] = returned_type(v.obj)
    send("output", **output)
    send("validation", message=message)
    get_work = getattr(v.obj, "get_work", None)
    work = get_work() if callable(get_work) else None
    if work is not None:
        send("work", **declared_work(work))
    mutated = {k: v.inputs[k] for k in guard.changed(v.prints, guard.fingerprints(v.inputs))}
    return timed_sample, mutated


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
