"""The report's charts (analysis/plots.py via write_report): PNGs written, logged, fed by the store."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from analysis.report import write_report
from tests.analysis.synthetic import H100, Store, draw, log_suite, result

PNG = b"\x89PNG\r\n\x1a\n"
CEILINGS = {"copy_gbps": 3000.0, "l2_gbps": 9000.0, "fp32_tflops": 50.0, "tf32_tflops": 390.0, "bf16_tflops": 750.0}


@pytest.fixture(scope="module")
def written(store: Store, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """ch07:copy memory-bound (bytes only, ~2x); ch09:mm declares bytes and FLOPs (~4x), with a peak cache."""
    cache = tmp_path_factory.mktemp("peak") / "peaks.json"
    cache.write_text(json.dumps({H100: {"key": H100, "ceilings": CEILINGS, "notes": {}}}))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PERFLAB_PEAK_CACHE", str(cache))
        results = [
            result("ch07:copy:baseline", draw(0.4, 1), work_bytes=6e8),  # 1500 GB/s
            result("ch07:copy:optimized", draw(0.2, 2), work_bytes=6e8),  # 3000 GB/s
            result("ch09:mm:baseline", draw(4.0, 3), work_bytes=4e8, work_flops=1.1e12),
            result("ch09:mm:optimized", draw(1.0, 4), work_bytes=4e8, work_flops=1.1e12),  # 1.1 TFLOP/call
        ]
        parent, ids = log_suite(store, "plots", results)
        out = tmp_path_factory.mktemp("report")
        report, where = write_report(parent, out, store.uri)
    return {"parent": parent, "ids": ids, "report": report, "out": where}


@pytest.mark.parametrize("name", ["speedup.png", "roofline.png", "latency.png"])
def test_png_written_and_logged(written: dict[str, Any], store: Store, name: str) -> None:
    data = (written["out"] / name).read_bytes()
    assert data.startswith(PNG) and len(data) > 5000  # a real chart, not an empty canvas
    assert name in {f.path for f in store.client.list_artifacts(written["parent"])}
    assert f"]({name})" in (written["out"] / "report.md").read_text()


def test_ceilings_and_pct_of_peak_reach_the_report(written: dict[str, Any], store: Store) -> None:
    o = written["report"]["overall"]
    assert o["hardware"] == [H100] and o["ceilings"][H100] == CEILINGS
    rows = {r["example"]: r for r in csv.DictReader(io.StringIO((written["out"] / "report.csv").read_text()))}
    copy = rows["copy"]
    # memory-bound: achieved GB/s / copy ceiling, logged by tracking from the cache
    assert float(copy["optimized_pct_of_peak"]) == pytest.approx(100 * float(copy["optimized_gbps"]) / 3000.0)
    run = store.client.get_run(written["ids"]["ch09:mm:optimized"])
    tflops, ai = run.data.metrics["achieved_tflops"], run.data.metrics["arithmetic_intensity"]
    assert ai == pytest.approx(2750.0) and tflops == pytest.approx(1100, rel=0.05)
    # 2750 FLOP/byte is above the fp32 ridge (50e12 / 3000e9 = 16.7): judged against the fp32 matmul peak
    assert run.data.metrics["pct_of_peak"] == pytest.approx(100 * tflops / 50.0)


def test_roofline_without_ceilings_still_draws(store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFLAB_PEAK_CACHE", str(tmp_path / "none.json"))
    pair = [result("ch07:a:baseline", draw(1.0, 5), work_bytes=1e6), result("ch07:a:optimized", draw(0.5, 6))]
    parent, _ = log_suite(store, "plots-nocache", pair)
    report, out = write_report(parent, tmp_path / "r", store.uri, log=False)
    assert report["overall"]["ceilings"] == {H100: None}
    assert (out / "roofline.png").read_bytes().startswith(PNG)
    assert "need `perflab peak`" in (out / "report.md").read_text()
