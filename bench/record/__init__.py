"""How results are recorded: MLflow runs (a parent per suite, a nested run per variant), the run manifest,
the suite summary; and reading the store back.

* ``tracking``: the ``Tracker`` that logs a suite (and parents of other runs: sweep trials, kernel providers);
  ``contract``: what a variant's run carries (tags, metrics, params), from its result alone; ``pairs``: what an
  optimized variant's run carries of its pair, and a pair's row read back (its medians and the rates at them).
* ``campaign``: a suite run in parts (``--shard I/N``) read back whole, each part once.
* ``store``: the store outside a suite's logging: reading runs back as plain ``StoredRun`` data (``stored``; a
  run id or a unique prefix of 8 or more of its digits), standalone
  runs (selfcheck, peak), files attached to a run; where commands write files of their own (``results_dir``);
  ``unopened``: a store MLflow cannot open or read (``file:``, a damaged ``.db``) as one line, not a traceback.
* ``manifest``: the host part of a run's manifest (git, Python, OS, selected environment, secrets redacted);
  ``summary``: the suite's summary.json / summary.md, each pair's verdict, where the time went (``stage_split``);
  ``outdir``: ``perflab run --out DIR``'s files (each variant as its run holds it, the summary, a JUnit XML);
* ``units``: numbers as tables print them (a unit per column, named in its header).

Invariants: only this package imports mlflow, and only when a function needs it (``store.client``), never
at import: the child processes never import it, and a command that does not log never pays for it. A
run logs what was measured and nothing else: no metric is invented, clamped or filled in.

Public (for the packages built on the harness: analysis, sweeps, kernels): the names in ``__all__``.
"""

from bench.record.campaign import Campaign, campaign_line, campaign_of, cut_short_line
from bench.record.manifest import host_manifest
from bench.record.pairs import at_median, pair_baseline
from bench.record.store import (
    StoredRun,
    benchmark_runs,
    child_runs,
    latest_suite_run_id,
    log_run,
    log_text_artifacts,
    read_artifact_text,
    read_run,
    results_dir,
    suite_runs,
    tagged_runs,
)
from bench.record.summary import (
    VERDICTS,
    Compared,
    basis_of,
    pair_verdict,
    rounds_text,
    speedup_text,
    verdict_text,
    verdicts_text,
)
from bench.record.tracking import Tracker
from bench.record.units import ENERGY_UNITS, RATE_UNITS, TIME_UNITS, column, sig, time_text

__all__ = [
    "at_median",
    "pair_baseline",
    "VERDICTS",
    "Compared",
    "ENERGY_UNITS",
    "RATE_UNITS",
    "TIME_UNITS",
    "Campaign",
    "StoredRun",
    "Tracker",
    "basis_of",
    "benchmark_runs",
    "campaign_line",
    "campaign_of",
    "cut_short_line",
    "child_runs",
    "host_manifest",
    "latest_suite_run_id",
    "log_run",
    "column",
    "log_text_artifacts",
    "read_artifact_text",
    "pair_verdict",
    "read_run",
    "results_dir",
    "rounds_text",
    "sig",
    "speedup_text",
    "suite_runs",
    "tagged_runs",
    "time_text",
    "verdict_text",
    "verdicts_text",
]
