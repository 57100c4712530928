"""Bytes per call against hand counts, GB/s and % of the copy bandwidth in rows, CSVs and MLflow, and the
≥ 80 % target's verdict on synthetic rows."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from types import ModuleType

import pytest
import torch
from mlflow import MlflowClient
from typer.testing import CliRunner

from bench.measure import ceilings as peaks
from bench.record.store import child_runs, read_artifact_text, read_run
from kernels.case import CASES, Shape
from kernels.sweep import BANDWIDTH_COLUMNS, CSV_COLUMNS, Row, bandwidth_target, copy_ceiling, csv_text
from perflab.cli import app
from tests.kernels.cli_run import COPY_GBPS, GROUP, SHAPE, KernelsRun

SMALL = Shape(2, 3, 5)  # M = 6 rows, N = 5: 30 elements per activation

# Elements read + written per call at SMALL, counted by hand from what each call must touch.
HAND_COUNTS = {
    # fwd: x 30 + w 5 + y 30;  bwd: x 30 + dy 30 + w 5 + dx 30 + dw 5
    "rms": (30 + 5 + 30, 30 + 30 + 5 + 30 + 5),
    # fwd: x 30 + r 30 + w 5 + s 30 + y 30;  bwd: ds 30 + dy 30 + s 30 + w 5 + dx (= dr) 30 + dw 5
    "add_rms": (30 + 30 + 5 + 30 + 30, 30 + 30 + 30 + 5 + 30 + 5),
    # fwd: x 30 + w 3 + b 1 + out 30;  bwd: x 30 + dout 30 + w 3 + b 1 + dx 30 + dw 3 + db 1
    "poly": (30 + 3 + 1 + 30, 30 + 30 + 3 + 1 + 30 + 3 + 1),
    # fwd: x 30 + y 30 + w 3 + b 1 + out 30;  bwd: x, y, dout 90 + w, b 4 + dx, dy 60 + dw, db 4
    "mul_poly": (30 + 30 + 3 + 1 + 30, 90 + 4 + 60 + 4),
    # 48 experts: fwd: x, y 60 + w 144 + b 48 + out 30;  bwd: x, y, dout 90 + w, b 192 + dx, dy 60 + dw, db 192
    "grouped_mul_poly": (60 + 144 + 48 + 30, 90 + 192 + 60 + 192),
}
OFFSETS_BYTES = {"grouped_mul_poly": 48 * 4}  # int32 offsets, read in both directions


@pytest.mark.parametrize("case", sorted(HAND_COUNTS))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_bytes_per_call_hand_counts(interp: ModuleType, case: str, dtype: torch.dtype) -> None:
    fwd, bwd = HAND_COUNTS[case]
    extra = OFFSETS_BYTES.get(case, 0)
    assert CASES[case].bytes_per_call(SMALL, dtype, "fwd") == fwd * dtype.itemsize + extra
    assert CASES[case].bytes_per_call(SMALL, dtype, "bwd") == bwd * dtype.itemsize + extra
    with pytest.raises(ValueError, match="direction"):
        CASES[case].bytes_per_call(SMALL, dtype, "backward")


@pytest.mark.parametrize("case", sorted(HAND_COUNTS))
def test_forward_bytes_are_inputs_parameters_and_outputs(interp: ModuleType, case: str) -> None:
    """The fwd formula against real tensors: every input, parameter and output, once."""
    c, gen = CASES[case], torch.Generator().manual_seed(0)
    ref = c.reference(SMALL.hidden, torch.bfloat16, torch.device("cpu"), gen)
    inputs = c.make_inputs(SMALL, torch.bfloat16, torch.device("cpu"), gen)
    with torch.no_grad():
        outs = c.forward(ref, inputs)
    tensors = [*inputs, *ref.parameters(), *outs]
    assert c.bytes_per_call(SMALL, torch.bfloat16, "fwd") == sum(t.numel() * t.element_size() for t in tensors)
    floating = [t for t in inputs if t.is_floating_point()]
    assert c.activation_bytes(SMALL, torch.bfloat16) == sum(t.numel() * t.element_size() for t in floating)


def test_row_gbps_and_pct_of_copy() -> None:
    row = Row(Shape(1, 2, 3), us={"naive": 20.0, "triton": 10.0}, bytes=2_000_000, copy_gbps=400.0)
    assert row.gbps("triton") == pytest.approx(200.0)  # 2 MB in 10 µs
    assert row.pct_of_copy("triton") == pytest.approx(50.0)
    assert row.gbps("compiled") is None and row.pct_of_copy("compiled") is None  # not timed
    bare = Row(Shape(1, 2, 3), us={"triton": 10.0}, bytes=2_000_000)  # no copy bandwidth cached
    assert bare.gbps("triton") == pytest.approx(200.0) and bare.pct_of_copy("triton") is None


def test_csv_carries_the_bandwidth_columns_after_the_issue_ones() -> None:
    rows = [Row(Shape(2, 128, 4096), us={"naive": 30.0, "triton": 10.0}, bytes=4_000_000, activation_bytes=2_097_152,
                copy_gbps=1000.0),
            Row(Shape(1, 5, 37), us={"naive": 8.0}, bytes=1000)]  # fmt: skip
    text = csv_text(rows)
    assert text.splitlines()[0].split(",") == CSV_COLUMNS + BANDWIDTH_COLUMNS
    first, second = csv.DictReader(io.StringIO(text))
    assert (first["bytes_per_call"], first["activation_bytes"], first["copy_gbps"]) == ("4000000", "2097152",
                                                                                      "1000.0")  # fmt: skip
    assert float(first["triton_gbps"]) == pytest.approx(400.0)
    assert float(first["naive_gbps"]) == pytest.approx(400 / 3, rel=1e-5)  # 6 significant digits
    assert float(first["triton_pct_of_copy"]) == pytest.approx(40.0)
    assert first["compiled_gbps"] == first["compiled_pct_of_copy"] == ""  # not run: empty
    assert float(second["naive_gbps"]) == pytest.approx(0.125)
    assert second["naive_pct_of_copy"] == second["copy_gbps"] == ""  # no copy bandwidth cached: empty, never 0


def _big(pct: float | None, shape: Shape = Shape(8, 8192, 4096), copy: float | None = 3000.0, **kw: object) -> Row:
    """A forward row with 256 MiB of activations where triton reaches ``pct`` % of ``copy`` (None: not timed)."""
    nbytes = 2 * shape.rows * shape.hidden * 2
    us = {} if pct is None else {"triton": nbytes / (pct / 100 * 3000.0) / 1e3}
    return Row(shape, us=us, bytes=nbytes, activation_bytes=nbytes // 2, copy_gbps=copy, **kw)  # type: ignore[arg-type]


SMALL_ROW = Row(Shape(1, 1024, 2048), us={"triton": 1000.0}, bytes=8_388_608, activation_bytes=4_194_304,
                copy_gbps=3000.0)  # 4 MiB: below the target's size, slow, ignored  # fmt: skip


def test_target_met_not_met_not_measured() -> None:
    met = bandwidth_target("rms", "bf16", [SMALL_ROW, _big(85.0), _big(81.0, Shape(4, 8192, 4096))])
    assert met is not None and met.verdict == "met" and met.min_pct == pytest.approx(81.0)
    assert met.line.startswith("rms.bf16.fwd: target triton ≥ 80 % of copy bandwidth at ≥ 64 MB of activations: met")
    assert "at 4x8192x4096" in met.line and "2/2 shapes" in met.line

    missed = bandwidth_target("add_rms", "bf16", [_big(90.0), _big(70.0, Shape(4, 8192, 4096)), _big(None)])
    assert missed is not None and missed.verdict == "not met" and missed.min_pct == pytest.approx(70.0)
    assert "min 70.0 % (2100 of 3000 GB/s) at 4x8192x4096; 1/3 shapes" in missed.line

    partial = bandwidth_target("rms", "bf16", [_big(90.0), _big(None, skipped={"triton": "check failed at X"})])
    assert partial is not None and partial.verdict == "not measured" and "1 not timed" in partial.line

    for rows, why in (([SMALL_ROW], "no such shape in this sweep (largest 4.19 MB)"),
                      ([_big(90.0, copy=None)], "no copy bandwidth cached"),
                      ([_big(None, skipped={"triton": "check failed at 2x128x4096: output"})], "check failed at"),
                      ([], "no such shape")):  # fmt: skip
        verdict = bandwidth_target("rms", "fp16", rows)
        assert verdict is not None and verdict.verdict == "not measured" and why in verdict.line, verdict
        assert verdict.min_pct is None

    assert bandwidth_target("poly", "bf16", [_big(90.0)]) is None  # the target covers rms and add_rms only


def test_copy_ceiling_reads_the_peak_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "peaks.json"
    monkeypatch.setenv("PERFLAB_PEAK_CACHE", str(cache))
    assert copy_ceiling(torch.device("cpu")) == (peaks.cpu_key(), None)
    cache.write_text(json.dumps({peaks.cpu_key(): {"ceilings": {"copy_gbps": 12.5, "fp32_tflops": 1.0}}}))
    assert copy_ceiling(torch.device("cpu")) == (peaks.cpu_key(), 12.5)


@pytest.mark.xdist_group(GROUP)
def test_cli_logs_bandwidth_and_the_target(kernels_cli: KernelsRun) -> None:
    output, uri = kernels_cli.output, kernels_cli.uri
    assert "copy bandwidth of" in output and f"{COPY_GBPS:.1f} GB/s" in output
    line = "rms.fp32.fwd: target triton ≥ 80 % of copy bandwidth at ≥ 64 MB of activations: not measured — no such"
    assert line in output
    assert "poly.fp32.fwd: target" not in output
    parents = {ln.split()[1]: ln.split()[-1] for ln in output.splitlines() if ln.startswith("logged ")}
    rms = read_run(parents["rms"], uri)
    assert rms.tags["perflab.target.rms.fp32.fwd_pct_of_copy"] == "not measured"
    params = MlflowClient(uri).get_run(parents["rms"]).data.params
    assert params["copy_gbps"] == "10.0" and params["hardware"] == peaks.cpu_key()
    assert read_artifact_text(parents["rms"], "rms-targets.txt", uri).startswith("rms.fp32.fwd: target")
    assert not any(k.startswith("perflab.target.") for k in read_run(parents["poly"], uri).tags)
    triton = child_runs(parents["rms"], uri)[1]
    for direction in ("fwd", "bwd"):
        gbps = triton.metrics[f"{direction}.{SHAPE}_gbps"]
        nbytes = CASES["rms"].bytes_per_call(SHAPE, torch.float32, direction)
        assert gbps == pytest.approx(nbytes / (triton.metrics[f"{direction}.{SHAPE}_us"] * 1e3))
        assert triton.metrics[f"{direction}.{SHAPE}.pct_of_copy"] == pytest.approx(100 * gbps / COPY_GBPS)
    rows = list(csv.DictReader(io.StringIO(read_artifact_text(parents["rms"], "rms-fp32-fwd-perf.csv", uri))))
    assert float(rows[0]["triton_gbps"]) > 0 and float(rows[0]["triton_pct_of_copy"]) > 0
    assert rows[0]["bytes_per_call"] == str(CASES["rms"].bytes_per_call(SHAPE, torch.float32, "fwd"))


def test_cli_without_a_cached_copy_bandwidth(interp: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                             ) -> None:  # fmt: skip
    monkeypatch.setenv("PERFLAB_PEAK_CACHE", str(tmp_path / "absent.json"))
    out = tmp_path / "o"
    args = ["kernels", "--case", "add_rms", "--dtype", "fp32", "--provider", "triton", "--smoke", "--max-shapes", "0",
            "--save-path", str(out), "--no-track"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "none cached (run `perflab peak` first)" in result.output
    line = next(ln for ln in result.output.splitlines() if "add_rms fp32 fwd" in ln)
    assert "µs" in line and "B/s" in line and "% of copy" not in line  # no % where no ceiling is cached
    rows = list(csv.DictReader((out / "add_rms-fp32-fwd-perf.csv").open()))
    assert all(float(r["triton_gbps"]) > 0 and r["triton_pct_of_copy"] == "" and r["copy_gbps"] == "" for r in rows)
