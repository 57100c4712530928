"""A suite run in parts (``perflab run --shard I/N`` on several hosts, each part a parent run of its own) read
back whole: the parts share ``perflab.campaign``; each part counts once, as its latest completed run (else its
latest run, whatever its status), the run asked for standing for its own part. What the reading commands say
first: how many parts they found, which are missing."""

from __future__ import annotations

import json
from dataclasses import dataclass

from bench.record.store import StoredRun, child_runs, read_artifact_text, read_run, tagged_runs

CAMPAIGN_TAG, SHARD_TAG = "perflab.campaign", "perflab.shard"  # as bench.cli.shard writes them


@dataclass(frozen=True)
class Campaign:
    """The parent runs of one suite's parts: ``parents[i]`` is part ``i`` of ``n_parts``."""

    id: str | None
    n_parts: int
    parents: dict[int, StoredRun]

    @property
    def missing(self) -> list[int]:
        return [i for i in range(self.n_parts) if i not in self.parents]

    def line(self) -> str | None:
        """One line for a sharded suite: parts found, missing, not completed; None for a suite in one part."""
        if self.n_parts == 1 and not self.missing:
            return None
        n = self.n_parts
        text = f"campaign {self.id}: {len(self.parents)} of {n} parts"
        if self.missing:
            text += "; missing: " + ", ".join(f"{i}/{n}" for i in self.missing)
        else:
            text += ", none missing"
        status = {i: p.tags.get("perflab.suite_status") or p.status.lower() for i, p in self.parents.items()}
        unfinished = [f"{i}/{n} {s}" for i, s in sorted(status.items()) if s != "completed"]
        return text + (f"; not completed: {', '.join(unfinished)}" if unfinished else "")

    def child_runs(self, tracking_uri: str | None = None) -> list[StoredRun]:
        """The nested runs of every part, sorted by name (each variant once: the parts split the examples)."""
        runs = [r for _, p in sorted(self.parents.items()) for r in child_runs(p.run_id, tracking_uri)]
        return sorted(runs, key=lambda r: r.name)


def _part(parent: StoredRun) -> tuple[int, int] | None:
    i, slash, n = parent.tags.get(SHARD_TAG, "").partition("/")
    return (int(i), int(n)) if slash and i.isdigit() and n.isdigit() and int(i) < int(n) else None


def _parents(cid: str, tracking_uri: str | None) -> list[StoredRun]:
    """The ended parent runs of a campaign, newest first. Its variant runs carry the tag too (a suite's tags go on
    each) and would crowd a search's 1000 results; a parent has ``perflab.suite_status`` once ended, a part still
    running none (it reads as missing until then)."""
    runs = tagged_runs({CAMPAIGN_TAG: cid}, tracking_uri, 1000, also="tags.`perflab.suite_status` LIKE '%'")
    return [r for r in runs if not r.is_variant]


def campaign_of(parent: StoredRun | str, tracking_uri: str | None = None) -> Campaign:
    """The campaign of a suite's parent run (a run or its id); a suite in one part is a campaign of one."""
    parent = read_run(parent, tracking_uri) if isinstance(parent, str) else parent
    cid, part = parent.tags.get(CAMPAIGN_TAG), _part(parent)
    if cid is None or part is None:
        return Campaign(cid, 1, {0: parent})
    parents = {part[0]: parent}
    for run in _parents(cid, tracking_uri):  # newest first
        other = _part(run)
        if other is None or other[1] != part[1]:
            continue
        held = parents.get(other[0])
        completed = run.tags.get("perflab.suite_status") == "completed"
        if held is None or (completed and held.run_id != parent.run_id and
                            held.tags.get("perflab.suite_status") != "completed"):  # fmt: skip
            parents[other[0]] = run
    return Campaign(cid, part[1], parents)


def campaign_line(run_id: str, tracking_uri: str | None = None) -> str | None:
    """``Campaign.line`` of a suite's parent run; None for a suite in one part or a variant run."""
    run = read_run(run_id, tracking_uri)
    return None if run.is_variant else campaign_of(run, tracking_uri).line()


_CUT = {
    "timeout": "ended at its --suite-timeout",
    "interrupted": "was interrupted (Ctrl-C, SIGTERM)",
    "crashed": "crashed",
}


def cut_short_line(run_id: str, tracking_uri: str | None = None) -> str | None:
    """For a suite stopped before all its variants ran (``--suite-timeout``, Ctrl-C, a signal, a crash) or not
    ended yet (being written by another process): one line saying so, naming the variants that did not finish (its
    ``summary.json``'s ``not_finished``), so a reader's table, counts and geomean are not taken for the whole
    suite's; None for a suite that completed or a variant run."""
    run = read_run(run_id, tracking_uri)
    how = _CUT.get(run.tags.get("perflab.suite_status", ""))
    if run.is_variant:
        return None
    if how is None and run.status == "RUNNING" and "perflab.suite_status" not in run.tags:
        return (f"suite {run.run_id} has not ended (still running, or its process was killed before it could end "
                "it): only the variants logged so far are read")  # fmt: skip
    if how is None:
        return None
    try:
        left = json.loads(read_artifact_text(run.run_id, "summary.json", tracking_uri)).get("not_finished")
    except (LookupError, ValueError, AttributeError):
        left = None
    if not isinstance(left, list):
        return f"suite {run.run_id} {how}: only the variants that finished are read (which did not is not recorded)"
    if not left:
        return f"suite {run.run_id} {how}, after its last variant had finished"
    return f"suite {run.run_id} {how}: only the variants that finished are read; {len(left)} did not: " + ", ".join(
        map(str, left)
    )
