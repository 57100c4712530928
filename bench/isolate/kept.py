"""A pair's children kept across its rounds (``round_children``): each side's child of round 0 parked with its
set-up held, timing that side's later rounds at the parent's order.

A fresh child per round pays its start-up, set-up and warm-up again in every round: in three suites of chapters
13-20's pairs on the H200 set-up summed to 46-68 % of the wall, warm-up and measurement to 16-39 %. A child
asked to ``keep`` (the job's field; bench.isolate.rounds asks) ends its round with "kept" instead of its teardown
and waits (bench.isolate.timed's ``_park``); the parent holds its process and channel here.
An order ``{"round": n, "batch": b}`` runs one timing-only round (warm-up, measurement, the batch where the
example's speedups are on it) and parks it again; ``{"end": true}`` tears it down. The rounds alternate as with
fresh children (B O, O B, ...), so a drift cancels alike and load that comes and goes still lands in the rounds'
spread; what the spread no longer holds is set-up-to-set-up variation (allocations, autotuning picks):
``round_children="fresh"`` keeps that in the interval.

Parked children hold a CUDA context and memory but run nothing: each child's NVML readings list them apart
(``parked_pids``), not as processes sharing the GPU; the rounds keep them within half the device's memory.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.define.config import TIMING_ONLY, BenchmarkConfig
from bench.define.result import VariantResult
from bench.isolate.channel import PARKED_FILE
from bench.isolate.outcome import Watch, build_result
from bench.isolate.process import kill_group


class Kept:
    """A parked child (``child``: the runner's, which watches its rounds) and what round 0 said of it."""

    def __init__(self, child: Any, proc: Any, read_fd: int, config: BenchmarkConfig, held: dict[str, Any],
                 device: dict[str, Any] | None = None) -> None:  # fmt: skip
        self.child, self.proc, self.read_fd = child, proc, read_fd
        self.config = config  # its effective config, round 0's
        self.device = device  # round 0's "device" message: the device and its manifest
        self.held_mb = float(held.get("reserved_mb") or 0.0)  # the device memory it holds, parked
        self.total_mb = held.get("total_mb")  # the device's
        self.alive = True

    @staticmethod
    def listed(wd: Path, pid: int) -> None:
        """A child asked to keep, listed for its example's siblings' NVML readings (bench.isolate.timed)."""
        with open(wd.parent / PARKED_FILE, "a") as f:
            f.write(f"{pid}\n")

    def again(self, order: dict[str, Any], gate: Any = None, cancel: Any = None, on_measured: Any = None,
              before_measure: Any = None) -> VariantResult:  # fmt: skip
        """One more round (``order``: its number, whether the batch runs) once ``gate`` (a runner's Gate: the round's
        next child started ahead) is open, watched as a child's round is (its stages' limits, a crash, ``cancel``);
        the result of that round. The child parks again, or ended."""
        if gate is not None:
            gate.arrived.set()  # parked: nothing of it runs beside the variant before it
            gate.wait(cancel)
        child = self.child
        child.cancel, child.on_measured, child.before_measure = cancel, on_measured, before_measure
        child.gate, child.measured = None, False
        batch = self.config.measure_batch and bool(order.get("batch"))
        watch = Watch(child.spec, self.config.model_copy(update={**TIMING_ONLY, "measure_batch": batch}), "run")
        watch.resumed = True
        if self.device is not None:
            watch.data["device"] = self.device
        t0 = time.monotonic()
        try:
            self._order(order)
            timed_out = child._watch(self.proc, self.read_fd, watch, t0)
        finally:
            self.alive = watch.kept is not None
        code = 0 if watch.kept is not None else self.proc.returncode
        result = build_result(watch, code, timed_out, time.monotonic() - t0, child.wd / "child.log")
        if watch.kept is not None:
            self.held_mb = float(watch.kept.get("reserved_mb") or self.held_mb)
        result.cuda_visible_devices = (child.env or {}).get("CUDA_VISIBLE_DEVICES")
        result.launch = "kept"
        return result

    def _order(self, order: dict[str, Any]) -> None:
        data = (json.dumps(order) + "\n").encode()
        with contextlib.suppress(OSError):  # a child that died meanwhile: its EOF ends the watch
            while data:
                data = data[os.write(self.read_fd, data) :]

    def end(self) -> None:
        """Its teardown (the order "end"), within the teardown stage's limit; its group killed after."""
        if not self.alive:
            return
        self.alive = False
        self._order({"end": True})
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=self.config.stage_limit("teardown"))
        self._close()

    def kill(self) -> None:
        """At once (an interrupted suite)."""
        if self.alive:
            self.alive = False
            self._close()

    def _close(self) -> None:
        kill_group(self.proc)
        with contextlib.suppress(OSError):
            os.close(self.read_fd)
