"""What happens before the first variant: the server's Triton mode is guessed without importing torch
in the parent (cuda_likely), and the server warms Triton's per-process caches (bench.isolate.warm) without
initialising CUDA."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from bench.isolate import process

ROOT = Path(__file__).resolve().parents[3]


def _python(code: str, **env: str | None) -> str:
    environ = {k: v for k, v in {**os.environ, "PYTHONPATH": str(ROOT), **env}.items() if v is not None}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environ, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_cuda_likely_does_not_import_torch() -> None:
    code = "import sys; from bench.isolate.process import cuda_likely; cuda_likely(); print('torch' in sys.modules)"
    assert _python(code) == "False"


@pytest.fixture
def fake_torch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Any:
    """A torch package location with or without libtorch_cuda.so, and a fake NVML; returns a setter."""
    import importlib.util

    (tmp_path / "lib").mkdir()
    spec = types.SimpleNamespace(submodule_search_locations=[str(tmp_path)])
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: spec if name == "torch" else real(name, *a))
    monkeypatch.setattr(process, "_CUDA", None)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    process._probe_cuda.cache_clear()  # each case probes its own fake machine
    request.addfinalizer(process._probe_cuda.cache_clear)

    def make(cuda_build: bool, gpus: int) -> None:
        lib = tmp_path / "lib" / "libtorch_cuda.so"
        if cuda_build:
            lib.touch()
        nvml = types.ModuleType("pynvml")
        nvml.nvmlInit = lambda: None  # type: ignore[attr-defined]
        nvml.nvmlShutdown = lambda: None  # type: ignore[attr-defined]
        nvml.nvmlDeviceGetCount = lambda: gpus  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "pynvml", nvml)

    return make


@pytest.mark.parametrize(
    ("cuda_build", "gpus", "visible", "expected"),
    [
        (True, 2, None, True),
        (False, 2, None, False),  # a CPU build of torch sees no GPU
        (True, 0, None, False),
        (True, 2, "", False),  # CUDA_VISIBLE_DEVICES hides every GPU
        (True, 2, "-1", False),
        (True, 2, "1", True),
    ],
)
def test_cuda_likely_guess(
    fake_torch: Any,
    monkeypatch: pytest.MonkeyPatch,
    cuda_build: bool,
    gpus: int,
    visible: str | None,
    expected: bool,
) -> None:
    fake_torch(cuda_build, gpus)
    if visible is not None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert process.cuda_likely() is expected


def test_cuda_likely_defers_to_an_exact_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process, "_CUDA", True)
    assert process.cuda_likely() is True


@pytest.mark.parametrize("cold_start", [pytest.param(True, marks=pytest.mark.slow), False])  # True: a fresh interpreter
def test_a_wrong_cuda_guess_is_caught_and_rerun_cold(
    tmp_path: Path, write_benchmark: Any, monkeypatch: pytest.MonkeyPatch, cold_start: bool
) -> None:
    """Before torch answers, children's environments go by cuda_likely(); guessed wrong (a GPU seen by
    NVML, yet torch without one), the child refuses before its first stage, and the variant re-runs
    cold in the environment torch's answer gives: never a CPU run in compiled-Triton mode."""
    from bench.define.result import VariantSpec
    from bench.isolate.runner import run_variant

    path = write_benchmark(tmp_path / "ch01" / "baseline_guess.py")
    spec = VariantSpec(chapter="ch01", example="guess", variant="baseline", path=str(path))
    monkeypatch.setattr(process, "_CUDA", None)
    monkeypatch.setattr(process, "cuda_likely", lambda: not _torch_cuda())
    layer = {"iterations": 3, "warmup": 1, "min_warmup_seconds": 0.0}
    result = run_variant(spec, tmp_path / "wd", cli_layer=layer, cold_start=cold_start)
    assert result.status == "ok", result.error
    assert result.launch is not None and "guessed" in result.launch
    assert process._CUDA == _torch_cuda()  # asked torch once the guess failed


