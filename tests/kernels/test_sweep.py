"""CSV columns and speedups, the geomean, timing through the harness clock, the CLI end to end."""

from __future__ import annotations

import csv
import io
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch
from typer.testing import CliRunner

from kernels.case import CASES, Shape
from kernels.common import retyped
from kernels.sweep import (
    CSV_COLUMNS,
    GPU_SHAPES,
    Row,
    clip,
    csv_text,
    first_line,
    geomean,
    plot_png,
    row_line,
    sweep_case,
    sweep_shapes,
)
from perflab.cli import app

CPU = torch.device("cpu")
REPO = Path(__file__).resolve().parents[2]


def test_csv_columns_and_speedups() -> None:
    rows = [
        Row(Shape(2, 128, 4096), us={"naive": 30.0, "compiled": 15.0, "triton": 10.0}),
        Row(Shape(1, 5, 37), us={"naive": 8.0, "triton": 16.0}, skipped={"compiled": "compile failed: X"}),
    ]
    parsed = list(csv.DictReader(io.StringIO(csv_text(rows))))
    assert list(parsed[0])[: len(CSV_COLUMNS)] == CSV_COLUMNS  # the columns first; bandwidth ones follow
    assert CSV_COLUMNS[:3] == ["dim", "batch_size", "seq_len"]
    first, second = parsed
    assert (first["dim"], first["batch_size"], first["seq_len"]) == ("4096", "2", "128")
    assert float(first["speedup_vs_naive"]) == pytest.approx(3.0)
    assert float(first["speedup_vs_compiled"]) == pytest.approx(1.5)
    assert first["compiled_triton_us"] == ""  # not run: empty, never 0
    assert float(second["speedup_vs_naive"]) == pytest.approx(0.5)
    assert second["compiled_us"] == second["speedup_vs_compiled"] == ""


def test_a_row_reads_in_the_unit_of_its_rates() -> None:
    # a CPU's rates: 0.04-0.1 GB/s read "0.0 GB/s" to one decimal
    row = Row(Shape(2, 3, 37), us={"naive": 19.3, "triton": 41_700.0}, bytes=963.0)
    assert row_line(row, "rms bf16 fwd") == "rms bf16 fwd 2x3x37: naive 19.3 µs 49.9 MB/s, triton 41.7 ms 0.0231 MB/s"


def test_an_error_is_cut_at_a_word_and_a_wrapped_repr_at_its_first_line() -> None:
    wrapped = RuntimeError("TorchRuntimeError('RuntimeError when making fake tensor call\\n  Explanation: long')")
    assert first_line(wrapped) == "TorchRuntimeError('RuntimeError when making fake tensor call"
    cut = clip("compile failed " * 40, 60)
    assert len(cut) <= 60 and cut.endswith(" …") and set(cut.removesuffix(" …").split()) == {"compile", "failed"}


def test_geomean_ignores_missing() -> None:
    assert geomean([2.0, 8.0, None]) == pytest.approx(4.0)
    assert geomean([None]) is None


def test_plot_is_a_png() -> None:
    png = plot_png([Row(Shape(1, 2, 3), us={"naive": 2.0, "triton": 1.0})], "rms fp32 fwd")
    assert png.startswith(b"\x89PNG")


