"""Triton's CPU interpreter (``TRITON_INTERPRET=1``) made to read a scalar the same way in every Triton release.

A kernel's scalar (``tl.program_id(0) * BLOCK``) is, under the interpreter, a tensor over a one-element numpy
array; a Python ``range`` over it asks for ``__index__``. Triton 3.6's interpreter answers ``int(data)``, which
numpy 2.4 refuses for an array of one dimension ("only 0-dimensional arrays can be converted to Python scalars");
Triton 3.9 squeezes the array first. ``mend()`` gives the older interpreters the newer answer, so a causal loop
``for start in range(0, pid * BLOCK_M, BLOCK_N)`` runs on the CPU whichever Triton is installed. Compiled kernels
are untouched: only the interpreter's per-launch patch of ``tl.tensor`` is wrapped.

``mend()`` also checks every load, store and atomic an interpreted kernel makes (the elements its mask keeps)
against the memory of the tensors handed to the launch: an access outside all of them raises ``OutOfBounds``
naming the kernel, the program, the access and the nearest tensor, before it is made. A GPU reports such an access
only under compute-sanitizer; the interpreter reads or writes the host's memory there, whatever lies at that
address (a wrong value, or a crash of the whole process). A kernel may only reach memory through its arguments
here: an address made from an integer argument is refused like any other.
"""

from __future__ import annotations

import threading
from typing import Any


def _index(self: Any) -> int:
    import numpy as np

    return int(np.asarray(self.handle.data).squeeze())


