"""What a benchmark may ask the harness while it runs: the device and its facts, the seed, smoke or
full size, sizes relative to the device, and what the variant needs to run at all.

Sizes that mean the same on every device: ``ctx.working_set(l2=4, smoke=...)`` is four times *this*
device's L2 (50 MB on an H100, 60 MB on an H200), ``ctx.working_set(memory=0.25, smoke=...)`` a quarter
of its memory; every size asked this way is kept under its name and lands in the result (``sizes``),
so a reader sees what ran. ``ctx.require(...)`` ends the variant as ``skipped`` with what it needs when
the host lacks it (two GPUs, FP8, a tool), never as failed. ``ctx.file(name)`` is where a variant writes a file
it hands to the harness (a memory snapshot, a trace of its own): logged with its run, copied to ``--out``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from bench.define.config import BenchmarkConfig, resolve_config
from bench.errors import Skip

if TYPE_CHECKING:
    import torch

T = TypeVar("T")

FILES = "files"  # the directory, in a variant's work directory, of the files it hands to the harness (``file``)


@dataclass(frozen=True)
class DeviceFacts:
    """What sizes are scaled by. On a CPU: the last-level cache, physical memory and logical cores."""

    name: str
    memory_bytes: int
    l2_bytes: int
    cores: int  # SMs on a GPU, logical cores on a CPU
    capability: tuple[int, int] | None = None  # CUDA compute capability; None on a CPU
    count: int = 1  # devices of this type visible to the process


@dataclass(frozen=True)
class RunContext:
    device: torch.device
    seed: int
    smoke: bool  # tiny inputs: CPU runs, CI, interpreters
    config: BenchmarkConfig
    facts: DeviceFacts | None = None
    sizes: dict[str, int | float | str] = field(default_factory=dict)  # what working_set/record gave out
    # A variant with world_size > 1 runs on every rank (bench.isolate.ranks): this process's rank, on cuda:rank
    # or the CPU, and the ranks in all; torch.distributed's default group joins them.
    rank: int = 0
    world_size: int = 1
    # Where ``file()`` puts the files the variant hands to the harness: the child's ``<workdir>/files``, whose
    # files the parent logs as artifacts of the variant's run (``files/``) and copies into ``--out``. None:
    # outside the harness, a temporary directory made on first use.
    files_dir: str | None = None
    # A later round's child of a pair measured in rounds (bench.isolate.rounds): it sets up, warms up and measures,
    # nothing more. Only its timing is kept (the first round's checks and records stand for the variant's, and a
    # file the first round wrote stays unless overwritten), so a set-up may skip what it makes for the record alone:
    # a memory snapshot, a curve it records.
    timing_only: bool = False

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def size(self, full: T, smoke: T) -> T:
        """``smoke`` at smoke size, else ``full``: the one place an example picks its problem size."""
        return smoke if self.smoke else full

    def working_set(
        self, *, smoke: int, l2: float | None = None, memory: float | None = None, name: str = "working_set"
    ) -> int:
        """Bytes: ``l2`` times this device's L2 or ``memory`` times its memory at full size, ``smoke``
        bytes at smoke size. The value is recorded in the result's ``sizes[name]``."""
        if (l2 is None) == (memory is None):
            raise ValueError(f"working_set() takes exactly one of l2= or memory=, got l2={l2!r}, memory={memory!r}")
        scale = l2 if l2 is not None else memory
        assert scale is not None
        if not scale > 0:
            raise ValueError(f"working_set(): the scale must be > 0, got {scale!r}")
        if self.smoke:
            value = int(smoke)
        else:
            facts = self.facts or device_facts(self.device)
            value = int(scale * (facts.l2_bytes if l2 is not None else facts.memory_bytes))
        return int(self.record(name, value))

    def record(self, name: str, value: T) -> T:
        """Keep ``value`` (a size, a shape, a count) in the result under ``name``; returns it."""
        self.sizes[name] = value if isinstance(value, (int, float, str)) else str(value)  # type: ignore[assignment]
        return value

    def file(self, name: str) -> Path:
        """The path to write the file ``name`` at (a plain file name: no directory part) for the harness to keep:
        logged as an artifact of the variant's MLflow run under ``files/`` and copied into ``--out DIR``'s
        directory of the variant (``files/``). The directory is made on first use; a later round's call of the
        same name writes over the earlier one. Outside the harness: a temporary directory."""
        if not name or name in (".", "..") or os.sep in name or (os.altsep and os.altsep in name):
            raise ValueError(f"file({name!r}): a plain file name, without a directory part (e.g. 'snapshot.pickle')")
        if self.files_dir is None:
            object.__setattr__(self, "files_dir", tempfile.mkdtemp(prefix="perflab-files-"))
        assert self.files_dir is not None
        d = Path(self.files_dir)
        d.mkdir(parents=True, exist_ok=True)
        return d / name

    def require(
        self,
        *,
        cuda: bool = False,
        gpus: int | None = None,
        capability: tuple[int, int] | None = None,
        memory_gb: float | None = None,
        tools: tuple[str, ...] = (),
        modules: tuple[str, ...] = (),
    ) -> None:
        """Skip the variant, naming what is missing, unless this host has all of it: a CUDA device,
        ``gpus`` visible GPUs, compute capability ``capability`` or newer (FP8: (8, 9)), ``memory_gb`` of
        device memory, the command-line ``tools`` and the importable Python ``modules``."""
        missing: list[str] = []
        facts = self.facts or device_facts(self.device)
        if (cuda or gpus or capability or memory_gb) and not self.is_cuda:
            missing.append(f"a CUDA GPU (device is {self.device})")
        else:
            if gpus and facts.count < gpus:
                missing.append(f"{gpus} GPUs ({facts.count} visible)")
            if capability and (facts.capability or (0, 0)) < tuple(capability):
                have = ".".join(map(str, facts.capability)) if facts.capability else "none"
                missing.append(f"compute capability {capability[0]}.{capability[1]}+ ({facts.name} has {have})")
            if memory_gb and facts.memory_bytes < memory_gb * 1e9:
                missing.append(f"{memory_gb:g} GB of device memory ({facts.memory_bytes / 1e9:.1f} GB)")
        missing += [f"the tool {t!r} on the PATH" for t in tools if shutil.which(t) is None]
        missing += [f"the Python module {m!r}" for m in modules if not _importable(m)]
        if missing:
            self.skip("needs " + ", ".join(missing))

    def skip(self, reason: str) -> None:
        """End this variant as ``skipped`` with ``reason`` (raises; nothing after it runs)."""
        raise Skip(reason)


