"""Which workers a suite runs on: one per GPU (``--gpus``, default every visible GPU) or ``--jobs N`` on a CPU,
decided without importing torch in the command's process where NVML can answer."""

from __future__ import annotations

import os

from bench.errors import PerflabError


def check_workers(gpus: str | None, jobs: int | None, device: str | None = None) -> list[str] | None:
    """The GPU indices of ``--gpus`` (None without it); errors in the flags, before anything starts. With the
    suite's ``device`` (not ``cpu``): indices this host does not have, too."""
    if gpus is None:
        return None
    ids = [g.strip() for g in gpus.split(",") if g.strip()]
    if not ids or not all(g.isdigit() for g in ids):
        raise PerflabError(f"--gpus {gpus!r} is not a comma-separated list of GPU indices such as '0,1'")
    if jobs is not None:
        raise PerflabError("--gpus and --jobs exclude each other: --gpus runs one worker per GPU")
    if device is not None and device != "cpu":
        count = cuda_count()
        if not count:
            raise PerflabError(f"--gpus {gpus!r}: this host has no CUDA GPU; on its CPU use --jobs N (with "
                               "--device cpu)")  # fmt: skip
        past = [g for g in ids if int(g) >= count]
        if past:
            raise PerflabError(f"--gpus {gpus!r}: this host has {count} CUDA GPU(s); accepted: indices 0 to "
                               f"{count - 1}")  # fmt: skip
    return ids


def check_count(option: str, count: int | None, least: int = 1) -> None:
    """A worker count given by ``option``: below ``least`` refused, above this host's usable cores warned about,
    each in one line naming the count (more workers than cores still run: they share cores)."""
    from bench.measure.cores import usable_cores

    if count is None:
        return
    cores = usable_cores()
    if count < least:
        raise PerflabError(f"{option} {count}: accepted: {least} or more parallel workers (this host has {cores} "
                           "usable cores)")  # fmt: skip
    if count > cores:
        from bench.cli.output import warning

        warning(f"{option} {count}: more workers than this host's {cores} usable cores; they will share cores")


def check_device(device: str) -> None:
    """A CUDA device (``--device``, a config file's) that this host does not have: one line before anything starts,
    not the same failure at every variant's set-up. Counted as the workers are (``cuda_count``: no torch import
    here where NVML answers). A suite placed by Ray runs where the cluster's GPUs are: its caller skips this."""
    if not device.startswith("cuda"):
        return
    count = cuda_count()
    if not count:
        raise PerflabError(f"device={device!r}: torch sees no CUDA GPU on this host; accepted here: auto, cpu")
    index = device.partition(":")[2]
    if index and int(index) >= count:
        raise PerflabError(f"device={device!r}: this host has {count} CUDA GPU(s); accepted: auto, cpu, cuda, "
                           f"cuda:0 to cuda:{count - 1}")  # fmt: skip


def workers_for(device: str, gpus: str | None, jobs: int | None) -> list[dict[str, str]]:
    """One environment per worker: pinned to a GPU each, or plain CPU jobs."""
    ids = check_workers(gpus, jobs)
    if ids is not None:
        return [{"CUDA_VISIBLE_DEVICES": g} for g in ids]
    if device == "cpu" or not cuda_count():
        return [{} for _ in range(jobs or 1)]
    if jobs is not None and jobs > 1:
        raise PerflabError(
            f"--jobs {jobs} on a GPU run would time variants against each other on one GPU; "
            "use --gpus to run one worker per GPU, or --device cpu"
        )
    if device.startswith("cuda:"):
        return [{}]  # the user picked one device
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    visible_ids = [g.strip() for g in visible.split(",")] if visible else [str(i) for i in range(cuda_count())]
    return [{"CUDA_VISIBLE_DEVICES": g} for g in visible_ids] if len(visible_ids) > 1 else [{}]


def cuda_count() -> int:
    """GPUs a worker each: NVML's count (no torch import in this process: ~4 s on a GPU host), unless
    a GPU is in MIG mode or NVML is missing, where torch answers (MIG instances are not NVML devices)."""
    from bench.isolate.process import cuda_available, cuda_likely, nvml_gpu_count

    if not cuda_likely():
        return 0
    count = nvml_gpu_count()
    if count is not None:
        return count
    if not cuda_available():
        return 0
    import torch

    return torch.cuda.device_count()
