"""Chapter 5's GPUDirect Storage pair (``gds``): one file read whole into device memory, through a page-locked host
buffer and a copy, or by cuFile (``cuda.bindings.cufile``, the ``nvidia-cufile`` library) straight into the
device buffer.

cuFile runs in one of two modes, and the result says which (``size.cufile_mode``, from cuFile's own driver
properties): **GDS**, where the nvidia-fs kernel driver is loaded and the file's filesystem supports it (local
NVMe, some parallel filesystems): the drive's DMA engine writes into GPU memory through the PCIe BAR, no host
memory touched; or **compatibility mode** (no nvidia-fs, or a filesystem it does not support): cuFile reads with
POSIX calls into its own page-locked bounce buffers and copies them to the device, the baseline's path inside a
library, with its own threads and chunking. A host without a GPU or without libcufile skips the cuFile side with
the reason.

Both sides read the same file descriptor: opened with O_DIRECT where the filesystem takes it (GDS needs it; the
page cache is bypassed on both sides, so both read the drive), else buffered (then both read the warm page
cache, and cuFile can only run in compatibility mode); ``size.io`` says which. ``TMPDIR`` chooses the filesystem.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import time
from pathlib import Path
from typing import Any

import torch

from bench import context
from chapters.ch01.common import stated_ceiling
from chapters.ch05.common import FileBenchmark, write_stream

ALIGN = 4096  # O_DIRECT: buffer address, file offset and length in multiples of the logical block (<= 4 KiB)


def open_file(path: Path) -> tuple[int, str]:
    """``path`` opened read-only with O_DIRECT where its filesystem allows it (tmpfs does not), else buffered."""
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECT), "O_DIRECT (the drive, no page cache)"
    except OSError:
        return os.open(path, os.O_RDONLY), "buffered (the filesystem refuses O_DIRECT: the warm page cache)"


def pread_into(fd: int, host: torch.Tensor) -> None:
    """The file from offset 0 into ``host`` (uint8, page-aligned), one ``preadv`` per piece the kernel returns."""
    view, done = memoryview(host.numpy()), 0
    while done < len(view):
        got = os.preadv(fd, [view[done:]], done)
        if got <= 0:
            raise OSError(f"preadv returned {got} at offset {done} of {len(view)} bytes")
        done += got


def aligned_host(nbytes: int, pinned: bool) -> tuple[torch.Tensor, Any]:
    """A page-aligned uint8 host buffer (O_DIRECT's requirement): page-locked by CUDA (cudaHostAlloc returns whole
    pages) or, without a GPU, an anonymous mapping. Returns the tensor and what keeps its memory alive."""
    if pinned:
        host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
        keep: Any = None
    else:
        keep = mmap.mmap(-1, nbytes)
        host = torch.frombuffer(keep, dtype=torch.uint8)
    if host.data_ptr() % ALIGN:
        context().skip(f"the host buffer is at {host.data_ptr():#x}, not {ALIGN}-byte aligned: O_DIRECT needs it")
    return host, keep


class CuFile:
    """A cuFile session on one file descriptor and one device buffer: the driver opened, the file handle and the
    buffer registered; ``read()`` fills the buffer from the file; ``close()`` releases all of it. ``mode`` says
    which path cuFile takes, from its own driver properties."""

    def __init__(self, fd: int, out: torch.Tensor, directory: Path) -> None:
        ctx = context()
        ctx.require(cuda=True, modules=("cuda.bindings.cufile",))
        from cuda.bindings import cufile

        self.cufile, self.out, self.fh, self.registered = cufile, out, None, False
        try:
            self.configure(directory)
            cufile.driver_open()
        except Exception as exc:  # noqa: BLE001 - libcufile absent (DynamicLibNotFoundError) or the driver refused
            ctx.skip(f"cuFile could not open: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
        try:
            self.mode = self.report()
        except Exception as exc:  # noqa: BLE001 - an unreadable report is recorded as such, never guessed
            self.mode = str(ctx.record("cufile_mode", f"not reported: {type(exc).__name__}: {exc}"))
        descr = cufile.Descr()
        descr.type = cufile.FileHandleType.OPAQUE_FD
        descr.handle.fd = fd
        try:
            self.fh = cufile.handle_register(descr.ptr)
        except Exception as exc:  # noqa: BLE001 - e.g. GDS mode on a file opened without O_DIRECT
            self.close()
            ctx.skip(f"cuFile refused the file ({self.mode}): {type(exc).__name__}: {exc}")
        cufile.buf_register(out.data_ptr(), out.numel(), 0)  # pinned for the DMA once, not per read
        self.registered = True

    def configure(self, directory: Path) -> None:
        """Before the driver opens: let cuFile fall back to its POSIX path where GDS cannot run, and keep its log
        (``cufile.log``, by default in the working directory) in the variant's temporary directory."""
        cufile = self.cufile
        if hasattr(cufile, "set_parameter_bool"):
            cufile.set_parameter_bool(cufile.BoolConfigParameter.PROPERTIES_ALLOW_COMPAT_MODE, True)
        if hasattr(cufile, "set_parameter_string"):
            self.log_dir = ctypes.create_string_buffer(str(directory).encode())  # cuFile may keep the pointer
            cufile.set_parameter_string(cufile.StringConfigParameter.LOG_DIR, ctypes.addressof(self.log_dir))

    def report(self) -> str:
        """cuFile's own account of its mode: the nvidia-fs driver's version from cuFileDriverGetProperties (0.0:
        not loaded) and whether compatibility mode is forced; recorded as ``cufile_mode``."""
        cufile = self.cufile
        props = ctypes.create_string_buffer(512)  # CUfileDrvProps_t (~70 B): nvfs.major_version, minor_version first
        cufile.driver_get_properties(ctypes.addressof(props))
        major, minor = (int.from_bytes(props.raw[i : i + 4], "little") for i in (0, 4))
        forced = False
        getter = getattr(cufile, "get_parameter_bool", None)
        if getter is not None:
            forced = bool(getter(cufile.BoolConfigParameter.FORCE_COMPAT_MODE))
        version = getattr(cufile, "get_version", lambda: 0)()
        if major and not forced:
            mode = f"GDS (nvidia-fs {major}.{minor}, libcufile {version})"
        else:
            why = "forced by its configuration" if forced else "nvidia-fs not loaded"
            mode = f"compatibility: POSIX reads into cuFile's bounce buffers, then copies ({why}; libcufile {version})"
        return str(context().record("cufile_mode", mode))

    def read(self) -> None:
        done, total = 0, self.out.numel()
        while done < total:
            got = self.cufile.read(self.fh, self.out.data_ptr(), total - done, done, done)
            if got <= 0:
                raise OSError(f"cuFileRead returned {got} at offset {done} of {total} bytes ({self.mode})")
            done += got

    def close(self) -> None:
        if self.registered:
            self.cufile.buf_deregister(self.out.data_ptr())
        if self.fh is not None:
            self.cufile.handle_deregister(self.fh)
        self.cufile.driver_close()


