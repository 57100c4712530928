"""Sweep a case over shapes: check each provider, time the ones that pass, write CSVs and plots.

Timing goes through the harness's clock (``bench.measure.time_callable``) and the config's stop rule;
nothing here times itself. ``fwd`` times one forward call; ``bwd`` times ``torch.autograd.grad`` of
a forward recorded once (graph retained), i.e. the backward kernels alone. Before any timing, each
provider is checked against the reference at the check shapes (on GPU: the issue's three configurations
and an awkward one); one that fails is reported and not timed. With a profile directory, each timed
call is then profiled apart from its timing (bench.profile.tools.capture_torch: a gzip-compressed Chrome
trace, the top kernels, kernels per call).

Bandwidth: each row also carries the case's minimum bytes per call (``Case.bytes_per_call``), so a
provider's median gives achieved GB/s, and, where ``perflab peak`` has cached this device's copy
bandwidth (bench.measure.ceilings), a percentage of it. ``bandwidth_target`` judges the issue's target on those:
triton's forward RMSNorm and fused add + RMSNorm at ≥ 64 MB of activations reach ≥ 80 % of the copy
bandwidth.
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
import re
import textwrap
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch._dynamo
import torch._functorch.config  # noqa: F401  (the donated_buffer switch below)

from bench import BenchmarkConfig
from bench.measure import ceilings as peaks
from bench.measure import time_callable
from bench.profile import capture_torch
from bench.record import RATE_UNITS, column, time_text
from kernels.case import DTYPES, PROVIDERS, Case, Shape, build, mark_rows_dynamic
from kernels.check import check

__all__ = ["CHECK_SHAPES", "CSV_COLUMNS", "GPU_SHAPES", "SMOKE_SHAPES", "BandwidthTarget", "Row", "bandwidth_target",
           "copy_ceiling", "csv_text", "geomean", "plot_png", "sweep_case", "sweep_shapes"]  # fmt: skip

# The sweep: batch 1/2/4/8 x seq 1024..8192 x hidden 2048/4096 (GPU sizes).
GPU_SHAPES = [Shape(b, s, h) for h in (2048, 4096) for b in (1, 2, 4, 8) for s in (1024, 2048, 4096, 8192)]
# CPU / Triton interpreter: tiny and awkward (hidden not a power of two).
SMOKE_SHAPES = [Shape(2, 3, 37), Shape(1, 5, 64)]
# Correctness before timing at GPU size: the three configurations, then an awkward shape
# (hidden not a power of two, an odd row count).
CHECK_SHAPES = [Shape(2, 128, 4096), Shape(8, 4096, 1280), Shape(1, 32768, 1280), Shape(3, 77, 1000)]
# The columns, first and unchanged; the bandwidth columns follow them.
CSV_COLUMNS = ["dim", "batch_size", "seq_len", *(f"{p}_us" for p in PROVIDERS), "speedup_vs_naive",
               "speedup_vs_compiled"]  # fmt: skip
BANDWIDTH_COLUMNS = ["bytes_per_call", "activation_bytes", *(f"{p}_gbps" for p in PROVIDERS),
                     *(f"{p}_pct_of_copy" for p in PROVIDERS), "copy_gbps"]  # fmt: skip
# The issue's bandwidth target: these cases' forward, at shapes with at least this many bytes of activations
# (Case.activation_bytes; 64 MB, which on the sweep's power-of-two sizes is 64 MiB), reach this share of the
# measured copy bandwidth.
TARGET_CASES = ("rms", "add_rms")
TARGET_MIN_ACTIVATION_BYTES = 64_000_000
TARGET_PCT_OF_COPY = 80.0
_COMPILED = ("compiled", "compiled_triton")


@dataclass
class Row:
    """One shape of one case/dtype/direction: median µs per provider that ran, reasons for those that did not."""

    shape: Shape
    us: dict[str, float] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # provider -> why (compile failed, check failed)
    kernels: dict[str, float | None] = field(default_factory=dict)  # provider -> GPU kernels per call (--profile)
    bytes: int | None = None  # the case's minimum bytes read + written per call (Case.bytes_per_call)
    activation_bytes: int | None = None  # the forward's activations (Case.activation_bytes)
    copy_gbps: float | None = None  # this device's measured copy bandwidth (copy_ceiling); None: none cached

    def speedup(self, against: str, provider: str = "triton") -> float | None:
        if against in self.us and provider in self.us and self.us[provider] > 0:
            return self.us[against] / self.us[provider]
        return None

    def gbps(self, provider: str) -> float | None:
        """Achieved GB/s: the minimum bytes per call over the median time (None: not timed, or no bytes)."""
        us = self.us.get(provider)
        return self.bytes / (us * 1e3) if self.bytes and us and us > 0 else None

    def pct_of_copy(self, provider: str) -> float | None:
        """Achieved GB/s as a percentage of the measured copy bandwidth (None: not timed, or none cached)."""
        gbps = self.gbps(provider)
        return 100.0 * gbps / self.copy_gbps if gbps is not None and self.copy_gbps else None


def sweep_shapes(case: Case, max_shapes: int | None = None) -> list[Shape]:
    """The case's GPU sweep (its own, else GPU_SHAPES); ``max_shapes`` keeps that many spread evenly over
    the sizes, smallest and largest included, in sweep order (a quick run)."""
    shapes = list(case.sweep_shapes) or GPU_SHAPES
    if max_shapes is None or max_shapes >= len(shapes):
        return shapes
    if max_shapes < 1:
        raise ValueError(f"max_shapes={max_shapes} keeps no shape; pass at least 1")
    by_size = sorted(shapes, key=lambda s: s.rows * s.hidden)
    step = (len(by_size) - 1) / max(max_shapes - 1, 1)
    keep = {by_size[round(i * step)] for i in range(max_shapes)} if max_shapes > 1 else {by_size[-1]}
    return [s for s in shapes if s in keep]


def copy_ceiling(device: torch.device, path: Path | None = None) -> tuple[str, float | None]:
    """(hardware key, copy bandwidth in GB/s counting bytes read + written) for ``device``: the ceiling
    ``perflab peak`` cached for this hardware (bench.measure.ceilings: the GPU's name, else this host's CPU key), or
    None when it has not been measured here."""
    key = torch.cuda.get_device_name(device) if device.type == "cuda" else peaks.cpu_key()
    ceilings = peaks.lookup(key, path) or {}
    copy = ceilings.get("copy_gbps")
    return key, float(copy) if copy else None


def geomean(xs: Iterable[float | None]) -> float | None:
    vals = [x for x in xs if x is not None and x > 0]
    return math.exp(sum(math.log(x) for x in vals) / len(vals)) if vals else None


def _timed_call(case: Case, module: torch.nn.Module, inputs: Sequence[torch.Tensor], direction: str,
                gen: torch.Generator) -> Callable[[], object]:  # fmt: skip
    if direction == "fwd":

        def fwd() -> object:
            with torch.no_grad():
                return case.forward(module, inputs)

        return fwd
    outs = case.forward(module, inputs)
    upstream = [torch.randn(o.shape, generator=gen).to(o.device, o.dtype) for o in outs]
    wanted = case.needs_grad(module, inputs)
    return lambda: torch.autograd.grad(outs, wanted, upstream, retain_graph=True, allow_unused=True)


def time_fn(fn: Callable[[], object], config: BenchmarkConfig, device: torch.device) -> float:
    """Median µs of ``fn`` through the harness clock (bench.measure.time_callable): first call, warm-up, then
    the stop rule."""
    return time_callable(fn, config, device).median_ms * 1e3


def sweep_case(
    case: Case, dtype_name: str, shapes: Sequence[Shape], config: BenchmarkConfig, device: torch.device,
    providers: Sequence[str] = PROVIDERS, check_shapes: Sequence[Shape] | None = None,
    log: Callable[[str], None] = print, profile_dir: Path | None = None, copy_gbps: float | None = None,
    done: Callable[[str], None] | None = None,
) -> dict[str, list[Row]]:  # fmt: skip
    """{direction: rows}. Each provider is checked first, forward and backward, at every ``check_shapes``
    (default: the first shape); one that fails a check, or whose compilation fails, is skipped with the
    reason. ``profile_dir``: also a torch.profiler trace per provider, shape and direction (after timing,
    never inside it). ``copy_gbps``: the device's measured copy bandwidth (``copy_ceiling``), which the
    rows' percentages are of; None: GB/s only. ``done``: told each timed shape and direction's line (a
    step of the command's progress), instead of ``log``."""
    dtype = DTYPES[dtype_name]
    out: dict[str, list[Row]] = {"fwd": [], "bwd": []}
    torch._dynamo.reset()  # graphs of another case or dtype never count against this one's recompile limit
    with _compile_settings():
        reasons: dict[str, str] = {}
        for p in providers:
            why = None if p == "naive" else _check(case, p, dtype_name, check_shapes or shapes[:1], config, device, log)
            if why:
                reasons[p] = why
        _time_shapes(case, dtype, dtype_name, shapes, config, device, providers, reasons, out, log, profile_dir,
                     copy_gbps, done)  # fmt: skip
    return out


@contextlib.contextmanager
def _compile_settings() -> Iterator[None]:
    """How the compiled providers compile during a sweep.

    * Rows dynamic, hidden static (``mark_rows_dynamic`` on the inputs), automatic dynamic shapes off: a
      graph per hidden, dtype and grad mode, not per shape; left to itself dynamo recompiles at every new
      shape and grad mode (fwd is timed under no_grad) and passes its limit of 8 within a few shapes.
    * A recompile limit high enough for a sweep, and an error rather than dynamo's silent fall back to
      eager when it is hit anyway: an eager time must never be reported as ``compiled``.
    * No donated buffers: bwd replays one recorded graph (retain_graph=True), which donation forbids (it
      saves memory, not time, in the timed backward). Checks compile under the same settings, since
      their graphs are reused by the timed calls.
    """
    dynamo = {"automatic_dynamic_shapes": False, "recompile_limit": 64, "cache_size_limit": 64,
              "fail_on_recompile_limit_hit": True}  # fmt: skip
    known = {k: v for k, v in dynamo.items() if hasattr(torch._dynamo.config, k)}  # names vary across torch versions
    with torch._dynamo.config.patch(**known), torch._functorch.config.patch(donated_buffer=False):
        yield


def _check(case: Case, provider: str, dtype_name: str, shapes: Sequence[Shape], config: BenchmarkConfig,
           device: torch.device, log: Callable[[str], None]) -> str | None:  # fmt: skip
    """Why ``provider`` must not be timed (the first shape it fails at), or None."""
    for shape in shapes:
        try:
            res = check(case, provider, shape, DTYPES[dtype_name], device, seed=config.seed)
        except Exception as exc:  # torch.compile without a compiler, a kernel that does not compose
            kind = "compile failed" if provider in _COMPILED else "raised"
            why = clip(f"{kind} at {shape}: {type(exc).__name__}: {first_line(exc)}")
        else:
            why = None if res.ok else f"check failed at {shape}: " + "; ".join(res.problems)
        log(f"check {case.name}/{provider} {dtype_name} {shape}: {why or 'ok'}")
        if why:
            return why
    return None


def _time_shapes(case: Case, dtype: torch.dtype, dtype_name: str, shapes: Sequence[Shape], config: BenchmarkConfig,
                 device: torch.device, providers: Sequence[str], reasons: dict[str, str],
                 out: dict[str, list[Row]], log: Callable[[str], None], profile_dir: Path | None,
                 copy_gbps: float | None, done: Callable[[str], None] | None = None) -> None:  # fmt: skip
    for shape in shapes:
        gen = torch.Generator().manual_seed(config.seed)
        reference = case.reference(shape.hidden, dtype, device, gen)
        inputs = case.make_inputs(shape, dtype, device, gen)
        mark_rows_dynamic(inputs)
        for direction in ("fwd", "bwd"):
            row = Row(shape, skipped=dict(reasons), bytes=case.bytes_per_call(shape, dtype, direction),
                      activation_bytes=case.activation_bytes(shape, dtype), copy_gbps=copy_gbps)  # fmt: skip
            for p in providers:
                if p in reasons:
                    continue
                try:
                    fn = _timed_call(case, build(case, p, reference), inputs, direction, gen)
                    row.us[p] = time_fn(fn, config, device)
                    if profile_dir is not None:
                        trace = profile_dir / f"{case.name}-{dtype_name}-{direction}" / f"{p}-{shape}"
                        row.kernels[p] = capture_torch(fn, device, str(trace))["metrics"].get("prof_kernel_count")
                except Exception as exc:
                    row.skipped[p] = clip(f"timing raised {type(exc).__name__}: {first_line(exc)}")
            out[direction].append(row)
            (done or log)(row_line(row, f"{case.name} {dtype_name} {direction}"))


def row_line(row: Row, what: str) -> str:
    """``rms bf16 fwd 2x3x37: naive 17.4 µs 91.8 MB/s, …``: each provider's median and achieved rate, the rates
    in one unit chosen from them (a CPU's are MB/s, not "0.0 GB/s"), % of copy when a ceiling is cached."""
    rate = column((row.gbps(p) for p in row.us), RATE_UNITS)
    parts = []
    for p, us in row.us.items():
        pct = row.pct_of_copy(p)
        parts.append(f"{p} {time_text(us / 1e3)} {rate.text(row.gbps(p))} {rate.name}"
                     + ("" if pct is None else f" ({pct:.1f} % of copy)"))  # fmt: skip
    return f"{what} {row.shape}: " + ", ".join(parts)


def first_line(exc: BaseException) -> str:
    """An exception's first line; one wrapping another's repr holds its line breaks as the two characters
    backslash and n (dynamo's "TorchRuntimeError('RuntimeError when making fake tensor call\\n  Explanation:")."""
    return re.split(r"\n|\\n", str(exc), maxsplit=1)[0]


def clip(text: str, width: int = 300) -> str:
    """``text`` on one line, cut at a word (never mid-word) with " …" when longer than ``width``."""
    return textwrap.shorten(text, width, placeholder=" …")


def _fmt(x: float | None, spec: str, missing: str = "—") -> str:
    return missing if x is None else format(x, spec)


def csv_text(rows: Sequence[Row]) -> str:
    """The issue's columns (dim, batch_size, seq_len, one µs column per provider, speedups of triton), then
    the bandwidth ones (BANDWIDTH_COLUMNS: the minimum bytes per call, the activations' bytes, GB/s and %
    of the copy bandwidth per provider, that bandwidth). Empty: not run, or no copy bandwidth cached;
    never 0."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS + BANDWIDTH_COLUMNS)

    def fmt(x: float | None, spec: str) -> str:
        return _fmt(x, spec, missing="")

    for r in rows:
        writer.writerow([r.shape.hidden, r.shape.batch, r.shape.seq_len,
                         *(fmt(r.us.get(p), ".3f") for p in PROVIDERS),
                         fmt(r.speedup("naive"), ".4f"), fmt(r.speedup("compiled"), ".4f"),
                         fmt(r.bytes, "d"), fmt(r.activation_bytes, "d"),
                         *(fmt(r.gbps(p), ".6g") for p in PROVIDERS),
                         *(fmt(r.pct_of_copy(p), ".6g") for p in PROVIDERS),
                         fmt(r.copy_gbps, ".1f")])  # fmt: skip
    return buf.getvalue()


@dataclass(frozen=True)
class BandwidthTarget:
    """The bandwidth target for one case, dtype and provider: ``verdict`` met | not met | not measured,
    ``line`` the summary that says why, ``min_pct`` the lowest % of copy bandwidth over the shapes the
    target covers (None when none was measured)."""

    verdict: str
    line: str
    min_pct: float | None


def bandwidth_target(case: str, dtype_name: str, rows: Sequence[Row], provider: str = "triton"
                     ) -> BandwidthTarget | None:  # fmt: skip
    """The issue's target on the forward ``rows`` of one case and dtype: at every shape with ≥ 64 MB of
    activations, ``provider`` reaches ≥ 80 % of the measured copy bandwidth. None for a case it does not
    cover. ``not met`` as soon as one such shape is measured below 80 %; ``met`` only when all are measured
    and reach it; otherwise (no such shape, no copy bandwidth cached, the provider not timed at some)
    ``not measured``."""
    if case not in TARGET_CASES:
        return None
    head = (f"{case}.{dtype_name}.fwd: target {provider} ≥ {TARGET_PCT_OF_COPY:.0f} % of copy bandwidth at "
            f"≥ {TARGET_MIN_ACTIVATION_BYTES / 1e6:.0f} MB of activations:")  # fmt: skip
    big = [r for r in rows if (r.activation_bytes or 0) >= TARGET_MIN_ACTIVATION_BYTES]
    if not big:
        largest = max((r.activation_bytes or 0 for r in rows), default=0)
        return BandwidthTarget("not measured", f"{head} not measured — no such shape in this sweep (largest "
                                               f"{largest / 1e6:.3g} MB)", None)  # fmt: skip
    if not any(r.copy_gbps for r in big):
        return BandwidthTarget("not measured", f"{head} not measured — no copy bandwidth cached for this "
                                               "device (run `perflab peak`)", None)  # fmt: skip
    measured = [(pct, r) for r in big if (pct := r.pct_of_copy(provider)) is not None]
    if not measured:
        why = next((r.skipped[provider] for r in big if provider in r.skipped), f"{provider} not timed")
        return BandwidthTarget("not measured", clip(f"{head} not measured — {why}", 400), None)
    low, at = min(measured, key=lambda m: m[0])
    passed = sum(pct >= TARGET_PCT_OF_COPY for pct, _ in measured)
    detail = (f"min {low:.1f} % ({at.gbps(provider):.0f} of {at.copy_gbps:.0f} GB/s) at {at.shape}; "
              f"{passed}/{len(big)} shapes ≥ {TARGET_PCT_OF_COPY:.0f} %")  # fmt: skip
    if low < TARGET_PCT_OF_COPY:
        verdict = "not met"
    elif len(measured) == len(big):
        verdict = "met"
    else:
        verdict = "not measured"
        detail += f", {len(big) - len(measured)} not timed"
    return BandwidthTarget(verdict, f"{head} {verdict} — {detail}", low)


def csv_name(case: str, dtype_name: str, direction: str) -> str:
    return f"{case}-{dtype_name}-{direction}-perf.csv"


def plot_png(rows: Sequence[Row], title: str) -> bytes:
    """Speedup of triton vs naive and vs compiled per shape; the geomeans are in the legend and title."""
    from matplotlib.figure import Figure

    labels = [str(r.shape) for r in rows]
    fig = Figure(figsize=(max(6.0, 0.45 * len(rows) + 2), 4))
    ax = fig.subplots()
    means = []
    for against, color in (("naive", "#2b6cb0"), ("compiled", "#dd6b20")):
        ys = [r.speedup(against) for r in rows]
        gm = geomean(ys)
        if gm is None:
            continue
        means.append(f"vs {against} {gm:.2f}×")
        ax.plot(labels, [float("nan") if y is None else y for y in ys], "o-", color=color,
                label=f"triton vs {against} (geomean {gm:.2f}×)")  # fmt: skip
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xlabel("shape (batch x seq_len x hidden)")
    ax.set_ylabel("speedup (provider median / triton median)")
    ax.tick_params(axis="x", rotation=60, labelsize=7)
    ax.legend(fontsize=8)
    ax.set_title(f"{title}: geomean " + (", ".join(means) or "none measured"), fontsize=10)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120, bbox_inches="tight")
    return buf.getvalue()


def write_outputs(rows: dict[str, list[Row]], case: str, dtype_name: str, save_path: Path, plot: bool
                  ) -> dict[str, str | bytes]:  # fmt: skip
    """Write the CSVs (and PNGs) into ``save_path``; returns {file name: CSV text or PNG bytes} for MLflow."""
    save_path.mkdir(parents=True, exist_ok=True)
    files: dict[str, str | bytes] = {}
    for direction, rs in rows.items():
        name = csv_name(case, dtype_name, direction)
        files[name] = csv_text(rs)
        if plot:
            files[name.replace("-perf.csv", "-speedup.png")] = plot_png(rs, f"{case} {dtype_name} {direction}")
    for name, content in files.items():
        if isinstance(content, bytes):
            (save_path / name).write_bytes(content)
        else:
            (save_path / name).write_text(content)
    return files
