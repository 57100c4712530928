"""Chapter 10's CuTe DSL pairs: each pair changes one knob of the kernel, a bad knob is refused with one line, and
(where NVIDIA's CUTLASS Python DSL is installed: the test extra) every variant's kernel compiles for sm_90a on this
host, GPU or not, into PTX that uses TMA, mbarriers and wgmma, and its epilogue gives each thread its own part of
C, the tile covered once: a broken kernel fails here, in CI. ``python3 -m chapters.ch10.cute_gemm --check`` (one
line a kernel: NaN left in a NaN-filled output, error against fp32) runs the kernels where there is a Hopper GPU;
its report is tested here on stand-in kernels."""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from chapters.ch10 import cute_gemm
from chapters.ch10.cute_config import SMEM_BYTES, Config
from chapters.ch10.cute_gemm import CuteGemm

ROOT = Path(__file__).resolve().parents[2]
CHANGES = {"cute_tma_pipeline": {"stages"}, "cute_wgmma_async": {"mmas_in_flight"}, "cute_wgmma_tile": {"tile_mn"}}
PAIRS = tuple(CHANGES)


def config(side: str, pair: str) -> Config:
    bench = importlib.import_module(f"chapters.ch10.{side}_{pair}").get_benchmark()
    assert isinstance(bench, CuteGemm)
    return bench.kernel_config


@pytest.mark.parametrize("pair", PAIRS)
def test_each_pair_changes_one_knob(pair: str) -> None:
    base, opt = config("baseline", pair), config("optimized", pair)
    changed = {f for f in ("tile_mn", "stages", "mmas_in_flight") if getattr(base, f) != getattr(opt, f)}
    assert changed == CHANGES[pair], (pair, base, opt)


def test_wgmma_async_has_nothing_else_to_fill_the_drain() -> None:
    """The pair's premise: one warpgroup per CTA and one CTA per SM, so no other wgmma batch runs while a drained
    one's warpgroup waits (with two warpgroups the H200 measured no difference between the sides)."""
    for side in ("baseline", "optimized"):
        cfg = config(side, "cute_wgmma_async")
        assert cfg.warpgroups == 1, cfg
        assert 2 * cfg.stages * cfg.stage_bytes > SMEM_BYTES, f"{cfg}: two CTAs fit on an SM"


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"tile_mn": (96, 128)}, "tile_mn=(96, 128): (64, 128), (128, 128) or (128, 256) are accepted"),
        ({"mmas_in_flight": 2}, "mmas_in_flight=2: 0 or 1 is accepted"),
        ({"stages": 1, "mmas_in_flight": 1}, "stages=1: at least 2 with mmas_in_flight=1"),
        ({"stages": 5}, "stages=5: 5 x 49152 B of shared memory is over sm_90's 232448 B"),
    ],
)
def test_a_bad_knob_is_refused_with_its_value(kwargs: dict, says: str) -> None:
    with pytest.raises(ValueError) as e:
        Config(**kwargs).check()
    assert says in str(e.value)