def test_sweep_times_checked_providers_and_skips_a_wrong_one(interp: ModuleType, monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:  # fmt: skip
    from bench.define.config import resolve_config

    config = resolve_config({"device": "cpu", "iterations": 2, "warmup": 0})
    shapes = [Shape(1, 2, 37)]
    rows = sweep_case(CASES["rms"], "fp32", shapes, config, CPU, ["naive", "triton"], log=lambda s: None)
    for direction in ("fwd", "bwd"):
        (row,) = rows[direction]
        assert set(row.us) == {"naive", "triton"} and all(math.isfinite(v) and v > 0 for v in row.us.values())
    # a Triton module with a wrong eps: the check must fail and the provider must not be timed
    monkeypatch.setattr(CASES["rms"], "custom", lambda ref: _wrong_eps(interp, ref))
    rows = sweep_case(CASES["rms"], "fp32", shapes, config, CPU, ["naive", "triton"], log=lambda s: None)
    assert "triton" not in rows["fwd"][0].us
    assert rows["fwd"][0].skipped["triton"].startswith("check failed")


def _wrong_eps(interp: ModuleType, ref: torch.nn.Module) -> torch.nn.Module:
    mod = retyped(ref, interp.TritonRMSNorm)
    mod.eps = 0.5
    return mod


def test_cli_smoke_one_case(interp: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["kernels", "--case", "add_rms", "--dtype", "fp32", "--provider", "triton",
                                      "--smoke", "--plot", "--save-path", str(out), "--no-track"])  # fmt: skip
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in out.iterdir())
    assert names == ["add_rms-fp32-bwd-perf.csv", "add_rms-fp32-bwd-speedup.png",
                     "add_rms-fp32-fwd-perf.csv", "add_rms-fp32-fwd-speedup.png"]  # fmt: skip
    rows = list(csv.DictReader((out / "add_rms-fp32-fwd-perf.csv").open()))
    assert len(rows) == 2 and all(float(r["triton_us"]) > 0 and float(r["naive_us"]) > 0 for r in rows)
    assert "check add_rms/triton fp32 2x3x37: ok" in result.output
    steps = [line.split()[0] for line in result.output.splitlines() if "add_rms fp32 " in line]
    assert steps == ["1/4", "2/4", "3/4", "4/4"]  # two shapes, fwd and bwd: counted lines, no terminal
    assert "GB/s" in result.output or "MB/s" in result.output


def test_cli_max_shapes_limits_the_smoke_shapes_too(interp: ModuleType, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["kernels", "--case", "rms", "--dtype", "fp32", "--provider", "triton", "--smoke",
                                      "--max-shapes", "1", "--save-path", str(tmp_path), "--no-track"])  # fmt: skip
    assert result.exit_code == 0, result.output
    steps = [line.split()[:5] for line in result.output.splitlines() if "rms fp32 " in line and "/" in line]
    assert steps == [["1/2", "rms", "fp32", "fwd", "1x5x64:"], ["2/2", "rms", "fp32", "bwd", "1x5x64:"]]


@pytest.mark.slow  # a fresh process compiling through dynamo (22 s of the fast tier); the skip's words are its point
def test_cli_compiled_triton_in_the_interpreter_is_skipped_on_one_line(tmp_path: Path) -> None:
    """dynamo cannot trace the interpreter's kernels: three multi-line UserWarnings, then the provider skipped
    with its reason. The reason is kept, the warnings are not (a process of its own: pytest would catch them),
    and nothing is cut mid-word."""
    env = {**os.environ, "COLUMNS": "80", "TRITON_INTERPRET": "1"}
    args = ["kernels", "--case", "rms", "--dtype", "fp32", "--provider", "compiled_triton", "--smoke", "--max-shapes",
            "1", "--save-path", str(tmp_path), "--no-track"]  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "perflab", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "Dynamo does not know how to trace" not in out and "UserWarning" not in out
    skipped = [line for line in out.splitlines() if "compiled_triton skipped:" in line]
    assert skipped and not any(re.search(r"\w…", line) for line in skipped)  # never cut mid-word


def test_cli_rejects_unknown_case(interp: ModuleType) -> None:
    result = CliRunner().invoke(app, ["kernels", "--case", "nope", "--no-track"])
    said = str(result.exception)  # the cases registered in this process, in the order their modules were imported
    assert result.exit_code != 0 and said.startswith("--case 'nope' unknown; choose from ") and "rms" in said
    assert "no GPU" not in result.output  # bad input is the only line


@pytest.mark.parametrize(
    ("device", "says"),
    [
        ("tpu", "device='tpu' is not one of 'auto', 'cpu', 'cuda', 'cuda:N'"),
        ("cuda", "device='cuda': torch sees no CUDA GPU on this host"),
    ],
)
def test_cli_rejects_a_device_in_one_line(
    interp: ModuleType, monkeypatch: pytest.MonkeyPatch, device: str, says: str
) -> None:
    from bench.cli import workers
    from bench.errors import PerflabError

    monkeypatch.setattr(workers, "cuda_count", lambda: 0)
    result = CliRunner().invoke(app, ["kernels", "--device", device, "--no-track"])
    assert isinstance(result.exception, PerflabError) and says in str(result.exception), result.output


