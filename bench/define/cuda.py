"""CUDA C++ in a chapter file: source compiled at run time with NVRTC, launched on torch tensors.

``cuda_source(code)`` at module level holds the source and compiles nothing. In ``setup()``,
``source.kernel("name")`` compiles it for the device's architecture (``sm_90`` on an H100/H200) to a
CUBIN, loads it and returns a launcher; ``launcher(grid, block, *args)`` runs it on torch's current
stream. Compiling needs only NVRTC (``cuda.bindings`` + the ``nvidia-cuda-nvrtc`` wheel, no GPU, no
nvcc), so the tests compile every chapter's kernels on a CPU host; loading and launching use
``cuda.core`` (0.3+: ``cuda.core.experimental``; 1.x: ``cuda.core``). A host without a GPU or these
packages skips the variant with what is missing.

A CUBIN for the exact architecture, not PTX: the driver JIT-compiles PTX only when it is at least as
new as the NVRTC that wrote it, while a CUBIN loads on any driver of the same CUDA major version.
Compiled code is cached in the process and on disk (``$PERFLAB_CUDA_CACHE``, else
``~/.cache/perflab/cuda``), keyed by the source, the options, the architecture and NVRTC's version,
so only the first run after a change pays for ptxas.

A source made with ``device_runtime=True`` may launch kernels (or graphs) from the device (dynamic parallelism):
NVRTC compiles it as relocatable code (``-rdc=true``) and nvJitLink links the CUBIN with the CUDA device runtime
(``libcudadevrt.a``, found by ``cuda.pathfinder``: CUDA_HOME or the ``nvidia-cuda-runtime`` wheel); a host
without nvJitLink or that library skips the variant, naming them.

Each loaded kernel's resources land in the result's ``sizes`` (MLflow params ``size.cuda.<kernel>.*``):
registers per thread, static shared memory, stack and spilled bytes (ptxas's own report), the
architecture compiled for, and the driver's limit of threads per block at those registers.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from bench.define.context import context
from bench.errors import CudaCompileError

DEFAULT_OPTIONS = ("-std=c++17", "-lineinfo")  # -lineinfo: ncu and compute-sanitizer name source lines
_PTXAS = "--ptxas-options=-v"  # ptxas's resource report in the program log, parsed into KernelResources
_INVALID_OPTION = 5  # NVRTC_ERROR_INVALID_OPTION


@dataclass(frozen=True)
class KernelResources:
    """What ptxas reported for one ``__global__`` function."""

    arch: str  # "sm_90"
    registers: int  # per thread
    shared_bytes: int  # static shared memory per block (dynamic shared memory comes at launch)
    stack_bytes: int  # local memory per thread: stack frame
    spill_bytes: int  # spill stores + spill loads per thread: registers that did not fit
    barriers: int  # named barriers used


@dataclass(frozen=True)
class Compiled:
    """One NVRTC compilation: the image (PTX text or CUBIN), the program log, each kernel's resources."""

    target: Literal["ptx", "cubin"]
    arch: str
    image: bytes
    log: str
    kernels: dict[str, KernelResources]
    nvrtc: str  # NVRTC's version, "13.0"


_compiled: dict[str, Compiled] = {}  # in this process, by cache key


def nvrtc_version() -> str:
    """NVRTC's "major.minor"; ImportError naming the packages when cuda.bindings or NVRTC is absent."""
    nvrtc = _nvrtc()
    try:
        _, major, minor = nvrtc.nvrtcVersion()
    except Exception as exc:  # cuda.pathfinder's DynamicLibNotFoundError: the NVRTC library is not installed
        raise ImportError(f"NVRTC could not be loaded ({exc}); install nvidia-cuda-nvrtc (CUDA 13) or "
                          "nvidia-cuda-nvrtc-cu12 beside cuda-bindings") from exc  # fmt: skip
    return f"{major}.{minor}"


