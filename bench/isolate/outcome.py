"""What the parent learns from a variant's child: its messages as they arrive (stages against their limits, data),
and the ``VariantResult`` they make once it has exited.

Nothing the child says is taken on trust: a stage that overruns its limit is a timeout whatever the child
says next; a child that dies mid-stage is a crash with the tail of its output; a message the harness sends
once that arrives twice, and a result that cannot stand (``bench.measure.judge``), make the variant
``invalid``.
"""

from __future__ import annotations

import signal
import statistics
import time
from pathlib import Path
from typing import Any

from bench.define.config import BenchmarkConfig, limit_field
from bench.define.result import (
    STAGES,
    BatchTiming,
    EnergyUse,
    ErrorInfo,
    Generation,
    Memory,
    OutputInfo,
    Produced,
    Profile,
    Quality,
    Recheck,
    StageRecord,
    Timing,
    VariantResult,
    VariantSpec,
    Work,
)
from bench.isolate.rendezvous import SERVER_LOST
from bench.measure.judge import apply_checks
from bench.measure.stats import summarize

_LOG_TAIL = 4000


class Watch:
    """State the parent keeps while one child runs."""

    def __init__(self, spec: VariantSpec, config: BenchmarkConfig, mode: str = "run") -> None:
        self.spec = spec
        self.mode = mode
        self.config = config
        self.stage = "startup"
        self.stage_t0 = time.monotonic()
        self.records: dict[str, StageRecord] = {}
        self.data: dict[str, Any] = {}
        self.error: ErrorInfo | None = None
        self.failed_stage: str | None = None
        self.done = False
        self.counts: dict[str, int] = {}  # data messages by kind: each is sent once by the harness
        self.gated_since: float | None = None  # the child waits at its gate (run_variant's ``gate``)
        self.ready_since: float | None = None  # set up, it waits to measure (run_variant's ``before_measure``)
        self.call_s = 0.0  # the call's time (its first call, then the measured median): stage limits scale with it
        self.kept: dict[str, Any] | None = None  # the child parked after its round (bench.isolate.kept): what it holds
        self.resumed = False  # a parked child's later round: no start-up, set-up or teardown of its own

    def in_first_call(self) -> bool:
        """The warm-up of a child's first round waits for its first call (a compile, a JIT): its own limit."""
        return self.stage == "warmup" and not self.resumed and "first_call" not in self.counts

    def limit(self) -> float:
        return self.config.stage_limit("first_call" if self.in_first_call() else self.stage, self.call_s)

    def timed_done(self) -> bool:
        """Every stage that calls benchmark_fn on the clock is over: the measurement, the batch and the
        recheck, as far as the config runs them (or the child is past them)."""
        timed = ["measurement"]
        timed += ["batch"] if self.config.measure_batch else []
        timed += ["energy"] if self.config.measure_energy else []
        timed += ["recheck"] if self.config.check_inputs else []
        return self.stage == "teardown" or all(name in self.records for name in timed)

    def handle(self, msg: dict[str, Any]) -> None:
        kind = str(msg.get("t"))
        now = time.monotonic()
        if kind == "stage":
            name = msg["name"]
            if msg["event"] == "start":
                if name != "startup":  # startup's clock runs from the spawn
                    self.stage, self.stage_t0 = name, now
            else:
                self.records[name] = StageRecord(
                    name=name, status="ok", duration_s=now - self.stage_t0, limit_s=self.limit()
                )
        elif kind == "config":
            self.config = BenchmarkConfig(**msg["config"])  # limits from get_config() apply from now on
        elif kind == "error":
            self.failed_stage = msg["stage"]
            self.error = ErrorInfo(kind=msg["kind"], message=msg["message"], traceback=msg.get("traceback"))
        elif kind == "done":
            self.done = True
        elif kind == "kept":  # its round is over, its set-up held for the next: this round's result stands
            self.done = True
            self.kept = msg
        elif kind == "gate":
            self.gated_since = now
        elif kind == "ready":
            self.ready_since = now
        else:
            self.data[kind] = msg
            self.counts[kind] = self.counts.get(kind, 0) + 1
            if kind == "first_call" and isinstance(msg.get("ms"), (int, float)):
                self.call_s = max(0.0, float(msg["ms"])) / 1e3  # an estimate (compile included) until the timing
            if kind == "timing" and msg.get("samples_ms"):
                self.call_s = max(0.0, statistics.median(msg["samples_ms"])) / 1e3