def test_sweep_shapes_per_case_and_limited(interp: ModuleType) -> None:
    grouped = sweep_shapes(CASES["grouped_mul_poly"])
    assert [s.rows for s in grouped] == [1024 << i for i in range(7)] and {s.hidden for s in grouped} == {1280}
    assert sweep_shapes(CASES["rms"]) == GPU_SHAPES and len(GPU_SHAPES) == 32
    quick = sweep_shapes(CASES["rms"], max_shapes=6)
    assert len(quick) == 6 and quick == [s for s in GPU_SHAPES if s in quick]  # sweep order kept
    sizes = sorted(s.rows * s.hidden for s in GPU_SHAPES)
    assert {sizes[0], sizes[-1]} <= {s.rows * s.hidden for s in quick}  # smallest and largest kept
    assert {s.hidden for s in quick} == {2048, 4096}
    assert sweep_shapes(CASES["poly"], max_shapes=99) == GPU_SHAPES


def test_check_failure_names_the_shape(interp: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every check shape is checked; a provider wrong only at a larger hidden is caught there, not timed."""
    from bench.define.config import resolve_config

    def wrong_past_64(ref: torch.nn.Module) -> torch.nn.Module:
        return _wrong_eps(interp, ref) if ref.weight.numel() > 64 else retyped(ref, interp.TritonRMSNorm)

    monkeypatch.setattr(CASES["rms"], "custom", wrong_past_64)
    config = resolve_config({"device": "cpu", "iterations": 2, "warmup": 0})
    rows = sweep_case(CASES["rms"], "fp32", [Shape(1, 2, 37)], config, CPU, ["naive", "triton"],
                      check_shapes=[Shape(1, 2, 37), Shape(1, 3, 100)], log=lambda s: None)  # fmt: skip
    assert rows["bwd"][0].skipped["triton"].startswith("check failed at 1x3x100: output[0]")
    assert "triton" not in rows["bwd"][0].us


def test_cli_profile_writes_a_trace_per_provider_shape_and_direction(interp: ModuleType, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["kernels", "--case", "rms", "--dtype", "fp32", "--provider", "triton",
                                      "--smoke", "--profile", "--save-path", str(tmp_path), "--no-track"])  # fmt: skip
    assert result.exit_code == 0, result.output
    traces = sorted(str(p.relative_to(tmp_path / "profile")) for p in tmp_path.glob("profile/*/*/trace.json.gz"))
    assert traces == [f"rms-fp32-{d}/{p}-{s}/trace.json.gz" for d in ("bwd", "fwd") for p in ("naive", "triton")
                      for s in ("1x5x64", "2x3x37")]  # fmt: skip


@pytest.mark.slow  # dynamo compiles four graphs (10-17 s on the 2-core host)
def test_compiled_provider_compiles_per_hidden_not_per_shape(interp: ModuleType) -> None:
    """Rows are dynamic, hidden static: 4 shapes over 2 hiddens are 2 graphs per grad mode (fwd is timed
    under no_grad), far from dynamo's recompile limit, past which it would silently run eager."""
    from torch._dynamo.utils import counters

    from bench.define.config import resolve_config

    config = resolve_config({"device": "cpu", "iterations": 2, "warmup": 0})
    shapes = [Shape(1, 8, 64), Shape(2, 8, 64), Shape(3, 16, 64), Shape(1, 8, 96)]
    counters.clear()
    rows = sweep_case(CASES["rms"], "fp32", shapes, config, CPU, ["naive", "compiled"], log=lambda s: None)
    if "compiled" in rows["fwd"][0].skipped:
        pytest.skip(f"torch.compile unavailable here: {rows['fwd'][0].skipped['compiled']}")
    assert all("compiled" in r.us for d in ("fwd", "bwd") for r in rows[d])
    assert counters["stats"]["unique_graphs"] == 4
