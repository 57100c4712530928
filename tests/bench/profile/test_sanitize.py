"""bench/profile/sanitize.py and ``perflab run --sanitize``: compute-sanitizer's logs read, the tools skipped with
the reason where absent, and (on a GPU host with compute-sanitizer) a planted out-of-bounds write and a planted
shared-memory race caught."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest
import torch

from bench.define.discovery import discover, select
from bench.isolate.profiled import profile_variant, tools_for
from bench.profile.sanitize import read_sanitizer, sanitizer_command

# HAND-MADE in compute-sanitizer's log format (2025.x: "=========" prefix, the summary line last); not captured
# on a GPU.
MEMCHECK = """========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at oob+0x70 in oob.cu:3
=========     by thread (8,0,0) in block (3,0,0)
=========     Address 0x7f0a4e000fa0 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f0a4e000000 of size 4000 bytes
=========
========= Invalid __global__ write of size 4 bytes
=========     at oob+0x70 in oob.cu:3
=========
========= ERROR SUMMARY: 2 errors
"""
RACECHECK = """========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at race+0x40 in race.cu:4
=========     and Read access at race+0x60 in race.cu:5 [1024 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""
# Trimmed from memcheck's log of chapter 12's conditional_graph on an H200 (2026-11-30, compute-sanitizer 2025.3.1;
# docs/results/h200.md): the address inside the allocation memcheck names as the nearest.
INSIDE = """========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 4 bytes
=========     at jacobi_sweep+0x230 in jacobi.cu:24
=========     by thread (64,0,0) in block (0,0,0)
=========     Access to 0x7f84ac8010fc is out of bounds
=========     and is inside the nearest allocation at 0x7f84ac801000 of size 4,028 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: loop in cuda_kernels.py:177
=========
========= Invalid __global__ read of size 4 bytes
=========     at jacobi_sweep+0x230 in jacobi.cu:24
=========     by thread (65,0,0) in block (0,0,0)
=========     Access to 0x7f84ac801100 is out of bounds
=========     and is inside the nearest allocation at 0x7f84ac801000 of size 4,028 bytes
=========
========= ERROR SUMMARY: 1006 errors
"""
CLEAN = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"


def test_a_memcheck_log_gives_the_count_and_the_first_report(tmp_path: Path) -> None:
    log = tmp_path / "memcheck.log"
    log.write_text(MEMCHECK)
    errors, state = read_sanitizer(log, "memcheck")
    assert errors == 2
    assert state == "failed: 2 error(s) found; the first: Invalid __global__ write of size 4 bytes"


def test_reports_inside_the_allocation_memcheck_names_say_so(tmp_path: Path) -> None:
    """memcheck's own figures put the access inside the allocation: the state says so (still failed: the tool
    reported errors); one report past its allocation among them, or a plain overrun, gets no such note."""
    log = tmp_path / "memcheck.log"
    log.write_text(INSIDE)
    errors, state = read_sanitizer(log, "memcheck")
    assert errors == 1006 and state.startswith("failed: 1006 error(s) found; the first: Invalid __global__ read")
    assert "byte 252 of 4,028: memcheck's record of the allocation, not an access past it" in state
    log.write_text(INSIDE.replace("0x7f84ac801100 is", "0x7f84ac801fbc is"))  # the second: just past the end
    assert "record of the allocation" not in read_sanitizer(log, "memcheck")[1]
    log.write_text(MEMCHECK)
    assert "record of the allocation" not in read_sanitizer(log, "memcheck")[1]


def test_a_racecheck_log_counts_its_hazards(tmp_path: Path) -> None:
    log = tmp_path / "racecheck.log"
    log.write_text(RACECHECK)
    errors, state = read_sanitizer(log, "racecheck")
    assert errors == 1 and state.startswith("failed: 1 error(s) found; the first: Error: Race reported between Write")


def test_a_clean_log_is_ok_and_a_missing_or_cut_log_is_no_verdict(tmp_path: Path) -> None:
    log = tmp_path / "memcheck.log"
    log.write_text(CLEAN)
    assert read_sanitizer(log, "memcheck") == (0, "ok")
    log.write_text("========= COMPUTE-SANITIZER\n")  # the child was killed before the tool summed up
    errors, state = read_sanitizer(log, "memcheck")
    assert errors is None and state.startswith("failed: no summary in compute-sanitizer's memcheck log")
    errors, state = read_sanitizer(tmp_path / "absent.log", "racecheck")
    assert errors is None and "wrote no log" in state


def test_the_command_and_the_modes() -> None:
    cmd = sanitizer_command("/opt/cuda/bin/compute-sanitizer", "racecheck", Path("/w/racecheck.log"))
    assert cmd[:3] == ["/opt/cuda/bin/compute-sanitizer", "--tool", "racecheck"]
    assert cmd[-2:] == ["--log-file", "/w/racecheck.log"] and "all" in cmd
    assert cmd[cmd.index("--report-api-errors") + 1] == "no"  # a failed API call is not a kernel's finding
    with pytest.raises(ValueError, match="tool='initcheck'"):
        sanitizer_command("compute-sanitizer", "initcheck", Path("x"))
    assert tools_for("sanitize") == ["memcheck", "racecheck"] and tools_for("memcheck") == ["memcheck"]


def test_without_compute_sanitizer_each_tool_is_skipped_with_the_reason(chapters, tmp_path, monkeypatch) -> None:
    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name == "compute-sanitizer" else real(name))
    tree = chapters({"ch07/baseline_p.py": {}, "ch07/optimized_p.py": {}})
    spec = select(discover(tree), ["ch07:p"])[0].variants[0]
    r = profile_variant(spec, tmp_path, cli_layer={"device": "cpu", "profile_mode": "sanitize"})
    assert r.profile is not None
    assert r.profile.tools == {t: "skipped: compute-sanitizer not on PATH" for t in ("memcheck", "racecheck")}


