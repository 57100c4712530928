"""The same loop with ``expandable_segments:True`` (``PYTORCH_CUDA_ALLOC_CONF``, set here through
``torch.cuda.memory._set_allocator_settings`` before the variant allocates).

The one idea: one segment per stream, reserved as virtual address space and backed by physical pages as it
grows (cuMemMap); blocks freed next to each other merge into holes that later, larger requests fit, and a
request that fits nowhere extends the segment instead of asking for a new one. Reserved memory stays within a
small multiple of what is allocated at once.

Predicted on an H100 or H200 (not measured): reserved ~1.5-3 GB (the live buffers, the source and the holes
between them) against ~20 GB: ~7-13x less. The mapping calls cost some time: the loop may be a few
per cent slower. Outputs equal to the baseline's. Clock: wall.
"""

from chapters.ch13.memory import Fragmentation


def get_benchmark() -> Fragmentation:
    return Fragmentation(expandable=True)
