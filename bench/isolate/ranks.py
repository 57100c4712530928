"""A variant with world_size N > 1: N ranks launched through torch.distributed, and the child that coordinates them.
A variant of one process on several GPUs (``gpus`` > 1) is coordinated alike, as one rank that sees them all.

The variant's child starts as any variant's (forked from the pre-warmed server, or a fresh interpreter) and reads
the variant's config in its set-up stage. With N > 1 it becomes the coordinator of N ranks and never uses a GPU
itself: a worker may have pinned it to one GPU (CUDA_VISIBLE_DEVICES, which CUDA reads once, when it starts),
and its ranks need them all. ``coordinate``:

1. waits at its gate (a child started ahead, bench.isolate.workers rule 1), without a CUDA context;
2. skips the variant, with the reason, on a GPU host with fewer than N GPUs: those of the suite's workers
   (``PERFLAB_RANK_DEVICES``, set by bench.isolate.workers), else those this process sees;
3. waits to run alone on the host (the runner's ``before_measure``, as a host-clocked measurement does: its ranks
   use every GPU, or on a CPU every core; workers rule 3);
4. starts N fresh interpreters through torch.multiprocessing's spawn context, not fork (CUDA cannot be used in a
   child forked after the driver started, and ``torch.cuda.is_available()`` starts it), rank r seeing the GPUs of
   step 2, with NCCL_NVLS_ENABLE=0 and TORCH_SYMM_MEM_DISABLE_MULTICAST=1 (bench.isolate.process.child_env:
   NVLink multicast stays off) and OMP_NUM_THREADS=1 unless set (torchrun's default for several ranks a host);
5. relays rank 0's messages to the parent, which holds the stages to their limits as for any variant; the
   first error, skip or replaced clock of any rank ends the variant with it, naming the rank; a rank that dies
   without a word ends it as that rank's crash, in the stage it was in;
6. exits once every rank has exited (a rank's failing teardown, after rank 0's "done", still fails the variant).

A rank (bench.isolate.child.rank_main) runs the child's stages (bench.isolate.child.run) with a message pipe of
its own. In its set-up it joins the default process group (``join_group``: NCCL on cuda:r, gloo on a CPU)
through a FileStore in the work directory (no port to choose: two variants' ranks never meet by mistake) and
the harness's own gloo group for the clocks (bench.measure.collective). Everything after runs in lockstep on
every rank, as on one process; decisions that could differ between ranks are agreed first (``any_rank``), and
rank 0 reports the outputs of all (``gathered``). The ranks live in the coordinator's process group: a stage's
deadline kills them with it. The timings (the slowest rank's) are the clocks' business:
bench.measure.collective; the memory (the most any rank held, ``memory_merged``), bench.measure.memory's.
"""

from __future__ import annotations

import json
import os
import select
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from bench.errors import Skip
from bench.isolate.channel import forward, send, wait_for
from bench.isolate.torchrun import environment

RANK_DEVICES = "PERFLAB_RANK_DEVICES"  # the GPUs a variant's ranks may use (the suite's workers'), comma-separated
_TERMINAL = ("error", "skipped", "tampered")  # a rank that says one of these ends the variant
_EXIT_POLL_S = 0.5  # how often a rank's exit is looked for when its pipe says nothing
JOIN_TRIES = 3  # tries of the ranks' rendezvous before their set-up fails
_GRACE_S = 1.0  # after a rank ended the variant, how long what the others say is still heard


def coordinate(job: dict[str, Any], config: Any, rank_main: Callable[[int, str, Any], None]) -> NoReturn:
    """The coordinator's part (the module's steps 1-6), called in the set-up stage once the config is known;
    ``rank_main(rank, job_path, pipe)`` runs a rank (bench.isolate.child.rank_main)."""
    world = config.world_size
    if job.get("gate"):
        send("gate")
        wait_for(b"g")
    devices = _rank_devices(config.device, world) if world > 1 else _rank_devices(config.device, config.gpus, False)
    if job.get("measure_gate") and job.get("mode") == "run":
        send("ready")
        wait_for(b"m")
    procs, readers = _spawn(job, world, devices, rank_main)
    _Relay(procs, readers).run()


def _rank_devices(device: str, needed: int, per_rank: bool = True) -> str | None:
    """The CUDA_VISIBLE_DEVICES of the ranks (None: as this process's); a Skip when they are fewer than ``needed``
    (a GPU per rank, or the GPUs of a one-process variant's ``gpus``)."""
    import torch

    if device == "cpu" or (device == "auto" and not torch.cuda.is_available()):
        return None
    listed = os.environ.get(RANK_DEVICES)
    count = len([d for d in listed.split(",") if d.strip()]) if listed else torch.cuda.device_count()
    if count < needed:
        raise Skip(f"needs {needed} GPUs{', one per rank' if per_rank else ''} ({count} visible)")
    return listed


