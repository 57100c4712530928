"""What a rank of a variant (bench.isolate.ranks) offers code written for ``torchrun``.

Such code reads its place from the environment and joins the default process group in its set-up; it leaves the
group in its teardown::

    dist.init_process_group(backend="nccl", init_method="env://")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    ...
    dist.destroy_process_group()

A rank has joined the harness's group before ``setup()`` (bench.isolate.ranks.join_group: its clocks, the
comparison of the ranks' outputs and memory need it up from the set-up to the teardown, and torch allows one
default group a process). So:

* its environment holds what torchrun sets for a single host (``environment``): RANK, LOCAL_RANK, WORLD_SIZE,
  LOCAL_WORLD_SIZE, GROUP_RANK, ROLE_RANK, ROLE_WORLD_SIZE; not MASTER_ADDR and MASTER_PORT (the ranks meet through
  a file, no port is listened on: a benchmark that reads them for a store of its own is not supported);
* the benchmark's ``init_process_group`` joins the harness's group (``install``): its ``init_method``, ``store``,
  ``timeout`` and ``device_id`` are not used; a ``backend``, ``world_size`` or ``rank`` the group does not have is
  refused, naming the value and what is accepted. A call in each set-up is accepted whether or not the teardown
  before destroyed the group: the recheck sets a benchmark up again, which torchrun never does, and many torchrun
  scripts never destroy their group;
* its ``destroy_process_group()`` of the default group leaves the group to the harness, which ends it with the rank;
  ``destroy_process_group(group)`` of a group of its own destroys that group.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_REAL: dict[str, Callable[..., Any]] = {}  # torch's own functions, replaced in a rank by ``install``
_STATE = {"harness": ""}  # the harness's backend once its group is up


def environment(rank: int, world: int) -> dict[str, str]:
    """The variables torchrun gives rank ``rank`` of ``world`` on one host."""
    return {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world),
            "GROUP_RANK": "0", "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": str(world)}  # fmt: skip


def install() -> None:
    """In a rank, before the benchmark's file is imported (a ``from torch.distributed import init_process_group``
    there binds the function of that moment): torch.distributed's ``init_process_group`` and
    ``destroy_process_group`` replaced by the module's."""
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    if _REAL:
        return
    _REAL["init"], _REAL["destroy"] = c10d.init_process_group, c10d.destroy_process_group
    for module in (dist, c10d):
        module.init_process_group = _init  # type: ignore[assignment]
        module.destroy_process_group = _destroy  # type: ignore[assignment]


def real_init(*args: Any, **kwargs: Any) -> None:
    """torch's ``init_process_group``: the harness's own join."""
    import torch.distributed as dist

    _REAL.get("init", dist.init_process_group)(*args, **kwargs)


def real_destroy() -> None:
    """torch's ``destroy_process_group()``: a failed join's leave."""
    import torch.distributed as dist

    _REAL.get("destroy", dist.destroy_process_group)()


def joined(backend: str) -> None:
    """The harness's group is up (``backend``): from now on the benchmark's ``init_process_group`` joins it."""
    _STATE["harness"] = backend


def _init(backend: str | None = None, init_method: str | None = None, timeout: Any = None, world_size: int = -1,
          rank: int = -1, store: Any = None, group_name: str = "", pg_options: Any = None, device_id: Any = None,
          **_: Any) -> None:  # fmt: skip
    from bench.define.context import context

    ctx = context() if _STATE["harness"] else None
    where = f"init_process_group() in rank {ctx.rank} of {ctx.world_size}" if ctx else "init_process_group()"
    if ctx is None:
        raise RuntimeError(f"{where} before setup() (in the file's import or get_benchmark()): perflab joins the "
                           "ranks' default group just before setup(); call it in setup(), or not at all")  # fmt: skip
    ours = _STATE["harness"]
    if not _backend_ok(backend, ours, ctx.device.type):
        raise ValueError(
            f"{where}: backend={backend!r}, but this variant's ranks run on {ctx.device.type} with "
            f"perflab's {ours!r} group; accepted: None, {ours!r}, {ctx.device.type + ':' + ours!r}"
        )
    for name, value, accepted in (("world_size", world_size, ctx.world_size), ("rank", rank, ctx.rank)):
        if value not in (-1, accepted):
            raise ValueError(
                f"{where}: {name}={value}, but perflab runs this variant as {ctx.world_size} ranks "
                f"(BenchmarkConfig(world_size=...)); accepted: {accepted}, or leave it out"
            )
    ctx.record("process_group", f"perflab's ({ours}), joined by the benchmark's init_process_group()")


def _backend_ok(backend: str | None, ours: str, device_type: str) -> bool:
    """Whether the benchmark's ``backend`` names the harness's group: ``ours``, or a per-device list ("cpu:gloo,
    cuda:nccl") whose entry for this rank's device is ``ours``."""
    if not backend:
        return True
    parts = backend.lower().replace(" ", "").split(",")
    entries = dict(e.split(":", 1) if ":" in e else (device_type, e) for e in parts)
    return entries.get(device_type) == ours


def _destroy(group: Any = None) -> None:
    import torch.distributed as dist

    if group is None or group is dist.GroupMember.WORLD:
        return  # the group stays up for the harness until the rank ends
    _REAL.get("destroy", dist.destroy_process_group)(group)
