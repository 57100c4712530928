"""One suite in parts: ``perflab run --shard I/N`` on several hosts (a Slurm job array), each part its own parent
run, all of them one campaign that the reading commands join back (bench.record.campaign)."""

from __future__ import annotations

import hashlib
import json
import os
import uuid

from bench.define.config import BenchmarkConfig
from bench.define.discovery import Example
from bench.errors import PerflabError

CAMPAIGN_TAG, SHARD_TAG = "perflab.campaign", "perflab.shard"


def shard_of(examples: list[Example], shard: str) -> list[Example]:
    """``I/N``: every N-th example from the I-th, in target order; the same partition on every host for one
    checkout (a Slurm job array runs ``--shard $SLURM_ARRAY_TASK_ID/N``)."""
    i, n = _parse(shard)
    part = sorted(examples, key=lambda e: e.target)[i::n]
    if not part:
        raise PerflabError(f"--shard {shard}: no example falls in this part ({len(examples)} examples in all)")
    return part


def _parse(shard: str) -> tuple[int, int]:
    i, slash, n = shard.partition("/")
    if not (slash and i.strip().isdigit() and n.strip().isdigit()) or not 0 <= int(i) < int(n):
        raise PerflabError(f"--shard {shard!r}: expected I/N with 0 <= I < N, e.g. 0/4 (Slurm: $SLURM_ARRAY_TASK_ID/4)")
    return int(i), int(n)


def campaign_tags(shard: str | None, examples: list[Example], effective: BenchmarkConfig) -> dict[str, str]:
    """The parent run's ``perflab.campaign`` (and ``perflab.shard``, ``I/N``). Parts started apart must agree on
    the id without talking: ``$PERFLAB_CAMPAIGN`` when set, else the Slurm array's job id, else one derived from
    what makes the parts one suite (the checkout's commit, every example before the split, N, the settings), so
    a part run again replaces its earlier run in the campaign. An unsharded suite is a campaign of its own."""
    stated = os.environ.get("PERFLAB_CAMPAIGN") or (
        f"slurm-{os.environ['SLURM_ARRAY_JOB_ID']}" if os.environ.get("SLURM_ARRAY_JOB_ID") else None
    )
    if shard is None:
        return {CAMPAIGN_TAG: stated or uuid.uuid4().hex[:16]}
    i, n = _parse(shard)
    if stated is None:
        from bench.record.manifest import git_info

        what = [git_info().get("commit"), sorted(e.target for e in examples), n, effective.model_dump(mode="json")]
        stated = hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:16]
    return {CAMPAIGN_TAG: stated, SHARD_TAG: f"{i}/{n}"}
