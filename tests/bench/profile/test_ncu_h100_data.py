"""The ncu CSV parser and the verdict against real ``ncu --csv`` output captured on an H100.

tests/bench/profile/data/ncu_h100/: the profile child's ncu.csv of every chapter-7 variant (perflab run -t 7
--profile --profile-mode all, 2026-11-21, docs/results/h100.md) and selfcheck's ncu CSVs (with ncu's
==PROF== lines); logged_on_h100.json holds the metrics and verdict the H100 run logged to MLflow.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.audit.truth import parse_ncu_csv as selfcheck_times
from bench.profile.tools import PROFILE_CALLS, aggregate_ncu, parse_ncu_csv
from bench.profile.verdict import verdict

DATA = Path(__file__).parent / "data" / "ncu_h100"
LOGGED = json.loads((DATA / "logged_on_h100.json").read_text())


@pytest.mark.parametrize("name", sorted(LOGGED))
def test_parser_reproduces_what_the_h100_run_logged(name: str) -> None:
    kernels = parse_ncu_csv((DATA / f"{name}.csv").read_text())
    assert len(kernels) == PROFILE_CALLS  # one kernel per profiled call in every chapter-7 variant
    metrics = aggregate_ncu(kernels, PROFILE_CALLS)
    logged = {k: v for k, v in LOGGED[name].items() if k != "bound"}
    assert metrics.keys() >= logged.keys()
    for key, value in logged.items():
        assert metrics[key] == pytest.approx(value, rel=1e-9), key
    assert verdict(ncu=metrics)[0] == LOGGED[name]["bound"]


def test_a_kernel_read_by_hand() -> None:
    """coalescing_optimized.csv, first kernel: 'gpu__time_duration.sum','ns','173,472' (thousands comma)."""
    first = parse_ncu_csv((DATA / "coalescing_optimized.csv").read_text())[0]
    assert first.name == "axpb_blocked"
    assert first.time_us == pytest.approx(173.472)
    assert first.metrics["dram__throughput.avg.pct_of_peak_sustained_elapsed"] == pytest.approx(88.84)


def test_verdicts_match_the_roofline_story() -> None:
    """Optimized copies are memory-bound, the strided/naive baselines are not, the matmuls compute-bound."""
    bound = {name: v["bound"] for name, v in LOGGED.items()}
    for example in ("coalescing", "transpose", "vectorized_copy", "aos_soa", "gather_locality"):
        assert bound[f"{example}_optimized"] == "memory"
    assert bound["coalescing_baseline"] == bound["transpose_baseline"] == "latency"
    assert bound["tiled_matmul_baseline"] == bound["tiled_matmul_optimized"] == "compute"


def test_selfcheck_csv_with_prof_lines() -> None:
    times = selfcheck_times((DATA / "ncu_scale_64mib.csv").read_text())
    assert len(times) == 5 and all(0.03 < t < 0.06 for t in times)  # ms: a 128 MiB op at ~3 TB/s