def _log_tail(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-_LOG_TAIL:].decode(errors="replace")


def build_result(
    watch: Watch, returncode: int | None, timed_out: bool, elapsed: float, log_path: Path
) -> VariantResult:
    """The variant's result from what its child said (``watch``) and how it ended; ``invalid`` when a finished
    run's numbers cannot stand (``bench.measure.judge``)."""
    status, limit_s = _ending(watch, returncode, timed_out, log_path)
    data = watch.data
    result = VariantResult(
        spec=watch.spec,
        status=status,  # type: ignore[arg-type]
        failed_stage=watch.failed_stage if status != "ok" else None,
        elapsed_s=elapsed,
        limit_s=limit_s,
        stages=_stage_records(watch, status, limit_s),
        error=watch.error,
        config=watch.config.model_dump(),
        device=data.get("device", {}).get("device"),
        manifest=data.get("device", {}).get("manifest", {}),
        skip_reason=data["skipped"]["reason"] if status == "skipped" else None,
        sizes=data.get("sizes", {}).get("sizes", {}),
    )
    _timings(result, data, watch.config)
    _data(result, data)
    if result.status == "ok":
        apply_checks(result, watch.counts)
    return result


def _ending(watch: Watch, returncode: int | None, timed_out: bool, log_path: Path) -> tuple[str, float | None]:
    """How the child ended: its status and, for a timeout, the limit it ran past; ``watch.error`` and
    ``watch.failed_stage`` say why when it is not ok."""
    status: str = "ok"
    limit_s: float | None = None
    if timed_out:
        status, watch.failed_stage, limit_s = "timeout", watch.stage, watch.limit()
        first = " in its first call (raise first_call_timeout_seconds or --timeout-multiplier for a longer compile)" \
            if watch.in_first_call() else f" (raise {limit_field(watch.stage)} or --timeout-multiplier)"  # fmt: skip
        watch.error = ErrorInfo(
            kind="timeout",
            message=f"stage {watch.stage!r} exceeded its limit of {limit_s:.1f}s{first}; process group killed",
            traceback=_log_tail(log_path) or None,
        )
    elif "tampered" in watch.data:
        status, watch.failed_stage = "invalid", watch.data["tampered"]["stage"]
        names = ", ".join(watch.data["tampered"]["names"])
        watch.error = ErrorInfo(kind="invalid", message=f"timer replaced: {names} changed since the harness bound it")
    elif "skipped" in watch.data:
        status = "skipped"
    elif watch.error is not None:
        # A benchmark that does not follow the protocol failed at its set-up: "invalid" is kept for a result
        # the timed calls did not produce (or cannot stand).
        status = "failed"
        watch.error.exit_code = returncode
        if watch.error.kind != "protocol":
            watch.error.traceback = (watch.error.traceback or "") + _tail_section(log_path)
    elif not watch.done or returncode != 0:
        status, watch.failed_stage = "failed", watch.stage
        how = (
            f"killed by signal {signal.Signals(-returncode).name}"
            if returncode and returncode < 0
            else "ended with its exit status unknown: the pre-warmed server that forked it died first"
            if returncode == SERVER_LOST
            else f"exited with code {returncode}"
        )
        watch.error = ErrorInfo(
            kind="crash",
            message=f"child {how} during stage {watch.stage!r}",
            traceback=_log_tail(log_path) or None,
            exit_code=returncode,
        )
    return status, limit_s