class FileToDevice(FileBenchmark):
    """gds: a 256 MiB file (seeded bytes, written and flushed to the drive in setup) read whole into a device buffer
    per call. ``cufile``: by cuFile (``CuFile``); otherwise into a page-aligned page-locked host buffer, then one
    copy to the device. The output is the device buffer (bytes: compared exactly).

    Work: the file's bytes reaching the device. Stated ceiling (on a GPU): the same bytes read by one ``preadv``
    into page-locked memory, timed in setup: the drive's (or page cache's) rate, which neither side can beat."""

    made = ("fd", "io", "out", "host", "keep", "session", "work")

    def __init__(self, cufile: bool) -> None:
        self.cufile = cufile

    def prepare(self, directory: Path) -> None:
        ctx = context()
        if self.cufile:
            ctx.require(cuda=True, modules=("cuda.bindings.cufile",))  # before 256 MiB are written for nothing
        size = ctx.size(256 * 2**20, 37 * ALIGN)
        path = directory / "shard.bin"
        write_stream(path, size, offset=5)
        with open(path, "rb+") as f:
            os.fsync(f.fileno())  # on the drive: an O_DIRECT read must not find it only in the page cache
        self.fd, io = open_file(path)
        self.io = ctx.record("io", io)
        self.out = torch.empty(size, dtype=torch.uint8, device=ctx.device)
        try:
            self.session = CuFile(self.fd, self.out, directory) if self.cufile else None
        except BaseException:  # a skip (cuFile cannot open here) or an error: the descriptor goes with it
            os.close(self.fd)
            del self.fd
            raise
        need_host = not self.cufile or ctx.is_cuda
        self.host, self.keep = aligned_host(size, ctx.is_cuda) if need_host else (None, None)
        self.work: dict[str, Any] = {"bytes": size}
        if ctx.is_cuda:
            read_ms = min(self.timed_read() for _ in range(2))
            gbps = ctx.record("read_gbps", round(size / (read_ms * 1e6), 2))
            what = f"the file read by one preadv into page-locked memory, timed in setup ({gbps} GB/s, {io.split()[0]})"
            self.work |= stated_ceiling(what, read_ms)
        if self.cufile:
            self.host = self.keep = None  # the cuFile side needed it for the ceiling only

    def timed_read(self) -> float:
        start = time.perf_counter()
        pread_into(self.fd, self.host)
        return (time.perf_counter() - start) * 1e3

    def benchmark_fn(self) -> None:
        if self.session is not None:
            # cuFile writes through its own DMA, outside torch's stream: work queued before (a fill of out) first
            torch.cuda.current_stream(self.out.device).synchronize()
            self.session.read()
        else:
            pread_into(self.fd, self.host)
            self.out.copy_(self.host, non_blocking=self.host.is_pinned())

    def close(self) -> None:
        if self.out.is_cuda:
            torch.cuda.synchronize(self.out.device)  # no copy still reading the host buffer
        if getattr(self, "session", None) is not None:
            self.session.close()
        if hasattr(self, "fd"):
            os.close(self.fd)
        self.host = None
        if getattr(self, "keep", None) is not None:
            self.keep.close()