def _torch_cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def test_server_preloads_the_warm_up_after_triton() -> None:
    from bench.isolate.server import PRELOAD

    assert PRELOAD.index("bench.isolate.warm") > PRELOAD.index("triton")


@pytest.mark.parametrize("bad", [True, False])
def test_a_server_whose_forks_cannot_use_cuda_says_so(monkeypatch: pytest.MonkeyPatch, bad: bool) -> None:
    """torch marks a fork "bad" once the parent asked CUDA anything: such a server would fail every GPU variant."""
    from bench.isolate import serve

    fake = types.SimpleNamespace(_C=types.SimpleNamespace(_cuda_isInBadFork=lambda: bad))
    monkeypatch.setitem(sys.modules, "torch", fake)
    found = serve.bad_fork()
    assert (found is not None) == bad
    assert found is None or "cannot use CUDA" in found


def test_the_servers_preload_leaves_its_forks_able_to_use_cuda() -> None:
    """Every module the server preloads, imported as the server does: a fork after them is not "bad" (importing
    torch._inductor.compile_fx asks CUDA for its devices and was: every GPU variant failed at its set-up)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("a CPU build or host: torch marks no fork bad without CUDA (the check above covers the logic)")
    code = "from bench.isolate import rendezvous, serve\nprint(rendezvous.import_preload(), serve.bad_fork())"
    assert _python(code) == "{} None"


@pytest.mark.parametrize("before", [None, "0"])
def test_the_preload_asks_nvml_whether_cuda_is_there_and_leaves_the_setting_as_it_was(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, before: str | None
) -> None:
    """While the server imports, torch answers ``is_available()`` from NVML (the CUDA runtime's answer would mark
    every fork bad); afterwards the variable is as the caller had it, and a module that fails is named, not raised."""
    from bench.isolate import rendezvous

    (tmp_path / "perflab_probe_seen.py").write_text(
        "import os\nSEEN = os.environ.get('PYTORCH_NVML_BASED_CUDA_CHECK')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(rendezvous, "preload_modules", lambda: ["perflab_probe_seen", "perflab_no_such_module"])
    if before is None:
        monkeypatch.delenv(rendezvous.NVML_CHECK, raising=False)
    else:
        monkeypatch.setenv(rendezvous.NVML_CHECK, before)
    errors = rendezvous.import_preload()
    assert sys.modules["perflab_probe_seen"].SEEN == "1"
    assert list(errors) == ["perflab_no_such_module"] and "ModuleNotFoundError" in errors["perflab_no_such_module"]
    assert os.environ.get(rendezvous.NVML_CHECK) == before


triton = pytest.importorskip("triton")


@pytest.mark.slow  # a fresh interpreter (~7 s); the same facts of the server's own imports: test_preload.py
def test_warm_hashes_triton_once_and_leaves_cuda_alone() -> None:
    """Compiled mode: triton_key() is computed in the server (children inherit it); CUDA untouched."""
    code = (
        "import torch, bench.isolate.warm as w, importlib\n"
        "keys = [getattr(importlib.import_module(m), 'triton_key', None) for m in "
        "('triton.runtime.cache', 'triton.compiler.compiler')]\n"
        "cached = [k.cache_info().currsize for k in keys if k is not None and hasattr(k, 'cache_info')]\n"
        "print(any(n == 1 for n in cached), torch.cuda.is_initialized(), any('triton_key' in x for x in w.WARMED))"
    )
    assert _python(code, TRITON_INTERPRET=None) == "True False True"


def test_warm_leaves_interpreted_triton_alone_and_hashes_torch_for_inductor() -> None:
    """Interpreted kernels are never compiled: nothing of Triton's to warm; CPU Inductor still keys its cache on
    torch's sources."""
    code = "import bench.isolate.warm as w; print(w.WARMED)"
    assert _python(code, TRITON_INTERPRET="1") == "['torch._inductor.codecache.torch_key']"
