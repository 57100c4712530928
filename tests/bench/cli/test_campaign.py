"""A suite sharded into parts (``perflab run --shard I/N``, one command per part, as on the hosts of a Slurm
array) is one campaign: ``show``, ``report``, ``regressions`` and ``compare`` read it whole, say how many parts
they found and which is missing, and count a part run again once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bench.record import child_runs
from perflab.cli import app

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = "abcde"  # five examples in four parts: one part holds two


def _part(root: Path, uri: str, shard: str, results: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "SLURM_", "PERFLAB_CAMPAIGN"))}
    env |= {"COLUMNS": "200", "NO_COLOR": "1", "PERFLAB_RESULTS_DIR": str(results)}
    done = subprocess.run([sys.executable, "-m", "perflab", "run", "--chapters-dir", str(root), "--tracking-uri", uri,
                           "--device", "cpu", "--iterations", "3", "--shard", shard], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.split("MLflow parent run ")[1].split()[0]


def _cli(*args: str | Path) -> str:
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code in (0, 1), f"{args}: {result.output}{result.exception!r}"
    return result.output


@pytest.mark.slow  # five whole suites, one command each (the commands' reading of parts: the test below)
def test_a_suite_sharded_four_ways_reads_as_one_suite_every_variant_once(
    chapters: Callable[..., Path], tmp_path: Path
) -> None:
    root = chapters({f"ch07/{kind}_{x}.py": {} for x in EXAMPLES for kind in ("baseline", "optimized")})
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    parents = [_part(root, uri, f"{i}/4", tmp_path / "results") for i in (0, 1, 2)]
    out = _cli("show", "--tracking-uri", uri, "--run-id", parents[0])
    assert "3 of 4 parts; missing: 3/4" in out, out
    assert all(f"ch07:{x}" in out for x in "abce") and "ch07:d" not in out  # 0/4: a, e; 1/4: b; 2/4: c; 3/4: d

    first_one = [r.run_id for r in child_runs(parents[1], uri)]
    parents.append(_part(root, uri, "3/4", tmp_path / "results"))
    parents[1] = _part(root, uri, "1/4", tmp_path / "results")  # a part run again replaces its earlier run
    out = _cli("show", "--tracking-uri", uri)  # the latest suite: part 1/4
    assert "4 of 4 parts, none missing" in out, out
    rows = [line for line in out.splitlines() if line.startswith("| ch07:")]
    assert sorted(r.split("|")[1].strip() for r in rows) == [f"ch07:{x}" for x in EXAMPLES], out

    out = _cli("report", "--tracking-uri", uri, "--out", tmp_path / "report", "--no-log")
    assert "4 of 4 parts, none missing" in out
    report: dict[str, Any] = json.loads((tmp_path / "report" / "report.json").read_text())
    rows = [row for pairs in report["chapters"].values() for row in pairs]
    assert sorted(row["example"] for row in rows) == list(EXAMPLES) and report["overall"]["variants"] == 10
    assert len({row[k] for row in rows for k in ("run_id", "baseline_run_id")}) == 10  # the runs of the new 1/4
    assert not {row["run_id"] for row in rows} & set(first_one)
    assert "4 of 4 parts" in (tmp_path / "report" / "report.md").read_text()

    out = _cli("regressions", "--tracking-uri", uri, "--run-id", parents[3])
    assert "4 of 4 parts" in out
    counts = out.split(f"run {parents[3]}:")[1]
    assert sum(int(n) for n in counts.replace(",", " ").split()[::2]) == 2 * len(EXAMPLES), counts
    out = _cli("compare", "--tracking-uri", uri, parents[0], parents[2])  # one campaign, either part: itself
    assert out.count("campaign ") == 2 and "only in" not in out, out


def test_a_campaigns_parts_are_read_as_one_each_part_once_the_missing_named(tmp_path: Path) -> None:
    """bench.record.campaign on parent runs as the parts leave them (no suite run: the test above runs the
    commands): the latest completed run of a part counts, the run asked for stands for its own part."""
    from mlflow import MlflowClient

    from bench.record.campaign import CAMPAIGN_TAG, SHARD_TAG, campaign_line, campaign_of

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(uri)
    experiment = client.create_experiment("parts")

    def part(shard: str, status: str = "completed", campaign: str = "c1") -> str:
        run = client.create_run(experiment, tags={CAMPAIGN_TAG: campaign, SHARD_TAG: shard,
                                                  "perflab.suite_status": status})  # fmt: skip
        client.set_terminated(run.info.run_id)
        return run.info.run_id

    first, _, stopped = part("0/4"), part("1/4"), part("2/4", "interrupted")
    part("3/3", campaign="c1")  # another split of the suite: not a part of this one
    part("3/4", campaign="c2")  # another campaign
    assert campaign_of(first, uri).missing == [3]
    assert campaign_line(first, uri) == "campaign c1: 3 of 4 parts; missing: 3/4; not completed: 2/4 interrupted"
    again = part("2/4")  # the interrupted part run again: the completed run counts, unless the other is asked for
    assert campaign_of(first, uri).parents[2].run_id == again
    assert campaign_of(stopped, uri).parents[2].run_id == stopped
    last = part("3/4")
    assert campaign_line(last, uri) == "campaign c1: 4 of 4 parts, none missing"
    alone = client.create_run(experiment, tags={"perflab.suite_status": "completed"}).info.run_id
    assert campaign_line(alone, uri) is None and campaign_of(alone, uri).n_parts == 1  # a suite in one part