def _spawn(job: dict[str, Any], world: int, devices: str | None,
           rank_main: Callable[[int, str, Any], None]) -> tuple[list[Any], list[Any]]:  # fmt: skip
    """The ranks' processes and the read ends of their message pipes."""
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    wd = Path(job["workdir"])
    store = wd / "ranks.store"
    store.unlink(missing_ok=True)  # a FileStore found on disk would hold an earlier run's keys
    if devices is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = devices
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    procs, readers = [], []
    for rank in range(world):
        own = wd if rank == 0 else wd / f"rank{rank}"  # outputs of a recheck, a profile: one directory per rank
        rank_job = {**job, "rank": rank, "world_size": world, "store": str(store), "workdir": str(own), "gate": False,
                    "measure_gate": False}  # fmt: skip
        rank_job.pop("cuda_expected", None)  # the coordinator checked it
        path = wd / f"job.rank{rank}.json"
        path.write_text(json.dumps(rank_job))
        read, write = ctx.Pipe(duplex=False)
        if world > 1:  # what torchrun sets (bench.isolate.torchrun); a spawned process starts with this environment
            os.environ.update(environment(rank, world))
        proc = ctx.Process(target=rank_main, args=(rank, str(path), write), name=f"perflab-rank{rank}")
        proc.start()
        write.close()  # the rank holds the only write end: its exit closes the pipe
        procs.append(proc)
        readers.append(read)
    return procs, readers


class _Relay:
    """Step 5: rank 0's messages on to the parent, every rank watched until it exits.

    When a rank ends the variant (an error, a skip, a replaced clock, an exit before its "done"), the others
    usually fail next, in the collective it left (gloo: "Connection closed by peer"). So what ends the variant is
    collected for ``_GRACE_S`` and told once, the cause first: a replaced clock (the variant is invalid whatever
    else happened), a skip (the host cannot run it), a rank that died without a word, then errors in the order
    they came; every rank's crash or error is named in the message."""

    def __init__(self, procs: list[Any], readers: list[Any]) -> None:
        self.procs, self.readers = procs, readers
        self.world = len(procs)
        self.stage = ["startup"] * self.world
        self.done = [False] * self.world
        self.buf = [b""] * self.world
        self.endings: list[tuple[int, dict[str, Any]]] = []
        self.deadline: float | None = None

    def run(self) -> NoReturn:
        open_ = {r.fileno(): rank for rank, r in enumerate(self.readers)}
        while open_ and (self.deadline is None or time.monotonic() < self.deadline):
            wait = _EXIT_POLL_S if self.deadline is None else max(0.0, self.deadline - time.monotonic())
            ready, _, _ = select.select(list(open_), [], [], wait)
            for fd in ready:
                chunk = os.read(fd, 1 << 16)
                rank = open_[fd]
                if chunk:
                    self._take(rank, chunk)
                else:
                    del open_[fd]
                    self._ended(rank)
            for fd, rank in list(open_.items()):  # exited, its pipe still open (a process it forked holds it)
                if fd not in ready and self.procs[rank].exitcode is not None:
                    # What it wrote between the select above and its exit is still in the pipe: its "done"
                    # among it (a rank of ch04 ddp_overlap on two H200s was failed as "exited before it was done").
                    self._drain(fd, rank)
                    del open_[fd]
                    self._ended(rank)
        if self.endings:
            self._tell()
        os._exit(0)

    def _take(self, rank: int, chunk: bytes) -> None:
        """Handle the whole lines of what ``rank`` sent; keep a partial last line for the next chunk."""
        *lines, self.buf[rank] = (self.buf[rank] + chunk).split(b"\n")
        for line in lines:
            if line.strip():
                self._handle(rank, line)

    def _drain(self, fd: int, rank: int) -> None:
        """Take whatever ``rank``'s pipe still holds, without waiting for more."""
        while select.select([fd], [], [], 0)[0]:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return
            self._take(rank, chunk)

    def _handle(self, rank: int, line: bytes) -> None:
        msg = json.loads(line)
        kind = msg.get("t")
        if kind == "stage" and msg.get("event") == "start":
            self.stage[rank] = msg["name"]
        elif kind == "done":
            self.done[rank] = True
        if kind in _TERMINAL:
            self._ending(rank, msg)
        elif rank == 0 and not self.endings and not _said(msg):
            forward(line)

    def _ending(self, rank: int, msg: dict[str, Any]) -> None:
        self.endings.append((rank, msg))
        if self.deadline is None:
            self.deadline = time.monotonic() + _GRACE_S

    def _ended(self, rank: int) -> None:
        """A rank's pipe closed: it exited. Before it was done, or not cleanly, without a word: its crash."""
        proc = self.procs[rank]
        proc.join(5.0)
        code = proc.exitcode
        if (self.done[rank] and code == 0) or any(r == rank for r, _ in self.endings):
            return
        how = (
            "is still running with its pipe closed" if code is None
            else f"was killed by signal {signal.Signals(-code).name}" if code < 0
            else f"exited with code {code}" if code
            else "exited before it was done"
        )  # fmt: skip
        self._ending(rank, {"t": "error", "kind": "crash", "stage": self.stage[rank],
                            "message": f"{how} during stage {self.stage[rank]!r}"})  # fmt: skip

    def _tell(self) -> NoReturn:
        """The variant's end, told once: the cause first (the class docstring), every rank's failure named."""
        first = {"tampered": 0, "skipped": 1}
        order = sorted(self.endings, key=lambda e: first.get(e[1]["t"], 2 if e[1].get("kind") == "crash" else 3))
        rank, msg = order[0]
        if msg["t"] != "error":
            send(msg["t"], **{k: v for k, v in msg.items() if k != "t"})
            self._end(0)
        failures = [(r, m) for r, m in order if m["t"] == "error"]
        send("error", stage=msg["stage"], kind=msg["kind"],
             message="; ".join(f"rank {r} of {self.world}{' ' if m['kind'] == 'crash' else ': '}{m['message']}"
                               for r, m in failures),
             traceback="\n".join(f"--- rank {r} ---\n{m['traceback']}" for r, m in failures if m.get("traceback"))
             or None)  # fmt: skip
        self._end(3)

    def _end(self, code: int) -> NoReturn:
        for proc in self.procs:  # ranks still waiting in a collective for the one that ended
            if proc.exitcode is None:
                proc.kill()
        os._exit(code)