def mend() -> bool:
    """Wrap the interpreter's ``_patch_lang_tensor`` so ``__index__`` squeezes; False where there is nothing to
    mend (no Triton, no such function, or mended already). Idempotent; safe to call in any process."""
    try:
        import triton.runtime.interpreter as interpreter
    except Exception:  # noqa: BLE001 - no Triton (or one that fails to import): nothing interprets kernels here
        return False
    original = getattr(interpreter, "_patch_lang_tensor", None)
    if original is None or getattr(original, "perflab_mended", False):
        return False

    def patch_lang_tensor(tensor: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(tensor, *args, **kwargs)
        # after the interpreter's own patch (its scope, where there is one, restores the class's attribute as it
        # was before that patch when the launch ends)
        tensor.__index__ = _index
        return result

    patch_lang_tensor.perflab_mended = True  # type: ignore[attr-defined]
    interpreter._patch_lang_tensor = patch_lang_tensor
    _guard_memory(interpreter)
    return True


class OutOfBounds(IndexError):
    """An interpreted kernel's load, store or atomic outside every tensor handed to its launch."""


_launch = threading.local()  # the running launch: its kernel's name and its tensors' memory (``_guard_memory``)


def _guard_memory(interpreter: Any) -> None:
    """Each launch's tensors' memory noted; the builder's masked loads, stores and atomics checked against it."""
    executor, builder = getattr(interpreter, "GridExecutor", None), getattr(interpreter, "InterpreterBuilder", None)
    wrapped = {
        executor: ("__call__", "_init_args_hst"),
        builder: ("create_masked_load", "create_masked_store", "create_atomic_rmw", "create_atomic_cas"),
    }
    if not all(hasattr(owner, name) for owner, names in wrapped.items() for name in names):
        return  # an interpreter unlike Triton 3.6-3.9's: its scalars mended, its accesses not checked
    call, to_host = executor.__call__, executor._init_args_hst
    load, store = builder.create_masked_load, builder.create_masked_store
    rmw, cas = builder.create_atomic_rmw, builder.create_atomic_cas

    def launch(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return call(self, *args, **kwargs)
        finally:
            _launch.memory = None

    def args_on_host(self: Any, args: Any, kwargs: Any) -> Any:
        """The launch's arguments as the kernel sees them: a GPU tensor's storage copied to the host."""
        import numpy as np

        on_host, kwargs_on_host = to_host(self, args, kwargs)
        named = [*zip(self.arg_names, on_host, strict=False), *kwargs_on_host.items()]
        _launch.kernel, _launch.memory = getattr(self.fn, "__name__", "kernel"), _memory_of(named)
        _launch.starts, _launch.ends = (np.array([m[i] for m in _launch.memory], dtype=np.uint64) for i in (0, 1))
        return on_host, kwargs_on_host

    def masked_load(self: Any, ptrs: Any, mask: Any, *args: Any, **kwargs: Any) -> Any:
        _check("load", self, ptrs, mask)
        return load(self, ptrs, mask, *args, **kwargs)

    def masked_store(self: Any, ptrs: Any, value: Any, mask: Any, *args: Any, **kwargs: Any) -> Any:
        _check("store", self, ptrs, mask)
        return store(self, ptrs, value, mask, *args, **kwargs)

    def atomic_rmw(self: Any, op: Any, ptr: Any, val: Any, mask: Any, *args: Any, **kwargs: Any) -> Any:
        _check("atomic", self, ptr, mask)
        return rmw(self, op, ptr, val, mask, *args, **kwargs)

    def atomic_cas(self: Any, ptr: Any, *args: Any, **kwargs: Any) -> Any:
        _check("atomic", self, ptr, None)
        return cas(self, ptr, *args, **kwargs)

    executor.__call__, executor._init_args_hst = launch, args_on_host
    builder.create_masked_load, builder.create_masked_store = masked_load, masked_store
    builder.create_atomic_rmw, builder.create_atomic_cas = atomic_rmw, atomic_cas


def _memory_of(named: list[tuple[str, Any]]) -> list[tuple[int, int, str]]:
    """(start, end, what) of each tensor's whole storage among a launch's arguments (in tuples and descriptors
    too), sorted by start: the interpreter copies whole storages to the host and back."""
    found: dict[int, tuple[int, int, str]] = {}

    def visit(name: str, arg: Any) -> None:
        if isinstance(arg, tuple | list):
            for i, item in enumerate(arg):
                visit(f"{name}[{i}]", item)
        elif hasattr(arg, "base") and hasattr(arg, "block_shape"):  # a TensorDescriptor
            visit(name, arg.base)
        elif hasattr(arg, "untyped_storage"):
            storage = arg.untyped_storage()
            what = f"{name} ({str(arg.dtype).removeprefix('torch.')}{list(arg.shape)}, {storage.nbytes()} bytes)"
            found.setdefault(storage.data_ptr(), (storage.data_ptr(), storage.data_ptr() + storage.nbytes(), what))

    for name, arg in named:
        visit(name, arg)
    return sorted(found.values())


def _check(kind: str, builder: Any, ptrs: Any, mask: Any) -> None:
    memory = getattr(_launch, "memory", None)
    if memory is None:  # a builder call outside a launch seen here
        return
    import numpy as np

    address = np.asarray(ptrs.data).astype(np.uint64, copy=False)
    if mask is not None:
        address = address[np.broadcast_to(np.asarray(mask.data, dtype=bool), address.shape)]
    address = address.ravel()
    if address.size == 0:
        return
    size = np.dtype(_element_dtype(ptrs)).itemsize
    starts, ends = _launch.starts, _launch.ends
    at = np.searchsorted(starts, address, side="right") - 1
    inside = (at >= 0) & (address + np.uint64(size) <= ends[np.maximum(at, 0)]) if memory else at >= 0
    if inside.all():
        return
    first = int(np.argmin(inside))
    bad, below = int(address[first]), int(at[first])
    # the nearest tensor: the one below the address (past its end) or the one above it (before its start)
    past = bad + size - int(ends[below]) if below >= 0 else None
    before = int(starts[below + 1]) - bad if below + 1 < len(memory) else None
    if past is not None and (before is None or past <= before):
        where = f"{past} bytes past the end of {memory[below][2]}"
    elif before is not None:
        where = f"{before} bytes before {memory[below + 1][2]}"
    else:
        where = "the launch was handed no tensor"
    program = tuple(int(i) for i in builder.grid_idx) if builder.grid_idx is not None else ()
    raise OutOfBounds(f"kernel {_launch.kernel!r}, program {program}: a {size}-byte {kind} at {bad:#x} "
                      f"({int((~inside).sum())} of {address.size} elements out of bounds): {where}")  # fmt: skip


def _element_dtype(ptrs: Any) -> Any:
    from triton.runtime.interpreter import _get_np_dtype

    return _get_np_dtype(ptrs.get_element_ty())