def _nvrtc() -> Any:
    try:
        from cuda.bindings import nvrtc
    except ImportError as exc:
        raise ImportError(f"CUDA C++ kernels need the cuda-bindings package ({exc}): pip install cuda-bindings "
                          "nvidia-cuda-nvrtc (or pip install -e '.[test]')") from exc  # fmt: skip
    return nvrtc


def _check(result: Any, what: str) -> Any:
    """NVRTC's (status, values...) tuple: the values, or a CudaCompileError naming the call and the status."""
    status, *values = result if isinstance(result, tuple) else (result,)
    if int(status) != 0:
        raise CudaCompileError(f"NVRTC {what} failed: {status!r}")
    return values[0] if len(values) == 1 else values


class CudaSource:
    """CUDA C++ source of one or more ``extern "C" __global__`` kernels; compiled on first use."""

    def __init__(self, code: str, *, name: str = "kernels.cu", options: Sequence[str] = (),
                 capability: tuple[int, int] = (7, 0), device_runtime: bool = False) -> None:  # fmt: skip
        if not isinstance(code, str) or "__global__" not in code:
            raise ValueError(f"cuda_source({name!r}): the code must be CUDA C++ text with a __global__ function")
        self.code = code
        self.name = name
        self.device_runtime = device_runtime  # relocatable, linked with libcudadevrt: kernels launched on the device
        self.options = tuple(DEFAULT_OPTIONS) + tuple(options) + (("-rdc=true",) if device_runtime else ())
        self.capability = tuple(capability)  # the oldest GPU the code compiles for (9, 0: clusters, Hopper)

    def kernel_names(self) -> list[str]:
        """The ``extern "C"`` kernels the source defines (their names are not mangled, so they load by name)."""
        plain = re.sub(r"__(?:launch_bounds|cluster_dims)__\s*\([^)]*\)", " ", self.code)
        return re.findall(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(', plain)

    def compile(self, arch: str, target: Literal["ptx", "cubin"] = "cubin") -> Compiled:
        """Compile for ``arch`` ("sm_90"); cached in the process and on disk. CudaCompileError with NVRTC's log."""
        if not re.fullmatch(r"sm_\d+[af]?", arch):
            raise ValueError(f"arch={arch!r}: an NVRTC real architecture such as 'sm_90' or 'sm_90a'")
        if target not in ("ptx", "cubin"):
            raise ValueError(f"target={target!r}: 'ptx' or 'cubin'")
        version = nvrtc_version()
        key = hashlib.sha256(json.dumps([self.code, self.options, arch, target, version]).encode()).hexdigest()
        if key not in _compiled:
            _compiled[key] = _load_cached(key) or _store(key, self._nvrtc_compile(arch, target, version))
        return _compiled[key]

    def _nvrtc_compile(self, arch: str, target: Literal["ptx", "cubin"], version: str) -> Compiled:
        """One NVRTC run; with ptxas's resource report where this NVRTC takes the option (without it, the driver's
        attributes stand in when the kernel loads: CudaKernel.resources)."""
        nvrtc = _nvrtc()
        for report in ((_PTXAS,), ()):
            prog = _check(nvrtc.nvrtcCreateProgram(self.code.encode(), self.name.encode(), 0, [], []), "create")
            try:
                opts = [o.encode() for o in (f"--gpu-architecture={arch}", *self.options, *report)]
                status = int(nvrtc.nvrtcCompileProgram(prog, len(opts), opts)[0])
                log = _read(nvrtc, prog, "ProgramLog")
                if status == _INVALID_OPTION and report:
                    continue
                if status != 0:
                    raise CudaCompileError(
                        f"{self.name} did not compile for {arch} (NVRTC {version}, options {' '.join(self.options)}):"
                        f"\n{log.strip()}"
                    )
                image = _read(nvrtc, prog, "PTX" if target == "ptx" else "CUBIN", text=False)
                if self.device_runtime and target == "cubin":
                    image = link_device_runtime(image, arch, self.name)
                return Compiled(target, arch, image, log, parse_ptxas(log, arch), version)
            finally:
                nvrtc.nvrtcDestroyProgram(prog)
        raise CudaCompileError(f"{self.name}: NVRTC {version} refused the options {' '.join(self.options)}:\n{log}")

    def kernel(self, name: str) -> CudaKernel:
        """The kernel ``name`` loaded on the run's GPU, its resources recorded in the result. Skips the variant
        (with what is missing) on a host without a CUDA GPU, cuda.core or NVRTC."""
        ctx = context()
        ctx.require(cuda=True, capability=self.capability, modules=("cuda.bindings", "cuda.core"))
        try:
            nvrtc_version()
        except ImportError as exc:
            ctx.skip(str(exc))
        if name not in self.kernel_names():
            raise ValueError(f'{self.name}: no extern "C" __global__ kernel {name!r}; it defines {self.kernel_names()}')
        major, minor = ctx.facts.capability if ctx.facts and ctx.facts.capability else (0, 0)
        try:
            compiled = self.compile(f"sm_{major}{minor}", "cubin")
        except ImportError as exc:  # device_runtime: nvJitLink or libcudadevrt absent
            ctx.skip(str(exc))
        kernel = CudaKernel(compiled, name, ctx.device)
        for field, value in kernel.resources(compiled).items():
            ctx.record(f"cuda.{name}.{field}", value)
        ctx.record("cuda.nvrtc", compiled.nvrtc)
        return kernel


def cuda_source(code: str, *, name: str = "kernels.cu", options: Sequence[str] = (),
                capability: tuple[int, int] = (7, 0), device_runtime: bool = False) -> CudaSource:  # fmt: skip
    """CUDA C++ ``code`` for a chapter file (kernels declared ``extern "C" __global__``), compiled on first use.

    ``name`` is the file name NVRTC's messages give; ``options`` go to NVRTC after ``-std=c++17 -lineinfo``;
    ``capability``: the oldest GPU the code is for (a variant on an older one is skipped, saying so).
    The code may use any builtin (``__shfl_sync``, ``__cluster_map_shared_rank``, ...) but no header outside
    NVRTC's own: the GPU image has no CUDA include directory. ``device_runtime``: the code launches kernels or
    graphs from the device (``child<<<...>>>``, ``cudaGraphLaunch``), linked with the device runtime."""
    return CudaSource(code, name=name, options=options, capability=capability, device_runtime=device_runtime)


def device_runtime_library() -> str:
    """The path of ``libcudadevrt.a``: cuda.pathfinder's (CUDA_HOME, CUDA_PATH or a wheel), else the
    ``nvidia-cuda-runtime`` wheel's in site-packages; ImportError naming the package when there is none."""
    import site

    try:
        from cuda.pathfinder import find_static_lib

        return str(find_static_lib("cudadevrt"))
    except Exception:  # noqa: BLE001 - an older pathfinder without it, or StaticLibNotFoundError: look in the wheels
        pass
    for base in (*site.getsitepackages(), site.getusersitepackages()):
        for found in sorted(Path(base).glob("nvidia/*/lib/libcudadevrt.a")):
            return str(found)
    raise ImportError("libcudadevrt.a (the CUDA device runtime) was not found: install nvidia-cuda-runtime (CUDA 13), "
                      "which ships it, or set CUDA_HOME")  # fmt: skip


def link_device_runtime(cubin: bytes, arch: str, name: str) -> bytes:
    """Relocatable ``cubin`` linked by nvJitLink with the device runtime: the CUBIN a device-side launch needs."""
    try:
        from cuda.bindings import nvjitlink

        handle = nvjitlink.create(1, [f"-arch={arch}"])
    except Exception as exc:  # ImportError, or cuda.pathfinder's DynamicLibNotFoundError: no libnvJitLink
        raise ImportError(f"nvJitLink could not be loaded ({str(exc).splitlines()[0]}); install nvidia-nvjitlink "
                          "(CUDA 13) beside cuda-bindings") from exc  # fmt: skip
    try:
        library = device_runtime_library()
        nvjitlink.add_data(handle, nvjitlink.InputType.CUBIN, cubin, len(cubin), name)
        nvjitlink.add_file(handle, nvjitlink.InputType.LIBRARY, library)
        try:
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as exc:
            log = bytearray(nvjitlink.get_error_log_size(handle))
            nvjitlink.get_error_log(handle, log)
            raise CudaCompileError(f"{name}: nvJitLink could not link it with {library} for {arch}: {exc}\n"
                                   f"{log.decode(errors='replace').strip()}") from exc  # fmt: skip
        linked = bytearray(nvjitlink.get_linked_cubin_size(handle))
        nvjitlink.get_linked_cubin(handle, linked)
        return bytes(linked)
    finally:
        nvjitlink.destroy(handle)


def _read(nvrtc: Any, prog: Any, what: str, text: bool = True) -> Any:
    size = _check(getattr(nvrtc, f"nvrtcGet{what}Size")(prog), f"get {what} size")
    buf = b" " * size
    _check(getattr(nvrtc, f"nvrtcGet{what}")(prog, buf), f"get {what}")
    return buf.rstrip(b"\0").decode(errors="replace") if text else buf


_ENTRY = re.compile(r"Compiling entry function '(\w+)' for '(\w+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:, used (\d+) barriers)?(?:, (\d+) bytes smem)?")


def parse_ptxas(log: str, arch: str) -> dict[str, KernelResources]:
    """Each entry function's resources from ptxas's ``-v`` report in an NVRTC log."""
    out: dict[str, KernelResources] = {}
    entry: str | None = None
    frame = (0, 0, 0)
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            entry, frame = m.group(1), (0, 0, 0)
        elif entry and (m := _FRAME.search(line)):
            frame = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
        elif entry and (m := _USED.search(line)):
            regs, barriers, smem = (int(g or 0) for g in m.groups())
            out[entry] = KernelResources(arch, regs, smem, frame[0], frame[1] + frame[2], barriers)
            entry = None
    return out


def cache_dir() -> Path:
    """``$PERFLAB_CUDA_CACHE``, else ``~/.cache/perflab/cuda``."""
    env = os.environ.get("PERFLAB_CUDA_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "perflab" / "cuda"


def _load_cached(key: str) -> Compiled | None:
    meta, image = cache_dir() / f"{key}.json", cache_dir() / f"{key}.bin"
    try:
        m = json.loads(meta.read_text())
        kernels = {k: KernelResources(**v) for k, v in m["kernels"].items()}
        return Compiled(m["target"], m["arch"], image.read_bytes(), m["log"], kernels, m["nvrtc"])
    except (OSError, ValueError, KeyError, TypeError):  # absent or unreadable: compile again
        return None


def _store(key: str, compiled: Compiled) -> Compiled:
    """Write ``compiled`` under ``key`` (image first, its metadata last, each replaced whole); a cache that cannot
    be written costs the next process a compile, nothing more."""
    meta = {k: v for k, v in asdict(compiled).items() if k != "image"}
    try:
        cache_dir().mkdir(parents=True, exist_ok=True)
        for suffix, data in ((".bin", compiled.image), (".json", json.dumps(meta).encode())):
            tmp = cache_dir() / f"{key}{suffix}.{os.getpid()}"
            tmp.write_bytes(data)
            os.replace(tmp, cache_dir() / f"{key}{suffix}")
    except OSError:
        pass
    return compiled


def _core() -> Any:
    """cuda.core's namespace: ``cuda.core`` from 0.4/1.x, ``cuda.core.experimental`` in 0.3."""
    import cuda.core as core

    if hasattr(core, "launch"):
        return core
    from cuda.core import experimental

    return experimental


class CudaKernel:
    """A loaded kernel: ``kernel(grid, block, *args, shared_bytes=0, stream=None)`` launches it.

    Arguments: torch tensors on the kernel's device (passed as their data pointer; they must be contiguous) and
    numpy scalars (``np.int32(n)``, ``np.float32(a)``; a raw pointer as ``np.uint64``) of the exact C++ types.
    A Python int or float is refused: cuda.core would pass it as 64 bits, wrong for an ``int`` or ``float``."""

    def __init__(self, compiled: Compiled, name: str, device: Any) -> None:
        self.name, self.device = name, device
        core = _core()
        core.Device(device.index).set_current()  # the primary context torch already made current
        try:
            self._module = core.ObjectCode.from_cubin(compiled.image)  # held: the module lives as long as the kernel
            self._kernel = self._module.get_kernel(name)
        except Exception as exc:
            major = compiled.nvrtc.split(".")[0]
            raise CudaCompileError(
                f"{name}: the CUBIN from NVRTC {compiled.nvrtc} for {compiled.arch} did not load ({exc}); a CUBIN "
                f"loads on a driver of CUDA {major}.x or newer, for the GPU's own architecture"
            ) from exc
        self._streams: dict[int, Any] = {}

    def attribute(self, name: str) -> int:
        """A driver attribute of the loaded kernel (``num_regs``, ``shared_size_bytes``, ``local_size_bytes``,
        ``max_threads_per_block``): a method in cuda.core 0.3, a property in later versions."""
        value = getattr(self._kernel.attributes, name)
        return int(value() if callable(value) else value)

    def resources(self, compiled: Compiled) -> dict[str, int | str]:
        """What is recorded with the run: ptxas's report (registers, static shared memory, stack, spills), the
        driver's own figures where ptxas said nothing, and the threads per block its registers allow."""
        found: dict[str, int | str] = {"arch": compiled.arch}
        if self.name in compiled.kernels:
            found.update(asdict(compiled.kernels[self.name]))
        else:
            found.update(registers=self.attribute("num_regs"), shared_bytes=self.attribute("shared_size_bytes"),
                         stack_bytes=self.attribute("local_size_bytes"))  # fmt: skip
        found["max_threads_per_block"] = self.attribute("max_threads_per_block")
        return found

    def __call__(self, grid: int | tuple[int, ...], block: int | tuple[int, ...], *args: Any,
                 shared_bytes: int = 0, stream: Any = None) -> None:  # fmt: skip
        import torch

        core = _core()
        handle = (stream or torch.cuda.current_stream(self.device)).cuda_stream
        if handle not in self._streams:
            self._streams[handle] = _wrap_stream(core, self.device.index, handle)
        config = core.LaunchConfig(grid=grid, block=block, shmem_size=shared_bytes)
        core.launch(self._streams[handle], config, self._kernel, *(self._arg(i, a) for i, a in enumerate(args)))

    def _arg(self, i: int, value: Any) -> Any:
        import numpy as np
        import torch

        if isinstance(value, torch.Tensor):
            if value.device != self.device or not value.is_contiguous():
                raise ValueError(
                    f"{self.name} argument {i}: a tensor on {value.device} with strides {value.stride()}; the "
                    f"kernel reads raw memory: it needs a contiguous tensor on {self.device}"
                )
            return np.uint64(value.data_ptr())  # a pointer parameter: 8 bytes through numpy, on every version
        if isinstance(value, (bool, int, float)):
            raise TypeError(f"{self.name} argument {i}: {type(value).__name__} {value!r}; pass a numpy scalar of the "
                            "parameter's C++ type (np.int32, np.int64, np.float32, ...)")  # fmt: skip
        return value


class _Foreign:
    """A stream handle through cuda.core's ``__cuda_stream__`` protocol (version 0, the handle)."""

    def __init__(self, handle: int) -> None:
        self.handle = handle

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.handle)


def _wrap_stream(core: Any, index: int, handle: int) -> Any:
    """torch's stream ``handle`` as a cuda.core Stream that does not own it: ``Stream.from_handle`` where the version
    has it, else ``Device.create_stream`` over the ``__cuda_stream__`` protocol (both since cuda.core 0.2)."""
    from_handle = getattr(core.Stream, "from_handle", None)
    if from_handle is not None:
        return from_handle(handle)
    return core.Device(index).create_stream(_Foreign(handle))
