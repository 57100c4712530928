"""Which part bounds a training job, in numbers, and what each remedy could gain.

Three ceilings measured apart (``sweeps.probe``) beside the job's own throughput ``T`` (the
recommended configuration training, re-measured):

* ``N`` — the data path alone (Dataset + DataLoader + copy to the device, no model), at its best worker
  count ``W`` of those probed (0, 2, 4, ... up to the host's usable cores);
* ``M`` — the step alone (forward, backward, optimizer on a batch kept on the device);
* the transfer alone (a host batch copied to the GPU), which bounds the data path from below.

The job is data-bound when ``N < M`` (the step could run ``M / N`` × faster), else step-bound. While it
trains at ``T`` the step is busy ``T / M`` of the time: the GPU waits ``1 − T / M``. No remedy lifts the
job past ``M``, so each remedy's gain is bounded by ``M / T``; the per-worker rate bounds what more
workers can add (``N_W / W`` a worker, times the usable cores), a measured estimate, said as one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Bottleneck"]

_BELOW = 0.97  # a part's probe under this share of the job's own rate is no ceiling of it (3 %: the runs' noise)
_FEWER = 1.1  # fewer workers are named a remedy when they delivered this much more than the configuration's count
_SCALING = 0.6  # the data path's best rate under this share of (per-worker rate of 2 workers × W): it stopped scaling


@dataclass(frozen=True)
class Bottleneck:
    job_samples_per_s: float  # T: the configuration training (its re-measured mean)
    workers: int  # the configuration's DataLoader workers
    data: dict[int, float]  # N per probed worker count
    step_samples_per_s: float  # M
    cores: int  # the host's usable cores
    gpu: bool
    transfer_samples_per_s: float | None = None
    input_dtype: str | None = None
    input_bytes_per_sample: float | None = None
    data_in_memory: bool = False  # tensors in memory (``sweeps.probe``): no file to lay out, nothing to decode

    @classmethod
    def from_probe(cls, probe: dict[str, Any], job_samples_per_s: float, workers: int) -> Bottleneck:
        return cls(
            job_samples_per_s=job_samples_per_s, workers=workers,
            data={int(w): float(v) for w, v in probe["data_samples_per_s"].items()},
            step_samples_per_s=float(probe["step_samples_per_s"]), cores=int(probe["cores"]),
            gpu=probe.get("device") == "cuda", transfer_samples_per_s=probe.get("transfer_samples_per_s"),
            input_dtype=probe.get("input_dtype"), input_bytes_per_sample=probe.get("input_bytes_per_sample"),
            data_in_memory=bool(probe.get("data_in_memory")),
        )  # fmt: skip

    @property
    def best_workers(self) -> int:
        return max(self.data, key=lambda w: self.data[w])

    @property
    def data_samples_per_s(self) -> float:
        return self.data[self.best_workers]

    @property
    def data_below_job(self) -> bool:
        """The data path's probe read under the job's own rate: it is no ceiling (the job ran faster)."""
        return self.data_samples_per_s < _BELOW * self.job_samples_per_s

    @property
    def step_below_job(self) -> bool:
        """The step's probe read under the job's own rate: it is no ceiling (the job ran faster)."""
        return self.step_samples_per_s < _BELOW * self.job_samples_per_s

    @property
    def data_bound(self) -> bool:
        """The data path bounds the job: its ceiling under the step's, and a ceiling indeed."""
        return self.data_samples_per_s < self.step_samples_per_s and not self.data_below_job

    @property
    def bound_named(self) -> bool:
        """Whether the probe names a bound: the part it would name is a ceiling of the job's own rate."""
        return not (self.data_below_job if self.data_samples_per_s < self.step_samples_per_s else self.step_below_job)

    @property
    def wait_pct(self) -> float:
        """The share of the job's time the step is not running: 1 − T / M (0 when T reaches M)."""
        return max(0.0, 100.0 * (1.0 - self.job_samples_per_s / self.step_samples_per_s))

    def numbers(self) -> dict[str, float]:
        """The ceilings as metrics (MLflow): samples/s, the best worker count, the GPU's wait."""
        out = {"data_samples_per_s": self.data_samples_per_s, "data_best_workers": float(self.best_workers),
               "step_samples_per_s": self.step_samples_per_s, "job_samples_per_s": self.job_samples_per_s,
               "wait_pct": self.wait_pct, "data_bound": float(self.data_bound)}  # fmt: skip
        if not self.bound_named:
            out["bound_named"] = 0.0  # a part's probe read under the job's own rate
        if self.transfer_samples_per_s:
            out["transfer_samples_per_s"] = float(self.transfer_samples_per_s)
        return out

    def headline(self) -> str:
        n, m, t = self.data_samples_per_s, self.step_samples_per_s, self.job_samples_per_s
        who = "the GPU" if self.gpu else "the step"
        data = (f"the data path delivers at most {n:,.0f} samples/s (with {self.best_workers} workers)"
                if not self.data_below_job else
                f"the data path's probe read {n:,.0f} samples/s (with {self.best_workers} workers), below the "
                f"job's own rate: no ceiling")  # fmt: skip
        step = f"the step could take {m:,.0f}" if not self.step_below_job else (
            f"the step's probe read {m:,.0f}, below the job's own rate: no ceiling")  # fmt: skip
        line = f"{data}; {step}; the job ran {t:,.0f}: {who} waits {self.wait_pct:.0f} %"
        if not self.bound_named:
            part = "the data path" if n < m else "the step"
            return line + (f". Bound: not named — the probe of {part} ({min(n, m):,.0f}) is below the job's own "
                           f"rate ({t:,.0f}), so it measured less than the job gets; probe again "
                           f"(a longer probe_seconds) before trusting either part.")  # fmt: skip
        if self.workers == 0:
            # No worker: the loader runs between steps in the training process, so the two add up — naming the
            # step the bound while it waits 58 % of the time (probe 162,637 and 93,108: together 59,211) misleads.
            serial = 1.0 / (1.0 / n + 1.0 / m)
            return line + (f". Bound: loading and the step in turn — with 0 workers the loader runs between steps, "
                           f"together at most {serial:,.0f} samples/s; workers would overlap them, up to "
                           f"{min(n, m):,.0f}.")  # fmt: skip
        if self.data_bound:
            return line + f". Bound: the data path (the step could run {m / n:.2f}× faster)."
        return line + f". Bound: the step (the data path has {n / m:.2f}× headroom)."

    def remedies(self) -> list[str]:
        """What could lift the job, each with its gain bounded by the two ceilings."""
        if not self.bound_named:
            return [f"none weighed: a part's probe read under the job's own {self.job_samples_per_s:,.0f} samples/s, "
                    f"so the gains it would bound are not known"]  # fmt: skip
        if not self.data_bound:
            n = self.data_samples_per_s
            return [f"the step bounds the job: mixed precision, channels_last, torch.compile or a larger batch "
                    f"speed the step itself; the data path would keep up to {n:,.0f} samples/s"]  # fmt: skip
        out = [self._more_workers()]
        m, t = self.step_samples_per_s, self.job_samples_per_s
        host = 1e3 / self.data[0] if self.data.get(0) else None
        if self.data_in_memory:
            out.append(f"the data are tensors in memory (a TensorDataset): no file to read, nothing to decode; the "
                       f"data path's {self.data_samples_per_s:,.0f} samples/s are the loader's own indexing and "
                       f"collation, item by item — whole batches sliced at once (batched items) skip that; "
                       f"up to {m / t:.2f}× the job")  # fmt: skip
        if self.gpu:  # on a CPU these would move work to a GPU that is not there
            if host is not None:
                out.append(f"decode or normalise on the GPU: the host spends {host:.2f} ms a sample in one process; "
                           f"what moves to the GPU leaves that share, up to the step's {m:,.0f} samples/s "
                           f"({m / t:.2f}× the job)")  # fmt: skip
            if self.input_dtype and "float" in self.input_dtype and self.input_bytes_per_sample:
                b = self.input_bytes_per_sample
                x = self.transfer_samples_per_s
                copy = f"; the copy alone runs {x:,.0f} samples/s" if x else ""
                out.append(f"uint8 transfer: the inputs travel as {self.input_dtype}, {b:,.0f} bytes a sample; as "
                           f"uint8 (normalised on the GPU) a quarter of that passes the workers' shared memory and "
                           f"the copy{copy}; up to {m / t:.2f}× the job")  # fmt: skip
        # reads are named only where workers ran and stopped adding: where any worker made it slower (the best
        # count 0), workers' own cost — start, hand-over, cores shared with the step — is as likely as the reads
        if self._stopped_scaling() and self.best_workers > 0 and not self.data_in_memory:
            out.append(f"a faster file layout: the data path stopped scaling with workers ({self._scaling_text()}): "
                       f"reads, not decoding, bound it — read whole batches (one read per batch, not per sample), "
                       f"larger chunks, or the data in memory; up to {m / t:.2f}× the job")  # fmt: skip
        return out

    def _more_workers(self) -> str:
        w, n, m, t = self.best_workers, self.data_samples_per_s, self.step_samples_per_s, self.job_samples_per_s
        mine = self.data.get(self.workers)
        if w < self.workers and mine and n >= _FEWER * mine:  # past the best count, workers crowd the host
            gain = min(n, m) / t
            return (f"fewer workers: {w} delivered {n:,.0f} samples/s where the configuration's {self.workers} "
                    f"delivered {mine:,.0f} ({n / mine:.2f}×): beside the training process they oversubscribe "
                    f"the {self.cores} usable cores; try num_workers={w} (up to {gain:.2f}× the job)")  # fmt: skip
        if w >= self.cores or max(self.data) >= self.cores:
            return (f"more workers: none to add — the probe reached all {self.cores} usable cores, best with {w} "
                    f"({n:,.0f} samples/s)")  # fmt: skip
        per = n / max(w, 1)
        estimate = min(m, per * self.cores)
        return (f"more workers, up to the {self.cores} usable cores: ~{estimate:,.0f} samples/s if each kept its "
                f"{per:,.0f} samples/s (an estimate from {w} workers), {estimate / t:.2f}× the job")  # fmt: skip

    def _stopped_scaling(self) -> bool:
        if 2 not in self.data or self.best_workers <= 2:
            return len(self.data) > 1 and self.best_workers == 0  # workers made it slower
        return self.data_samples_per_s < _SCALING * self.data[2] / 2 * self.best_workers

    def _scaling_text(self) -> str:
        return ", ".join(f"{w} workers {v:,.0f}" for w, v in sorted(self.data.items()))

    def markdown(self) -> str:
        rows = " | ".join(f"{w}: {v:,.0f}" for w, v in sorted(self.data.items()))
        lines = ["## Bottleneck", "", f"**{self.headline()}**", "",
                 f"- data path alone (samples/s by workers, no model): {rows}",
                 f"- step alone (a batch kept on the device): {self.step_samples_per_s:,.0f} samples/s"]  # fmt: skip
        if self.transfer_samples_per_s:
            lines.append(f"- host→device copy alone: {self.transfer_samples_per_s:,.0f} samples/s")
        lines.append(f"- the recommended configuration ({self.workers} workers) trained at "
                     f"{self.job_samples_per_s:,.0f} samples/s; the host has {self.cores} usable cores")  # fmt: skip
        lines += ["", "What could help:", *(f"- {r}" for r in self.remedies())]
        return "\n".join(lines)
