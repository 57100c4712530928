"""From the results table to a recommendation: best throughput, best efficiency, the config to train with.

Rules (thresholds in ``Rules``; ``SweepConfig`` carries the memory margin and the utilisation lines):

* highest throughput — max samples/s over ``ok`` trials;
* best efficiency — max samples/s per GB of peak memory;
* recommended — the highest throughput with memory ≤ ``max_memory_pct`` of the device (the margin
  kept). Whenever a trial ran within the margin there is one: GPU utilisation and input-pipeline limits
  are the diagnosis beside it (``gpu_note``, ``sweeps.bottleneck``), never a veto;
* diagnosis per configuration, the first rule that applies — ``memory-bound`` at ≥ ``memory_bound_pct``
  of the device (or an OOM); ``I/O-bound`` when waiting for data is ≥ ``io_bound_frac`` of the step, with
  what more workers did (helped, did not, or could not: the host's usable cores are all in use); then by
  the measured GPU utilisation: ``host/launch-bound`` below ``host_bound_util_pct`` (the GPU idles while
  Python launches kernels: the model is too small for the device), ``compute-bound`` at ≥
  ``min_gpu_util_pct``, ``partly host-bound`` between the two; without a reading (a CPU run, or no NVML)
  the diagnosis says so instead of guessing — step time alone cannot tell compute from host overhead.

``Recommendation.why_none`` is set only when no trial ran ok within the memory margin, and says which.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sweeps.space import DEFAULTS, OTHER

__all__ = [
    "Recommendation",
    "Rules",
    "describe_config",
    "diagnose",
    "gpu_note",
    "recommend",
    "remeasured_text",
    "snippet_yaml",
    "table_markdown",
]


@dataclass(frozen=True)
class Rules:
    max_memory_pct: float = 80.0
    min_gpu_util_pct: float = 70.0
    io_bound_frac: float = 0.3  # data wait / step time at or above which the loader is the bottleneck
    workers_gain: float = 1.05  # "more workers help": ≥ 5 % more samples/s with more workers
    memory_bound_pct: float = 90.0  # this close to the wall, memory limits the batch
    host_bound_util_pct: float = 30.0  # GPU busy less than this: the host (Python, launches) bounds the step
    learning_rate: float = 1e-3  # at reference_batch_size
    reference_batch_size: int = 256
    amp_dtype: str = "bfloat16"  # what "AMP on" meant in the sweep
    usable_cores: int | None = None  # the host's (sched_getaffinity): no more workers than this can help


@dataclass
class Recommendation:
    highest_throughput: dict[str, Any] | None
    best_efficiency: dict[str, Any] | None
    recommended: dict[str, Any] | None
    notes: list[str] = field(default_factory=list)  # why a filter was skipped, or why nothing qualified
    diagnoses: list[dict[str, Any]] = field(default_factory=list)  # row + "diagnosis"
    why_none: str | None = None  # set when recommended is None: no ok trial, or none within the memory margin
    gpu_note: str | None = None  # the recommended configuration's GPU utilisation, when the GPU idled, and why


def diagnose(row: dict[str, Any], rows: list[dict[str, Any]], rules: Rules, device: str | None = None) -> str:
    """The bottleneck of one configuration (``row``) by the module docstring's rules, first match wins.

    ``rows`` is the whole table (for the "more workers" comparison); ``device`` is "cpu" or a GPU name,
    only used to say why a row has no GPU utilisation.
    """
    if row["status"] == "oom" or (row.get("memory_pct") or 0) >= rules.memory_bound_pct:
        return "memory-bound"
    if row["status"] != "ok":  # the trial's own line's why, in its row too
        reason = " ".join(str(row.get("reason") or "").split())
        return f"{row['status']}: {reason[:200]}" if reason else row["status"]
    step, wait = row.get("step_ms"), row.get("io_wait_ms")
    if step and wait is not None and wait / step >= rules.io_bound_frac:
        fixed = ("batch_size", *(k for k in OTHER if k not in ("num_workers", "prefetch_factor", "persistent_workers")))
        same = [
            r for r in rows
            if r["status"] == "ok" and r["num_workers"] > row["num_workers"]
            and all(r.get(k, DEFAULTS.get(k)) == row.get(k, DEFAULTS.get(k)) for k in fixed)
        ]  # fmt: skip
        if not same:
            return _io_without_more_workers(row["num_workers"], rules.usable_cores, device != "cpu")
        if max(r["samples_per_s"] for r in same) >= rules.workers_gain * row["samples_per_s"]:
            return "I/O-bound (more workers help)"
        # what bounds it instead (reads, decoding, collation, the workers' own cost) a table row cannot tell;
        # the bottleneck probe of the recommendation says what it can
        return "I/O-bound (more workers do not help)"
    util = row.get("gpu_util_pct")
    if util is None:
        if device == "cpu":
            return "CPU run: compute vs host overhead not told apart (no GPU utilisation)"
        return "GPU utilisation not measured (no NVML reading): compute- or host-bound unknown"
    if util < rules.host_bound_util_pct:
        return f"host/launch-bound (GPU busy {util:.0f} %: a larger batch, torch.compile or CUDA graphs help)"
    if util >= rules.min_gpu_util_pct:
        return "compute-bound"
    return f"partly host-bound (GPU busy {util:.0f} %: torch.compile or CUDA graphs may help)"


def _io_without_more_workers(workers: int, cores: int | None, gpu: bool = True) -> str:
    if cores is not None and workers >= cores:
        if not gpu:
            return f"I/O-bound (all {cores} usable cores have a worker)"
        return (f"I/O-bound (all {cores} usable cores have a worker: decode or normalise on the GPU, ship uint8, "
                "or a faster file layout)")  # fmt: skip
    more = f"; the host has {cores} usable cores" if cores is not None else ""
    return f"I/O-bound ({workers} worker{'s' * (workers != 1)}, the most measured with these settings{more})"


def recommend(
    rows: list[dict[str, Any]], device: str, rules: Rules | None = None, workload: str | None = None
) -> Recommendation:
    """``device`` is "cpu" or a GPU name (the trials' ``device``); ``workload`` (what was measured) only
    shapes the advice when no configuration keeps the GPU busy."""
    rules = rules or Rules()
    ok = [r for r in rows if r["status"] == "ok" and r.get("samples_per_s") is not None]
    notes: list[str] = []
    diag = [{**r, "diagnosis": diagnose(r, rows, rules, device)} for r in rows]
    if not ok:
        why = _why_no_ok(rows)
        return Recommendation(None, None, None, [why], diag, why)
    fastest = max(ok, key=lambda r: r["samples_per_s"])
    with_mem = [r for r in ok if r.get("peak_memory_gb")]
    efficient = max(with_mem, key=lambda r: r["samples_per_s"] / r["peak_memory_gb"]) if with_mem else None
    in_memory = [r for r in ok if r.get("memory_pct") is not None and r["memory_pct"] <= rules.max_memory_pct]
    if device == "cpu":
        notes.append("CPU run: no GPU utilisation to diagnose")
    if not in_memory:
        why = f"no ok trial has memory <= {rules.max_memory_pct:g} % of the device"
        return Recommendation(fastest, efficient, None, [*notes, why], diag, why)
    chosen = max(in_memory, key=lambda r: r["samples_per_s"])
    gpu = gpu_note(chosen, ok, rules, workload) if device != "cpu" else None
    return Recommendation(fastest, efficient, chosen, notes, diag, None, gpu)


def _why_no_ok(rows: list[dict[str, Any]]) -> str:
    """ "no trial finished ok", with what the trials ended as and what to change."""
    if not rows:
        return "no trial finished ok: none ran (a --time-budget spent, or an empty study)"
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    ended = ", ".join(f"{n} {status}" for status, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    why = f"no trial finished ok ({ended})"
    ooms = [r for r in rows if r["status"] == "oom"]
    if ooms:
        smallest = min(ooms, key=lambda r: r["batch_size"])
        why += f"; batch {smallest['batch_size']} ran out of memory: try smaller --batch-sizes"
    other = sorted((r for r in rows if r["status"] in ("failed", "timeout")), key=lambda r: r.get("trial") or 0)
    if other:
        first = other[0]
        why += (f"; trial {first.get('trial')} ({describe_config(first)}) {first['status']}: "
                + (" ".join(str(first.get("reason") or "").split())[:200] or "no reason recorded"))  # fmt: skip
    return why


def gpu_note(chosen: dict[str, Any], ok: list[dict[str, Any]], rules: Rules, workload: str | None) -> str | None:
    """What the recommended configuration's GPU utilisation says, when the GPU idled part of the step
    (below ``min_gpu_util_pct``); None when it was busy or not measured."""
    util = chosen.get("gpu_util_pct")
    if util is None or util >= rules.min_gpu_util_pct:
        return None
    note = f"the GPU was busy {util:.0f} % of the recommended configuration's steps"
    step, wait = chosen.get("step_ms"), chosen.get("io_wait_ms")
    if step and wait is not None and wait / step >= rules.io_bound_frac:
        note += f": it waits for its input {100 * wait / step:.0f} % of each step — the bottleneck below says how much"
    elif util < rules.host_bound_util_pct:
        note += f": the model is too small for this device (host/launch-bound) — {_larger_model_hint(workload)}"
    else:
        note += ": it waits part of each step — the bottleneck below says on what"
    busy_over = [  # faster or busier trials over the memory margin: what the margin costs
        r for r in ok if (r.get("gpu_util_pct") or 0) >= rules.min_gpu_util_pct
        and (r.get("memory_pct") or 0) > rules.max_memory_pct
    ]  # fmt: skip
    if busy_over:
        r = max(busy_over, key=lambda r: r["samples_per_s"])
        note += (f"; trial {r.get('trial')} reaches {r['gpu_util_pct']:.0f} % but needs {r['memory_pct']:.0f} % "
                 f"of device memory (over {rules.max_memory_pct:g} %)")  # fmt: skip
    return note


def _larger_model_hint(workload: str | None) -> str:
    """The built-ins after ``workload`` in ``sweeps.builtins.BUILTINS`` (ordered smallest first), as CLI advice."""
    from sweeps.builtins import BUILTINS

    names = list(BUILTINS)
    if workload not in names:
        return "train a larger model or a larger batch per step, or try --workload cnn or gpt to see the tuner's view"
    larger = names[names.index(workload) + 1 :]
    if not larger:
        return f"{workload!r} is already the largest built-in: train a larger model, or raise the batch size"
    return f"try --workload {_either(larger)}"


def _either(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def scaled_lr(batch_size: int, rules: Rules) -> float:
    """Square-root scaling: lr × sqrt(batch / reference) (Adam-family optimisers)."""
    return rules.learning_rate * math.sqrt(batch_size / rules.reference_batch_size)


def snippet_yaml(rec: Recommendation, rules: Rules, settings: Mapping[str, Any] | None = None,
                 head: list[str] | None = None) -> str:  # fmt: skip
    """The YAML a user applies: ``settings`` (a configuration; by default the recommendation) under comment
    lines ``head`` (by default the recommended trial's reading) and the learning rate's rule."""
    import yaml

    r = rec.recommended if settings is None else settings
    if r is None:
        return "# nothing to recommend\n" + "".join(f"# {n}\n" for n in rec.notes)
    knobs = ("batch_size", "num_workers", "pin_memory", "amp", *DEFAULTS)
    c: dict[str, Any] = {k: r.get(k, DEFAULTS.get(k)) for k in knobs}
    workers = int(c["num_workers"])
    data: dict[str, Any] = {"batch_size": int(c["batch_size"]) // int(c["grad_accum"]), "num_workers": workers,
                            "pin_memory": bool(c["pin_memory"])}  # fmt: skip
    if workers:
        data.update(prefetch_factor=int(c["prefetch_factor"]), persistent_workers=bool(c["persistent_workers"]))
    doc = {
        "data": data,  # the DataLoader's batch: the micro-batch when gradients are accumulated
        "training": {
            "use_amp": bool(c["amp"]),
            **({"amp_dtype": rules.amp_dtype} if c["amp"] else {}),
            "grad_accum_steps": int(c["grad_accum"]),
            "effective_batch_size": int(c["batch_size"]),
            "channels_last": bool(c["channels_last"]),
            "torch_compile": bool(c["compile"]),
            "learning_rate": float(f"{scaled_lr(int(c['batch_size']), rules):.6g}"),
        },
    }
    if head is None:
        head = [f"perflab sweep: {r['samples_per_s']:.0f} samples/s, "
                f"{r.get('memory_pct', float('nan')):.1f} % of device memory"]  # fmt: skip
    lr = f"lr = {rules.learning_rate:g} x sqrt({r['batch_size']} / {rules.reference_batch_size})"
    return "".join(f"# {line}\n" for line in [*head, lr]) + yaml.safe_dump(doc, sort_keys=False)


Remeasured = Mapping[Any, tuple[float, float | None, float | None, int]]  # trial -> mean, low, high, runs


def table_markdown(rec: Recommendation, remeasured: Remeasured | None = None) -> str:
    """The results table and the highest / most efficient / recommended lines. ``remeasured`` (the ranking's
    figures by trial) replaces a re-run trial's single reading in those lines, and picks them by it: one short
    trial can read many times what every re-run of it gives."""
    cols = ("trial", "configuration", "status", "samples_per_s", "step_ms", "io_wait_ms", "peak_memory_gb",
            "memory_pct", "gpu_util_pct", "diagnosis")  # fmt: skip
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in sorted(rec.diagnoses, key=lambda r: -(r.get("samples_per_s") or 0)):
        cells = []
        for c in cols:
            v = describe_config(row) if c == "configuration" else row.get(c)
            cells.append("—" if v is None else f"{v:.1f}" if isinstance(v, float) else str(v).replace("|", "\\|"))
            if c == "samples_per_s" and row.get("samples_per_s_low") is not None:  # the blocks' spread
                cells[-1] += f" ({row['samples_per_s_low']:.0f}–{row['samples_per_s_high']:.0f})"
        lines.append("| " + " | ".join(cells) + " |")
    highest, efficient = rec.highest_throughput, rec.best_efficiency
    if remeasured:
        ok = [r for r in rec.diagnoses if r["status"] == "ok" and r.get("samples_per_s") is not None]
        highest = max(ok, key=lambda r: _figure(r, remeasured), default=None)
        with_mem = [r for r in ok if r.get("peak_memory_gb")]
        efficient = max(with_mem, key=lambda r: _figure(r, remeasured) / r["peak_memory_gb"], default=None)
    for label, r in (("highest throughput", highest), ("best efficiency", efficient),
                     ("recommended", rec.recommended)):  # fmt: skip
        none = "none" + (f" — {rec.why_none}" if label == "recommended" and rec.why_none else "")
        lines.append(f"\n**{label}**: " + (none if r is None else _describe(r, remeasured)))
    if rec.gpu_note:
        lines.append(f"\n_GPU: {rec.gpu_note}_")
    lines += [f"\n_{n}_" for n in rec.notes if n != rec.why_none]
    return "\n".join(lines)


def describe_config(p: Mapping[str, Any]) -> str:
    """A configuration in a few words: ``bs=256 w=8 amp pin`` plus whichever other knob is not at its plain value."""
    words = [f"bs={p['batch_size']}", f"w={p['num_workers']}"]
    words += [name for name in ("amp", "pin") if p.get("amp" if name == "amp" else "pin_memory")]
    if p.get("grad_accum", 1) != 1:
        words.append(f"accum={p['grad_accum']}")
    words += [label for k, label in (("channels_last", "channels_last"), ("compile", "compile")) if p.get(k)]
    if p.get("num_workers"):
        if p.get("prefetch_factor", 2) != 2:
            words.append(f"prefetch={p['prefetch_factor']}")
        if p.get("persistent_workers") is False:
            words.append("non-persistent")
    return " ".join(words)


def remeasured_text(mean: float, low: float | None, high: float | None, runs: int) -> str:
    """A throughput re-measured over ``runs`` runs: ``12,345 samples/s, mean of 4 runs [11,900, 12,800]``."""
    interval = f" [{low:,.0f}, {high:,.0f}]" if low is not None and high is not None else ""
    return f"{mean:,.0f} samples/s, mean of {runs} runs{interval}"


def _figure(r: Mapping[str, Any], remeasured: Remeasured) -> float:
    m = remeasured.get(r.get("trial"))
    return m[0] if m else float(r["samples_per_s"])


def _describe(r: dict[str, Any], remeasured: Remeasured | None = None) -> str:
    m = remeasured.get(r.get("trial")) if remeasured else None
    if m is not None:
        figure = f"{remeasured_text(*m)} (its sweep trial alone read {r['samples_per_s']:,.0f})"
    elif remeasured:
        figure = f"{r['samples_per_s']:,.0f} samples/s (one trial, not re-measured)"
    else:
        figure = f"{r['samples_per_s']:.0f} samples/s"
    return (f"trial {r.get('trial')}: {describe_config(r)} — {figure}"
            + (f", {r['peak_memory_gb']:.2f} GB peak" if r.get("peak_memory_gb") else ""))  # fmt: skip