def _said(msg: dict[str, Any]) -> bool:
    """What the coordinator has told the parent itself: the config, and the start-up and set-up's start (the ranks'
    start-up is part of the variant's set-up)."""
    if msg.get("t") == "config":
        return True
    return msg.get("t") == "stage" and (msg.get("name") == "startup" or msg.get("event") == "start"
                                        and msg.get("name") == "setup")  # fmt: skip


# --- in a rank ---------------------------------------------------------------------------------------------------


def join_group(ctx: Any, job: dict[str, Any]) -> None:
    """This rank into the default process group (NCCL on its GPU, gloo on a CPU) and the harness's gloo group;
    what ran is recorded in the result's sizes (``world_size``, ``backend``, the ranks' GPUs, and
    ``rendezvous_retries`` when a try failed)."""
    import datetime

    import torch.distributed as dist

    from bench.isolate.torchrun import joined, real_destroy, real_init
    from bench.measure.collective import set_control

    # A collective that waits longer than any stage may last has lost a rank; the stage's deadline acts first.
    limit = max(ctx.config.stage_limit(s) for s in ("setup", "warmup", "measurement"))
    timeout = datetime.timedelta(seconds=2 * limit)
    store = dist.FileStore(job["store"], ctx.world_size)
    store.set_timeout(timeout)
    backend = "nccl" if ctx.is_cuda else "gloo"
    bind = {"device_id": ctx.device} if ctx.is_cuda else {}  # NCCL's communicator made now, on this rank's GPU

    def connect(tried: Any) -> None:
        real_init(backend, store=tried, rank=ctx.rank, world_size=ctx.world_size, timeout=timeout,
                  **bind)  # fmt: skip
        set_control(dist.new_group(backend="gloo", timeout=timeout))

    def leave() -> None:
        if dist.is_initialized():
            real_destroy()

    failed = rendezvous(store, ctx.rank, ctx.world_size, connect, leave)
    joined(backend)  # the benchmark's own init_process_group() joins this group from now on
    ctx.record("world_size", ctx.world_size)
    ctx.record("backend", backend)
    if failed:
        ctx.record("rendezvous_retries", f"{len(failed)} ({failed[-1]})")
    if ctx.is_cuda:
        ctx.record("rank_devices", os.environ.get("CUDA_VISIBLE_DEVICES", "all"))