PLANTED = '''
import numpy as np
import torch

from bench import context, cuda_source

SOURCE = cuda_source(r"""
extern "C" __global__ void oob(float* out, int n) {  // every thread writes, 32 of them past the end of out
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n + 32) out[i] = 1.f;
}
extern "C" __global__ void race(const float* x, float* out, int n) {  // reads a neighbour's slot, no barrier
    __shared__ float s[256];
    int i = blockIdx.x * 256 + threadIdx.x;
    s[threadIdx.x] = x[i];
    out[i] = s[(threadIdx.x + 32) % 256];
}
""", name="planted.cu")


class Planted:
    def setup(self):
        self.kernel = SOURCE.kernel(KERNEL)
        self.x = torch.randn(1024, device=context().device)
        self.out = torch.empty(1000 if KERNEL == "oob" else 1024, device=self.x.device)

    def benchmark_fn(self):
        if KERNEL == "oob":
            self.kernel(5, 256, self.out, np.int32(self.out.numel()))
        else:
            self.kernel(4, 256, self.x, self.out, np.int32(1024))

    def teardown(self):
        del self.x, self.out


def get_benchmark():
    return Planted()
'''


@pytest.mark.skipif(not torch.cuda.is_available() or shutil.which("compute-sanitizer") is None,
                    reason="needs a CUDA GPU and compute-sanitizer on the PATH")  # fmt: skip
@pytest.mark.parametrize(("kernel", "tool", "finding"), [("oob", "memcheck", "Invalid __global__ write"),
                                                         ("race", "racecheck", "Race reported")])  # fmt: skip
def test_a_planted_bug_is_caught(kernel: str, tool: str, finding: str, tmp_path: Path) -> None:
    path = tmp_path / "chapters" / "ch07" / f"baseline_planted_{kernel}.py"
    path.parent.mkdir(parents=True)
    path.write_text(textwrap.dedent(PLANTED).replace("KERNEL", repr(kernel)))
    spec = select(discover(tmp_path / "chapters"), [f"ch07:planted_{kernel}"])[0].variants[0]
    r = profile_variant(spec, tmp_path / "wd", cli_layer={"profile_mode": tool, "timeout_multiplier": 4.0})
    assert r.profile is not None, r
    state = r.profile.tools[tool]
    assert r.profile.metrics.get(f"sanitize_{tool}_errors", 0) >= 1, state
    assert finding in state, state


def test_run_sanitize_profiles_each_variant_with_both_tools(chapters, monkeypatch) -> None:
    from typer.testing import CliRunner

    from perflab.cli import app

    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name == "compute-sanitizer" else real(name))
    tree = chapters({"ch07/baseline_p.py": {}, "ch07/optimized_p.py": {}})
    args = ["run", "-t", "ch07:p", "--chapters-dir", str(tree), "--device", "cpu", "--no-track", "--sanitize"]
    out = CliRunner().invoke(app, [*args, "--iterations", "3", "--warmup", "1"])
    assert out.exit_code == 0, out.output
    assert out.output.count("memcheck skipped, racecheck skipped") == 2, out.output
