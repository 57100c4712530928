"""Every CUDA C++ source of the chapters compiles with NVRTC for Hopper (sm_90) on this host, GPU or not: a broken
kernel fails here, in CI. The sources are the ``bench.cuda_source`` objects the chapters' modules define at
module level (``chapters/*/cuda_kernels.py``)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from bench.define.cuda import CudaSource

pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings is in the test extra (pip install -e '.[test]')")

CHAPTERS = Path(__file__).resolve().parents[2] / "chapters"
MODULES = sorted(p for p in CHAPTERS.glob("ch*/*.py") if "cuda_source(" in p.read_text())


def sources() -> list[tuple[str, CudaSource]]:
    found = []
    for path in MODULES:
        module = importlib.import_module(f"chapters.{path.parent.name}.{path.stem}")
        for name, value in vars(module).items():
            values = value.values() if isinstance(value, dict) else [value]
            found += [(f"{path.parent.name}.{path.stem}.{name}", v) for v in values if isinstance(v, CudaSource)]
    return found


SOURCES = sources()


def test_the_chapters_have_cuda_sources() -> None:
    assert len(MODULES) >= 6 and len(SOURCES) >= 7, [m.name for m in MODULES]


@pytest.mark.parametrize(("where", "source"), SOURCES, ids=[f"{w}:{s.name}" for w, s in SOURCES])
def test_every_kernel_compiles_for_sm90_without_spilling(where: str, source: CudaSource) -> None:
    try:
        compiled = source.compile("sm_90")
    except ImportError as exc:  # device_runtime: compiled (a compile error raises first), not linked here
        pytest.skip(f"{where}: compiled as relocatable code, not linked: {exc}")
    names = source.kernel_names()
    assert names and set(compiled.kernels) == set(names), (
        f"{where}: kernels {names}, ptxas reported {compiled.kernels} (NVRTC {compiled.nvrtc}); log:\n{compiled.log}"
    )
    for name, res in compiled.kernels.items():
        assert res.spill_bytes == 0, f"{where}: {name} spills {res.spill_bytes} bytes per thread ({res})"
        assert res.shared_bytes <= 48 * 1024, f"{where}: {name} declares {res.shared_bytes} B of static shared memory"


def test_the_padded_transpose_tile_is_one_column_larger() -> None:
    from chapters.ch07.cuda_kernels import TRANSPOSE_SOURCES

    plain, padded = (TRANSPOSE_SOURCES[p].compile("sm_90").kernels["transpose_tile"] for p in (0, 1))
    assert (plain.shared_bytes, padded.shared_bytes) == (32 * 32 * 4, 32 * 33 * 4)


def test_the_cluster_kernel_declares_its_cluster() -> None:
    from chapters.ch10.cuda_kernels import HISTOGRAM

    ptx = HISTOGRAM.compile("sm_90", "ptx").image.decode()
    entry = ptx[ptx.index(".entry histogram_cluster") :]
    assert ".explicitcluster" in entry and ".reqnctapercluster 4, 1, 1" in entry


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="on a GPU the pair runs (test_all_examples)")
def test_a_cuda_pair_ends_skipped_on_a_cpu_host_with_the_reason(tmp_path) -> None:
    from bench.define.discovery import discover, select
    from bench.isolate.suite import run_suite

    example = select(discover(), ["ch7:bank_conflicts"])
    layer = {"smoke": True, "iterations": 3, "warmup": 1, "min_warmup_seconds": 0.0, "timeout_multiplier": 4.0}
    suite = run_suite(example, cli_layer=layer, workdir=tmp_path)
    assert [v.status for v in suite.variants] == ["skipped", "skipped"]
    assert all("needs a CUDA GPU" in (v.skip_reason or "") for v in suite.variants), suite.variants[0].skip_reason
    assert suite.all_ok


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_the_pair_runs_verifies_and_records_each_kernels_resources(tmp_path) -> None:
    from bench.define.discovery import discover, select
    from bench.isolate.suite import run_suite

    example = select(discover(), ["ch7:bank_conflicts"])
    layer = {"smoke": True, "iterations": 3, "warmup": 1, "min_warmup_seconds": 0.0, "timeout_multiplier": 4.0}
    suite = run_suite(example, cli_layer=layer, workdir=tmp_path)
    base, opt = suite.variants
    for v in (base, opt):
        assert v.status == "ok", f"{v.spec.key}: {v.status} at {v.failed_stage}: {v.error and v.error.message}"
        assert str(v.sizes["cuda.transpose_tile.arch"]).startswith("sm_")
        assert 0 < int(v.sizes["cuda.transpose_tile.registers"]) <= 255
        assert int(v.sizes["cuda.transpose_tile.max_threads_per_block"]) >= 256
    assert (base.sizes["cuda.transpose_tile.shared_bytes"], opt.sizes["cuda.transpose_tile.shared_bytes"]) == (
        4096,
        4224,
    )
    assert suite.comparisons[0].verification.verified, suite.comparisons[0].verification.detail


# Python names of a C++ constant where they differ from the #define's, by a kernel of the source (the launchers
# size grids with them).
ALIASES = {
    ("transpose_tile", "TILE"): "TILE_CUDA",
    ("heat_cluster", "SEG"): "SEGMENT",
    ("heat_cluster", "CLUSTER"): "HALO_CLUSTER",
    ("heat_cluster", "THREADS"): "HEAT_THREADS",
    ("stencil_single_role", "TILE"): "TILE_FLOATS",
}


def test_the_launchers_constants_match_the_kernels_defines() -> None:
    import re

    checked = 0
    for path in MODULES:
        module = importlib.import_module(f"chapters.{path.parent.name}.{path.stem}")
        for value in vars(module).values():
            for source in value.values() if isinstance(value, dict) else [value]:
                if not isinstance(source, CudaSource):
                    continue
                for name, number in re.findall(r"^#define (\w+) (\d+)\b", source.code, re.M):
                    aliases = [ALIASES[k, name] for k in source.kernel_names() if (k, name) in ALIASES]
                    python = aliases[0] if aliases else name
                    if hasattr(module, python):
                        assert getattr(module, python) == int(number), f"{path}: {python} vs #define {name} {number}"
                        checked += 1
    assert checked >= 10
