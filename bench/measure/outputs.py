"""How a variant's outputs travel from its child to the comparison: one raw file per tensor.

The child copies each output tensor straight into a file mapped into memory (``torch.from_file(...,
shared=True)``): for a GPU tensor one device-to-host copy into the page cache, no host tensor in
between, no serialisation. The comparison maps the files back (``shared=False``: copy-on-write, read
in place). Shapes and dtypes travel in the result (``OutputInfo.tensors``), so a file is nothing but
the elements, contiguous, in the tensor's dtype. On the 2-core CI machine a 256 MiB fp32 output took
1.06 s the old way (``.to("cpu")`` then ``torch.save``), 0.46 s this way.

A DTensor (a tensor sharded over a variant's ranks: FSDP2's parameters and gradients, ``distribute_tensor``) is
compared as the whole tensor it stands for (``whole``): each rank's output gathered (``full_tensor()``, a
collective every rank makes at the same point), so a sharded side compares with a replicated one and with another
sharding. What the harness watches or changes in place is each rank's own shard (``local``).
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections.abc import Sequence
from typing import Any


def _is_dtensor(t: Any) -> bool:
    # none exists unless torch.distributed.tensor was imported: no import of it here for a plain tensor
    dtensor = sys.modules.get("torch.distributed.tensor")
    return dtensor is not None and isinstance(t, dtensor.DTensor)


def local(t: Any) -> Any:
    """This rank's shard of a DTensor (its storage: an in-place change of it changes the DTensor); ``t`` else."""
    return t.to_local() if _is_dtensor(t) else t


def writable(t: Any) -> contextlib.AbstractContextManager[Any]:
    """Where the harness writes into a benchmark's tensor ``t`` in place (NaN into an output, changed inputs, a
    restore): inside ``torch.inference_mode()`` when ``t`` is an inference tensor (made under it: a call decorated
    ``@torch.inference_mode()`` returns them), which torch lets no in-place write touch outside it; as it is else."""
    import torch

    return torch.inference_mode() if t.is_inference() else contextlib.nullcontext()


def whole(tensors: Sequence[Any]) -> list[Any]:
    """``tensors``, each DTensor as the whole tensor (``full_tensor()``: every rank must call this together)."""
    return [t.full_tensor() if _is_dtensor(t) else t for t in tensors]


def _file(directory: str, index: int) -> str:
    return os.path.join(directory, f"output-{index}.bin")


def save(tensors: Sequence[Any], directory: str) -> list[dict[str, Any]]:
    """Write ``tensors`` (any device) under ``directory``; their shape, dtype and device, in order."""
    import torch

    os.makedirs(directory, exist_ok=True)
    infos = []
    for i, t in enumerate(tensors):
        t = t.detach()
        if t.layout != torch.strided:
            t = t.to_dense()  # sparse and other layouts: compared as the values they stand for
        path = _file(directory, i)
        if os.path.exists(path):
            os.unlink(path)  # from_file maps an existing file as it is: start from nothing
        mapped = torch.from_file(path, shared=True, size=t.numel(), dtype=t.dtype)
        mapped.copy_(t.reshape(-1))
        del mapped  # unmapped: the elements are in the file
        infos.append({"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""), "device": str(t.device)})
    return infos


def load(directory: str, infos: Sequence[dict[str, Any]]) -> list[Any]:
    """The tensors ``save`` wrote (``infos``: what it returned), on the CPU, mapped from their files (not
    read into fresh memory)."""
    import torch

    return [
        torch.from_file(
            _file(directory, i), shared=False, size=math.prod(info["shape"]), dtype=getattr(torch, info["dtype"])
        ).view(info["shape"])
        for i, info in enumerate(infos)
    ]