def rendezvous(store: Any, rank: int, world: int, connect: Callable[[Any], None], leave: Callable[[], None],
               tries: int = JOIN_TRIES) -> list[str]:  # fmt: skip
    """``connect`` every rank, up to ``tries`` times, each try under its own key prefix of ``store``; the
    causes of the failed tries (empty when the first held).

    A mesh of connections between processes can fail on one host for no fault of the benchmark (gloo:
    "connectFullMesh failed" on a loaded machine), and a rank that failed leaves the others either failed too
    or connected to a group it is not in. So after each try every rank says on the store whether it connected,
    and unless every one did, every one leaves the group and they try again together; the last try's error is
    raised on the ranks where it failed (the others raise naming them)."""
    from torch.distributed import PrefixStore

    failed: list[str] = []
    for n in range(tries):
        tried = PrefixStore(f"try{n}", store)
        error: Exception | None = None
        try:
            connect(tried)
        except Exception as e:  # every rank must say how its try went, or the others wait for it
            error = e
        tried.set(f"rank{rank}", "" if error is None else _first_line(error))
        said = [tried.get(f"rank{r}").decode() for r in range(world)]
        if not any(said):
            return failed
        leave()
        failed.append("; ".join(f"rank {r}: {m}" for r, m in enumerate(said) if m))
        if n + 1 == tries:
            if error is not None:
                raise error
            raise RuntimeError(f"the ranks could not connect in {tries} tries; last: {failed[-1]}")
    return failed


def _first_line(error: Exception) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"[:300]


def any_rank(flag: bool, world: int) -> bool:
    """Whether ``flag`` holds on any rank (every rank gets the same answer); ``flag`` itself on one process."""
    if world == 1:
        return flag
    import torch
    import torch.distributed as dist

    from bench.measure.collective import control

    t = torch.tensor([int(flag)])
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=control())
    return bool(t[0])


def gathered(tensors: list[Any] | None, wrote: bool | None, message: str | None,
             world: int) -> tuple[list[Any] | None, bool | None, str | None]:  # fmt: skip
    """On rank 0: its outputs, then a sample of every other rank's (bench.measure.guard.subsample), so the pair's
    comparison checks every rank's answer; whether every rank's timed calls overwrote the poison; every rank's
    ``validate_result()`` message. Elsewhere: its own, unchanged."""
    if world == 1:
        return tensors, wrote, message
    from bench.measure import guard

    got = _to_rank0((guard.subsample(tensors) if tensors is not None else None, wrote, message), world)
    if got is None:
        return tensors, wrote, message
    others = [t for part, _, _ in got[1:] for t in (part or [])]
    every = (tensors or []) + others if tensors is not None or others else None
    flags = [w for _, w, _ in got if w is not None]
    verdict = None if not flags else all(flags)
    said = [f"rank {r}: {m}" for r, (_, _, m) in enumerate(got) if m]
    return every, verdict, "; ".join(said) or None


def restore_merged(described: list[str], same: bool | None, world: int) -> tuple[list[str], bool | None]:
    """On rank 0: the set-up tensors the timed calls changed on every rank (another rank's named with it), and
    whether every rank's call from the set-up state gave the timed calls' output. Elsewhere: its own."""
    got = _to_rank0((described, same), world) if world > 1 else None
    if got is None:
        return described, same
    names = [d if r == 0 else f"rank {r}: {d}" for r, (ds, _) in enumerate(got) for d in ds]
    sames = [s for _, s in got if s is not None]
    return names, (all(sames) if sames else None)


def memory_merged(mine: dict[str, Any], world: int) -> dict[str, Any]:
    """On rank 0: the variant's memory, the max over every rank's own readings (bench.measure.memory.over_ranks).
    Elsewhere, and for one process: its own."""
    got = _to_rank0(mine, world) if world > 1 else None
    if got is None:
        return mine
    from bench.measure.memory import over_ranks

    return over_ranks(got)


def produced_merged(mine: dict[str, Any], world: int) -> dict[str, Any]:
    """On rank 0: whether every rank's output is its call's (bench.isolate.produced's first look): settled on every
    rank, and the threads the calls left running counted over the ranks. Elsewhere, and for one process: its own."""
    got = _to_rank0(mine, world) if world > 1 else None
    if got is None:
        return mine
    settled = [g["settled"] for g in got if g.get("settled") is not None]
    return {**mine, "settled": all(settled) if settled else None, "threads_left": sum(g["threads_left"] for g in got)}


def _to_rank0(mine: Any, world: int) -> list[Any] | None:
    """Every rank's ``mine``, in rank order, on rank 0 (through the harness's gloo group); None elsewhere."""
    import torch.distributed as dist

    from bench.measure.collective import control

    got: list[Any] | None = [None] * world if dist.get_rank() == 0 else None
    dist.gather_object(mine, got, dst=0, group=control())
    return got
