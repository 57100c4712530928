"""The tables the sweep prints fit an 80-column terminal; recommendation.md keeps Markdown."""

from __future__ import annotations

import re

from bench.cli import fit_tables
from sweeps.recommend import Rules, recommend, table_markdown


def _row(trial: int, bs: int, sps: float) -> dict:
    return {"trial": trial, "batch_size": bs, "num_workers": 1, "amp": True, "pin_memory": False, "status": "ok",
            "samples_per_s": sps, "samples_per_s_low": sps * 0.6, "samples_per_s_high": sps * 1.9, "step_ms": 11.5,
            "io_wait_ms": 4.6, "peak_memory_gb": 0.3, "memory_pct": 1.2, "io_bound": True}  # fmt: skip


def test_the_results_table_fits_80_columns_with_every_cell() -> None:
    """The table printed to an 80-column shell was Markdown rows of 150-190 characters."""
    failed = {"trial": 3, "batch_size": 128, "num_workers": 0, "status": "failed",
              "reason": "workload 'job.py:make' raised RuntimeError: boom | at 128"}  # fmt: skip
    md = table_markdown(recommend([_row(4, 32, 6406.1), _row(5, 64, 5269.9), failed], "cpu", Rules(usable_cores=2)))
    assert max(len(x) for x in md.splitlines()) > 80
    text = fit_tables(md, 80)
    table = text.split("\n\n")[0].splitlines()
    rows = [x for x in table if not re.match(r"trial \d+, ", x)]  # the diagnoses: lines under the table
    assert rows[0].startswith("trial  configuration  status  samples") and rows[0].endswith("memory pct"), text
    assert max(len(x) for x in rows) <= 80, text
    assert any(x.split()[:4] == ["4", "bs=32", "w=1", "amp"] and "6406.1" in x for x in rows), text
    assert "(3844–12172)" in text  # the spread whole, on the row's next line
    # a failed row's reason under the table, wrapped between words at 80 columns like every line
    assert "trial 3, diagnosis: failed: workload 'job.py:make' raised RuntimeError: boom | at 128" in " ".join(
        text.split())  # fmt: skip
    assert max(len(x) for x in text.splitlines()) <= 80, text
    assert "gpu util" not in text  # a column of dashes only is left out
    ok_only = fit_tables(table_markdown(recommend([_row(4, 32, 6406.1)], "cpu", Rules(usable_cores=2))), 80)
    assert "trial 4, diagnosis: I/O-bound (1 worker, the most measured" in ok_only, ok_only  # not 9 a line
    assert "**recommended**: trial 4" in text  # the prose unchanged


def test_a_table_that_fits_is_left_as_markdown() -> None:
    md = "## Ranking\n\n| rank | trial |\n|---:|---:|\n| 1 | 4 |\n\n_done_"
    assert fit_tables(md, 80) == md
