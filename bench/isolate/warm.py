"""Imported by the fast path's server after torch, Inductor and triton: fills Triton's and Inductor's
per-process caches that every forked child would otherwise rebuild, without touching CUDA.

The big one is ``triton_key()``: the version hash Triton puts in every compiled kernel's cache key,
a SHA-256 of its own sources *and of libtriton.so* (~500 MB). It is ``lru_cache``d, so a fresh
process pays it at its first kernel launch even when the kernel is in the on-disk cache: 1.26 s on
this project's 2-core CI machine, and the bulk of the ~0.5 s first call of every Triton variant on the
GPU hosts (``time_first_call_ms`` 487-673 ms on the H200 host). Hashed once here, inherited by every
child through fork. ``libcuda_dirs()`` (an ``ldconfig -p`` subprocess) and the modules Triton imports
lazily at the first launch likewise. On the H200 host the first call of a ch07 variant takes 150-200 ms
with triton_key warm, 510-600 ms without.

Nothing here may initialise CUDA (a forked child of a process that did cannot use it): no driver
object, no device query. Under ``TRITON_INTERPRET=1`` kernels are interpreted, never compiled, so
there is nothing of Triton's to warm. Every step is optional: a Triton version without one of these functions
simply leaves that cost to the children.
"""

from __future__ import annotations

import os

LAZY_IMPORTS = ("triton.experimental.gluon",)
WARMED: list[str] = []  # what this process warmed (tests and the probe script read it)


def warm_triton() -> list[str]:
    if os.environ.get("TRITON_INTERPRET", "") == "1":
        return WARMED
    import importlib

    # Modules Triton imports lazily at a process's first launch: triton.experimental.gluon, 0.17 s of
    # the 0.2 s first call left on the H200 host once triton_key was warm (scripts/timing/first_call_probe.py).
    for module in LAZY_IMPORTS:
        try:
            importlib.import_module(module)
        except Exception:  # absent in this Triton version
            continue
        WARMED.append(module)
    for module, name in (
        ("triton.runtime.cache", "triton_key"),  # Triton >= 3.4
        ("triton.compiler.compiler", "triton_key"),  # earlier 3.x (or the same function re-exported: free)
        ("triton.backends.nvidia.driver", "libcuda_dirs"),
    ):
        label = f"{module}.{name}"
        try:
            fn = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
        try:
            fn()
        except Exception:  # no libcuda on a CPU-only machine, an unreadable file: the child pays, as before
            continue
        WARMED.append(label)
    return WARMED


def warm_inductor() -> list[str]:
    """Inductor's ``torch_key()``: a SHA-256 of every source file of torch, in each FX-graph and AOTAutograd cache
    key, computed at a process's first compile even when the graph then comes from the on-disk cache (0.16 s on the
    H200 host, 0.2-0.3 s on the 2-core CPU host). Cached per process, so hashed once here. In both Triton modes: CPU
    Inductor keys its cache on it too. Reads files only: no CUDA."""
    try:
        from torch._inductor.codecache import torch_key
    except ImportError:  # a torch without Inductor
        return WARMED
    torch_key()
    WARMED.append("torch._inductor.codecache.torch_key")
    return WARMED


def warm_harness() -> None:
    """The harness's per-process facts that cannot change while the server lives (the files of what it imported
    are checked before each fork): Triton's version from its package metadata, ~10 ms in every child otherwise;
    the processor's name a CPU variant's context carries (``platform.processor()``, cached once asked: a ``uname -p``
    subprocess, forked from the child's whole address space)."""
    import platform

    from bench.measure.machine import triton_version

    triton_version()
    platform.processor()


warm_triton()
warm_inductor()
warm_harness()
