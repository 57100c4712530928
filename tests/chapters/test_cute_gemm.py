"""Chapter 10's CuTe DSL pairs: each pair changes one knob of the kernel, a bad knob is refused with one line, and
(where NVIDIA's CUTLASS Python DSL is installed: the test extra) every variant's kernel compiles for sm_90a on this
host, GPU or not, into PTX that uses TMA, mbarriers and wgmma: a broken kernel fails here, in CI."""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from chapters.ch10.cute_config import Config
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