COMPILE = """
import os, sys
sys.path.insert(0, {root!r})
import torch
from chapters.ch10.cute_config import Config
from chapters.ch10 import cute_kernel
cfg = Config(tile_mn={tile!r}, stages={stages}, mmas_in_flight={in_flight})
a = torch.randn(256, 192).half(); bt = torch.randn(256, 192).half(); out = torch.empty(256, 256).half()
cute_kernel.compile_gemm(cfg, a, bt, out)
try:
    cute_kernel.compile_gemm(cfg, a[:, :100], bt[:, :100], out)
except ValueError as e:
    print("refused:", e)
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "cfg", sorted({config(s, p) for s in ("baseline", "optimized") for p in PAIRS}, key=repr), ids=repr
)
def test_every_variant_compiles_for_sm90a(cfg: Config, tmp_path: Path) -> None:
    if importlib.util.find_spec("cutlass") is None:
        pytest.skip("NVIDIA's CUTLASS Python DSL is in the test extra (pip install -e '.[test]')")
    env = {**os.environ, "CUTE_DSL_ARCH": "sm_90a", "CUTE_DSL_KEEP": "ptx", "CUTE_DSL_DUMP_DIR": str(tmp_path)}
    code = COMPILE.format(root=str(ROOT), tile=cfg.tile_mn, stages=cfg.stages, in_flight=cfg.mmas_in_flight)
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "refused: M, N, K = 256, 256, 100: multiples of the tile" in run.stdout
    (ptx_file,) = tmp_path.glob("*.sm_90a.ptx")
    ptx = ptx_file.read_text()
    assert ".target sm_90a" in ptx
    assert "cp.async.bulk.tensor" in ptx and "mbarrier.try_wait" in ptx
    assert "wgmma.mma_async" in ptx and "wgmma.commit_group" in ptx
    waits = {int(n) for n in re.findall(r"wgmma\.wait_group\.sync\.aligned\s+(\d+);", ptx)}
    assert waits == {0, cfg.mmas_in_flight}, f"{cfg}: wgmma.wait_group {sorted(waits)} in the PTX"
    n = cfg.tile_mn[1]
    assert f"m64n{n}k16" in ptx, f"{cfg}: the wgmma shape is not 64 x {n} x 16"
    threads = 128 * cfg.warpgroups
    assert re.search(rf"\.reqntid {threads}, 1, 1", ptx), f"{cfg}: the kernel is not {threads} threads a CTA"


DSL = pytest.mark.skipif(
    importlib.util.find_spec("cutlass") is None,
    reason="NVIDIA's CUTLASS Python DSL is in the test extra (pip install -e '.[test]')",
)
HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)

COVER = """
import sys
sys.path.insert(0, {root!r})
import cutlass, cutlass.cute as cute
from chapters.ch10.cute_config import Config
from chapters.ch10.cute_kernel import HopperGemm, partition_c

def cover(cfg):
    got = {{"offsets": [], "bases": [], "layouts": set()}}

    @cute.jit
    def trace():
        gemm = HopperGemm(cfg)
        k = cute.nvgpu.OperandMajorMode.K
        tiled_mma = gemm.make_tiled_mma(cutlass.Float16, k, k)
        tile = cute.make_identity_tensor(cfg.tile_mn)  # each element is its own (m, n)
        first = partition_c(tiled_mma, tile, 0)
        for i in cutlass.range_constexpr(cute.size(first)):
            got["offsets"].append(first[i])
        for t in cutlass.range_constexpr(gemm.threads):
            part = partition_c(tiled_mma, tile, t)
            got["bases"].append(part[0])
            got["layouts"].add(str(part.layout))

    trace()
    # every thread's part is one layout from its own first element: the parts are bases + offsets
    assert len(got["layouts"]) == 1, got["layouts"]
    return sorted((bm + om, bn + on) for bm, bn in got["bases"] for om, on in got["offsets"])

for tile in {tiles!r}:
    m, n = tile
    stored = cover(Config(tile_mn=tile))
    print(tile, "covered once" if stored == [(i, j) for i in range(m) for j in range(n)] else
          f"{{len(set(stored))}} of {{m * n}} elements stored (by {{len(stored)}} stores)")
