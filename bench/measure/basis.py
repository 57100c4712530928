"""What a pair's speedup compares: the metric's name for a reader, the MLflow metric holding each side's value.

A speedup is baseline / optimized on a time: the median call (``cold``: one call per sample; ``batch``: back-to-back
calls), or a token-generating pair's TTFT, TPOT or inter-token latency (their median, or ``_p90`` / ``_p95`` /
``_p99``); or optimized / baseline on a rate (``throughput``: tokens per second); or baseline / optimized on a
peak of memory (``peak_memory``, ``peak_reserved``: bench.measure.memory, in MiB); or on a score the benchmark
reports (``quality``: optimized / baseline, higher is better; ``error``: baseline / optimized; bench.measure.quality).
Every table that prints a speedup names its basis with ``label`` and shows the two values it divides, beside the
median call time.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Basis", "basis"]

# Latency metrics of a token-generating pair, as their labels read.
_NAMES = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL"}


@dataclass(frozen=True)
class Basis:
    label: str  # for a reader: "call", "batch", "TTFT", "TPOT p99", "tokens/s"
    metric: str  # the MLflow metric of each side's run holding the value: time_median_ms, ttft_p99_ms, tokens_per_s
    rate: bool = False  # a rate (tokens/s, higher is better); else a time in ms, or an amount in ``unit``
    unit: str = "ms"  # the values' unit: ms, tokens/s, MiB; "" for a score the benchmark defines

    @property
    def is_call(self) -> bool:
        """The speedup is on the median call time itself (cold): the table's medians are its values."""
        return self.metric == "time_median_ms"


def basis(metric: str | None = "time", speedup_time: str | None = "cold") -> Basis:
    """The basis of a speedup on ``metric`` (``Comparison.speedup_metric``: time, ttft, tpot_p99, throughput, ...)
    whose time is ``speedup_time`` (cold or batch, for ``time``); a run logged before either was recorded: time,
    cold."""
    metric = metric or "time"
    if metric == "time":
        if speedup_time == "batch":
            return Basis("batch", "batch_time_median_ms")
        return Basis("call", "time_median_ms")
    if metric == "throughput":
        return Basis("tokens/s", "tokens_per_s", rate=True, unit="tokens/s")
    if metric in ("peak_memory", "peak_reserved"):  # a memory pair's verdict: the median of its call peaks
        return Basis(metric.replace("_", " "), "mem_call_peak_mb", unit="MiB")
    if metric == "quality":  # a quality pair's verdict (bench.measure.quality): the mean reading, higher is better
        return Basis("quality", "quality_mean", rate=True, unit="")
    if metric == "error":  # lower is better
        return Basis("error", "quality_mean", unit="")
    name, _, q = metric.partition("_")
    if name not in _NAMES:
        raise ValueError(
            f"speedup metric {metric!r}: expected time, throughput, peak_memory, peak_reserved, quality, error or "
            "ttft/tpot/itl[_p90|_p95|_p99]"
        )
    return Basis(f"{_NAMES[name]} {q}" if q else _NAMES[name], f"{name}_{q or 'median'}_ms")