def _importable(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def device_facts(device: torch.device) -> DeviceFacts:
    import torch

    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return DeviceFacts(
            name=props.name,
            memory_bytes=int(props.total_memory),
            l2_bytes=int(getattr(props, "L2_cache_size", 0) or 0),
            cores=int(props.multi_processor_count),
            capability=(int(props.major), int(props.minor)),
            count=torch.cuda.device_count(),
        )
    import platform

    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return DeviceFacts(
        name=platform.processor() or platform.machine(),
        memory_bytes=int(memory),
        l2_bytes=_cpu_last_level_cache(),
        cores=os.cpu_count() or 1,
    )


def _cpu_last_level_cache() -> int:
    """The largest cache of cpu0 (sysfs), 8 MiB when it cannot be read."""
    from pathlib import Path

    sizes = []
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text().strip()
        except OSError:
            continue
        unit = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * unit)
    return max(sizes, default=8 * 2**20)


_current: RunContext | None = None


_rank = 0  # this process's rank among a variant's ranks (set_rank; bench.isolate.ranks)


def set_rank(rank: int) -> None:
    """This process is rank ``rank`` of a variant with world_size > 1: its contexts place it on cuda:rank."""
    global _rank
    _rank = rank


def resolve_device(spec: str, rank: int | None = None) -> torch.device:
    """The device ``spec`` names; with ``rank`` (a variant's ranks), "auto" and "cuda" mean cuda:rank."""
    import torch

    if spec == "auto":
        spec = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(spec)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(f"device={spec!r} requested but CUDA is not available on this machine")
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device() if rank is None else rank)
    return device


def make_context(config: BenchmarkConfig, files_dir: str | None = None, timing_only: bool = False) -> RunContext:
    """The context of a variant run with ``config``; ``files_dir``: where ``RunContext.file`` writes (the child's
    ``<workdir>/files``; None outside the harness); ``timing_only``: a later round's child (``RunContext``)."""
    ranked = config.world_size > 1
    device = resolve_device(config.device, _rank if ranked else None)
    smoke = config.smoke if config.smoke is not None else device.type != "cuda"
    return RunContext(device=device, seed=config.seed, smoke=smoke, config=config, facts=device_facts(device),
                      rank=_rank if ranked else 0, world_size=config.world_size, files_dir=files_dir,
                      timing_only=timing_only)  # fmt: skip


def set_context(ctx: RunContext | None) -> None:
    global _current
    _current = ctx


def context() -> RunContext:
    """The running variant's context; outside the harness, one built from the defaults."""
    global _current
    if _current is None:
        _current = make_context(resolve_config())
    return _current


def synchronize(device: torch.device) -> None:
    """Wait for ``device``'s work (a no-op on a CPU)."""
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def seed_everything(seed: int, deterministic: bool) -> None:
    """Seed random, numpy, torch and every CUDA device; with ``deterministic``, deterministic algorithms and
    cuDNN (set in the child before ``setup()``)."""
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