"""


@DSL
@pytest.mark.slow  # the DSL traced per thread (10-19 s); the knobs and the checks are in the fast tier
def test_each_thread_stores_its_own_part_of_c(tmp_path: Path) -> None:
    """The epilogue's partition of C, over the CTA's threads, is the tile once: partitioned by the warpgroup's
    first thread (the slice that partitions A and B), every thread stored thread 0's 1/128 of the tile and the
    rest of C was never written (on an H200, every variant's output kept the harness's NaN poison)."""
    tiles = [(64, 128), (128, 128), (128, 256)]
    env = {**os.environ, "CUTE_DSL_ARCH": "sm_90a"}
    script = tmp_path / "cover.py"  # a file: the DSL compiles a function from its source
    script.write_text(COVER.format(root=str(ROOT), tiles=tiles))
    run = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.splitlines() == [f"{t} covered once" for t in tiles], run.stdout


class StandIn:
    """A stand-in for cute_kernel: compile_gemm returns a call that writes ``write(a, bt, out)``."""

    def __init__(self, write) -> None:
        self.write = write

    def compile_gemm(self, cfg: Config, a: torch.Tensor, bt: torch.Tensor, out: torch.Tensor):
        return (lambda a, bt, out, stream: self.write(a, bt, out)), (a, bt, out)


def whole(a: torch.Tensor, bt: torch.Tensor, out: torch.Tensor) -> None:
    out.copy_(a.float() @ bt.float().t())


def first_rows(a: torch.Tensor, bt: torch.Tensor, out: torch.Tensor) -> None:
    out[:8].copy_((a.float() @ bt.float().t())[:8])


def refused(a: torch.Tensor, bt: torch.Tensor, out: torch.Tensor) -> None:
    raise ValueError("M, N, K = 64, 32, 16: multiples of the tile\nsecond line")


@pytest.mark.parametrize(
    ("write", "says", "passes"),
    [
        (whole, "NaN 0/2048, max abs err ", True),  # the fp16 rounding of C: under 4e-3
        (first_rows, "NaN 1792/2048 (first at row 8 col 0; in 56/64 rows, 32/32 cols), max abs err ", False),
        (lambda a, bt, out: out.fill_(1e3), "NaN 0/2048, max abs err 1.0", False),
        (refused, "ValueError: M, N, K = 64, 32, 16: multiples of the tile: FAIL", False),
    ],
    ids=["whole", "first rows", "wrong values", "refused"],
)
def test_check_reports_each_kernel_in_one_line(write, says: str, passes: bool, capsys: pytest.CaptureFixture) -> None:
    a, bt = torch.randn(64, 16).half(), torch.randn(32, 16).half()
    ok = cute_gemm.check_one(StandIn(write), Config(tile_mn=(64, 128)), a, bt, a.float() @ bt.float().t())
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("64x32x16 tile 64x128 stages 4 in_flight 1: "), line
    assert says in line, line
    assert ok is passes and line.endswith("PASS" if passes else "FAIL"), line


@pytest.mark.parametrize(
    ("spoil", "says"),
    [
        (lambda c: None, None),
        (lambda c: c.__setitem__((3, 5), float("nan")), "C against an fp32 torch.matmul: 1 NaN, max abs err "),
        (lambda c: c.__setitem__((7, 1), c[7, 1] + 0.25), "0 NaN, max abs err 2."),
        (lambda c: c.zero_(), "0 NaN, max abs err "),
    ],
    ids=["right", "a NaN", "one element off", "zeros"],
)
def test_a_variant_checks_its_c_against_fp32(spoil, says: str | None) -> None:
    """Both CuTe sides could agree on a wrong C: each checks the last timed call's C against an fp32 product."""
    bench = CuteGemm(Config(tile_mn=(64, 128)))
    a, bt = torch.randn(64, 192).half(), (torch.randn(128, 192) / 192**0.5).half()
    bench.args, bench.out = (a, bt), (a.float() @ bt.float().t()).half()
    spoil(bench.out)
    message = bench.validate_result()
    assert message is None if says is None else says in message, message


@pytest.mark.skipif(HOPPER, reason="on a Hopper GPU the check runs the kernels (test_check_on_hopper)")
def test_check_needs_a_hopper_gpu(capsys: pytest.CaptureFixture) -> None:
    assert cute_gemm.main(["--check"]) == 1
    assert capsys.readouterr().out == "--check launches the kernels: it needs an sm_90 (Hopper) GPU\n"


@DSL
@pytest.mark.skipif(not HOPPER, reason="launches the kernels: needs an sm_90 (Hopper) GPU")
def test_check_on_hopper(capsys: pytest.CaptureFixture) -> None:
    ok = cute_gemm.check(((256, 256, 192),))
    out = capsys.readouterr().out
    assert ok, out