def _timings(result: VariantResult, data: dict[str, Any], cfg: BenchmarkConfig) -> None:
    """The cold and batch times (statistics derived here, from the raw samples) and the recheck's."""
    if "timing" in data:
        t = data["timing"]
        if t["samples_ms"]:
            result.timing = Timing(
                **{k: v for k, v in t.items() if k != "t" and not (k == "noise" and v == float("inf"))},
                stats=summarize(t["samples_ms"], cfg.percentiles),
            )
    if "threads" in data and result.timing is not None:  # the round's cap (bench.measure.cores)
        result.timing.notes.append(data["threads"]["note"])
    if "batch" in data and data["batch"]["samples_ms"]:
        b = data["batch"]
        result.batch = BatchTiming(
            **{k: v for k, v in b.items() if k in BatchTiming.model_fields and k != "stats"},
            stats=summarize(b["samples_ms"], cfg.percentiles),
        )
    if "energy" in data:
        result.energy = EnergyUse(**{k: v for k, v in data["energy"].items() if k in EnergyUse.model_fields})
    if "restore" in data or "fresh" in data:
        r, f = data.get("restore", {}), data.get("fresh", {})
        result.recheck = Recheck(
            mutated=r.get("mutated", []),
            restored_ms=r.get("time_ms"),
            reference_ms=r.get("reference_ms"),
            controlled=bool(r.get("controlled")),
            restored_times_ms=r.get("times_ms", []),
            reference_times_ms=r.get("reference_times_ms", []),
            restore_cut=bool(r.get("cut")),
            restored_same_output=r.get("same_output"),
            perturbed=f.get("perturbed"),
            output_changed=f.get("output_changed"),
            fresh=OutputInfo(path=f["path"], tensors=f["tensors"]) if f.get("path") else None,
        )


def _data(result: VariantResult, data: dict[str, Any]) -> None:
    """Everything else the child sent: clocks replaced, memory, work, profile, output, validation, CUDA start,
    token generation."""
    if "tampered" in data:
        result.tampered = list(data["tampered"]["names"])
    if "memory" in data:
        result.memory = Memory(**{k: v for k, v in data["memory"].items() if k != "t"})
    if "quality" in data:
        result.quality = Quality(**{k: v for k, v in data["quality"].items() if k != "t"})
    if "work" in data:
        result.work = Work(**{k: v for k, v in data["work"].items() if k != "t"})
    if "profile" in data and data["profile"].get("dir"):
        p = data["profile"]
        result.profile = Profile(dir=p["dir"], metrics=p.get("metrics", {}), top_ops=p.get("top_ops", []),
                                 split_s=p.get("split_s", {}))  # fmt: skip
    if "output" in data:
        o, p, again = data["output"], data.get("produced"), data.get("repeat", {})
        result.output = OutputInfo(
            path=o["path"], tensors=o["tensors"], timed_calls_wrote_output=o["timed_calls_wrote_output"],
            style=o.get("style"), returned=o.get("returned"),
            produced=Produced(**{k: v for k, v in p.items() if k != "t"}) if p else None,
            repeated=again.get("repeated"), repeat_max_abs_diff=again.get("max_abs_diff"),
        )  # fmt: skip
    if "validation" in data:
        result.validation = data["validation"]["message"]
    if "cuda_start" in data:
        result.cuda_start_s = data["cuda_start"]["start_s"]
    if "generation" in data:  # token-generating benchmarks (bench.measure.generation)
        result.generation = Generation(**{k: v for k, v in data["generation"].items() if k != "t"})


def _tail_section(log_path: Path) -> str:
    tail = _log_tail(log_path)
    return f"\n--- child output (tail) ---\n{tail}" if tail.strip() else ""


def _stage_records(watch: Watch, status: str, limit_s: float | None) -> list[StageRecord]:
    records = []
    skip = {"run": ("profiling",), "verify": ("warmup", "measurement", "check", "profiling")}
    for name in STAGES:
        if name in skip.get(watch.mode, ("measurement", "check")):  # profile children time nothing
            continue
        if (name == "teardown" and watch.kept is not None) or (name in ("startup", "setup") and watch.resumed):
            continue  # a parked child's: paid once, by its first round and its last
        if name == "energy" and not watch.config.measure_energy and name not in watch.records:
            continue  # a stage of its own only when asked for
        if name in watch.records:
            records.append(watch.records[name])
        elif name == watch.failed_stage:
            records.append(
                StageRecord(
                    name=name,
                    status="timeout" if status == "timeout" else "failed",
                    duration_s=time.monotonic() - watch.stage_t0,
                    limit_s=limit_s or watch.config.stage_limit(name),
                )
            )
        else:
            records.append(StageRecord(name=name, status="not_reached"))
    return records
