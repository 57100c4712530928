"""What ``perflab run`` tells at a suite's end: the table, the summary on the parent run, where the time went (the
workers, and the wall split by stage), and for CI pipelines the files of ``--out DIR`` and a stopped suite's
unfinished pairs named."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.cli.common import energy_table, table
from bench.cli.fit import wrapped
from bench.cli.output import console, err_console
from bench.define.discovery import Example
from bench.define.result import Comparison, SuiteResult, VariantResult

if TYPE_CHECKING:
    from bench.isolate.sink import BackgroundSink
    from bench.record.outdir import OutDir
    from bench.record.upload import SpoolSink

Finished = list[tuple[VariantResult, Comparison | None]]


@dataclass
class Stopped:
    """A suite that ended before its last variant: ``status`` (``timeout``, ``interrupted``), ``why`` in words, the
    keys of the variants that did not finish, and the examples to run again (an example half done runs whole)."""

    status: str
    why: str
    not_finished: list[str] = field(default_factory=list)
    rest: str = ""  # the command that runs the examples left


# The chapter ``perflab ab``'s pairs are filed under (bench.cli.ab): the rest of such a suite is ``perflab ab FILES``.
AB_CHAPTER = "ab"


def stopped(
    examples: Sequence[Example], finished: Finished, status: str, why: str, chapters_dir: Path | None = None,
    options: Sequence[str] = (),
) -> Stopped:  # fmt: skip
    done = {r.spec.key for r, _ in finished}
    left = [v.key for e in examples for v in e.variants if v.key not in done]
    return Stopped(status, why, left, rest_command(examples, done, chapters_dir, options))


def rest_command(
    examples: Sequence[Example], done: set[str], chapters_dir: Path | None = None, options: Sequence[str] = ()
) -> str:
    """The command that runs the examples with a variant not in ``done`` (an example half done runs whole): ``perflab
    run -t ...`` with the ``--chapters-dir`` they came from, or ``perflab ab`` with an ab pair's files; "" for none.
    ``options``: the stopped command's own that say how and where it measured (bench.cli.again), repeated so that
    the rest is measured as the rest of its suite was; shell-quoted."""
    import shlex

    options = list(options)
    if "--chapters-dir" in options:  # named by the command already
        chapters_dir = None
    left = [e for e in examples if any(v.key not in done for v in e.variants)]
    ab = [e for e in left if e.chapter == AB_CHAPTER]
    commands = [shlex.join(["perflab", "ab", *(v.path for v in e.variants), *options]) for e in ab]
    targets = [e.target for e in left if e.chapter != AB_CHAPTER]
    if targets:
        where = ["--chapters-dir", str(chapters_dir)] if chapters_dir is not None else []
        commands.insert(0, shlex.join(["perflab", "run", "-t", ",".join(targets), *where, *options]))
    return "; ".join(commands)


def partial_suite(
    examples: Sequence[Example], finished: Finished, wall_s: float, timeline: Sequence[dict[str, Any]] = ()
) -> SuiteResult:
    """The suite of the variants that finished, in example order (variants in file order), with ``timeline``: the
    time-line entries recorded before it stopped (each child that ran, a round of an unfinished example's
    included), by start as a whole suite's."""
    order = {spec.key: n for n, spec in enumerate(v for e in examples for v in e.variants)}
    results = sorted((r for r, _ in finished), key=lambda r: order.get(r.spec.key, len(order)))
    pairs = [c for _, c in sorted(finished, key=lambda f: order.get(f[0].spec.key, len(order))) if c is not None]
    unpaired = [e.target for e in examples if not e.optimized]
    return SuiteResult(variants=results, comparisons=pairs, unpaired=unpaired, wall_s=wall_s,
                       timeline=sorted(timeline, key=lambda t: t["start_s"]))  # fmt: skip


def report_suite(
    suite: SuiteResult, tracker: SpoolSink | None, sink: BackgroundSink | None, cold_start: bool,
    before_s: float | None, out: OutDir | None = None, stop: Stopped | None = None,
) -> bool:  # fmt: skip
    """The summary on the parent run (and in ``out``), the table, and where the time went; False when the results
    could not be logged (they are kept on disk, and one line says where). ``stop``: the suite ended early."""
    from bench.record.summary import counts_text, stage_line, summary_dict, summary_markdown

    first_s = suite.time_breakdown().get("first_start_s", 0.0)  # the server's start, before variant 1
    command_s = before_s + first_s if before_s is not None else None
    summary = summary_dict(suite, logging_s=sink.busy_s if sink is not None else None, command_s=command_s)
    # how it ended, for a CI step reading summary.json (the parent run's perflab.suite_status)
    summary.update(suite_status=stop.status if stop else "completed", not_finished=stop.not_finished if stop else [])
    markdown = summary_markdown(summary) + stopped_markdown(stop)
    if out is not None:  # before the store: a CI step finds the files whatever the store does
        out.finish(summary, markdown, stop.not_finished if stop else [], stop.why if stop else "")
    spooled = tracker.finish(markdown, summary, failed=False, interrupted=stop is not None) if tracker else None
    if suite.comparisons:
        console.print(table(suite))
    energy = energy_table(suite)
    if energy is not None:
        console.print(energy)
    console.print(
        f"{summary['n_variants_ok']}/{summary['n_variants']} variants ok, "
        f"{summary['n_pairs_verified']}/{summary['n_pairs']} pairs verified in {suite.wall_s:.1f} s",
        markup=False,
    )
    if summary["n_pairs"]:  # every pair under its verdict: the counts add up (README: reading the verdicts)
        console.print(wrapped(counts_text(summary), console.width), markup=False, soft_wrap=True)
    lone = _one_round_on_the_host(suite)
    if lone:  # a sentence, wrapped between its words at the console's width (a log at COLUMNS=80 too)
        console.print(f"note: {lone} verdict(s) of one round a side on the host's clock: their intervals assume a "
                      "spread between processes (run_noise, 2 %) that a busy host exceeds; rounds (the default) "
                      "measure it", markup=False)  # fmt: skip
    if tracker is not None and not spooled:  # bench.audit.wall reads the id back from this line
        console.print(f"MLflow parent run {tracker.parent_run_id} in experiment {tracker.experiment_name!r}",
                      markup=False)  # fmt: skip
        console.print(f"  browse: {browse_command(tracker.tracking_uri)}", markup=False, soft_wrap=True)
    closing = [*time_lines(suite, sink, cold_start, before_s), stage_line(summary["stages_s"], len(suite.variants))]
    if out is not None:
        closing.append(f"files: {out.root} (summary.json, summary.md, junit.xml, a directory per variant)")
    for text in closing:  # wrapped between words, a hanging indent under each (a path or a figure never cut)
        console.print(wrapped(text, console.width), markup=False, soft_wrap=True, highlight=False)
    if stop is not None:
        print_stopped(stop, len(suite.variants))
    if spooled:
        err_console.print(spooled, markup=False, soft_wrap=True)
    return not spooled


def browse_command(uri: str) -> str:
    """Where to browse a store: a server's address, else the ``mlflow ui`` command for it, shell-quoted so that it
    pastes as it is (a store under a directory with a space in its name)."""
    import shlex

    return uri if uri.startswith(("http:", "https:")) else f"mlflow ui --backend-store-uri {shlex.quote(uri)}"


def _one_round_on_the_host(suite: SuiteResult) -> int:
    """The pairs read "faster" or "slower" from one child a side on the host's clock (``--rounds 1``): A/A pairs of a
    small op there read 0.71-1.61x on a busy 2-core host, the processes' spread beyond the interval's assumed one."""
    host = {v.spec.key for v in suite.variants if v.timing is not None and v.timing.mode == "cpu"
            and len(v.timing.rounds or [1]) < 2}  # fmt: skip
    return sum(1 for c in suite.comparisons if f"{c.chapter}:{c.example}:{c.variant}" in host and c.status == "ok"
               and c.significance in ("faster", "slower") and len(c.round_speedups or []) < 2)  # fmt: skip


def stopped_markdown(stop: Stopped | None) -> str:
    """``summary.md``'s closing section for a suite that ended early: why, and each variant not finished."""
    if stop is None:
        return ""
    names = "".join(f"- {k}\n" for k in stop.not_finished) or "- none\n"
    return f"\n## Not finished\n\nThe suite stopped early: {stop.why}. These variants did not finish:\n\n{names}"


def print_stopped(stop: Stopped, n_done: int) -> None:
    """Two lines on stderr: why the suite stopped and what did not finish; the command that runs the rest."""
    left = ", ".join(stop.not_finished) or "none"
    err_console.print(f"{stop.why} after {n_done} of {n_done + len(stop.not_finished)} variants; not finished: "
                      f"{left}", markup=False, soft_wrap=True)  # fmt: skip
    if stop.rest:
        err_console.print(f"the rest: {stop.rest}", markup=False, soft_wrap=True)


def time_lines(suite: SuiteResult, sink: BackgroundSink | None, cold_start: bool, before_s: float | None) -> list[str]:
    """Where a suite's time went, a short line each: the workers, the start, host-bound waits, children started
    ahead, MLflow, the server."""
    out = []
    b = suite.time_breakdown()
    if b:
        beside = f" ({b['compare_beside_s']:.1f} s beside the next)" if b["compare_beside_s"] >= 0.05 else ""
        # after each child exited, besides its compare, keeping its worker: its profile children, logging
        other = sum(float(t.get("other_s") or 0.0) for t in suite.timeline if not t.get("beside"))
        after = f", {other:.1f} s profiling and logging after the runs" if other >= 0.05 else ""
        out.append(f"time: {b['workers']} worker(s), {b['run_s']:.1f} s running variants, {b['compare_s']:.1f} s "
                   f"checking outputs{beside}{after}, {b['idle_s']:.1f} s idle")  # fmt: skip
        began = f"the suite began {before_s:.2f} s after the command started; " if before_s is not None else ""
        out.append(f"  {began}variant 1 at {b['first_start_s']:.1f} s")
        if suite.cluster_s:
            c = suite.cluster_s
            out.append(f"  Ray: joined the cluster in {c['connect_s']:.1f} s before the suite, left it in "
                       f"{c['shutdown_s']:.1f} s after")  # fmt: skip
        if b.get("alone_wait_s", 0.0) >= 0.05:
            out.append(f"  host-clocked variants waited {b['alone_wait_s']:.1f} s to run alone on the host")
        if b["ahead_s"] >= 0.05:
            out.append(f"  children started ahead ran {b['ahead_s']:.1f} s beside the previous variant "
                       f"({b['late_s']:.1f} s late)")  # fmt: skip
    if sink is not None and sink.ready_s is not None and sink.wait_s is not None:
        out.append(f"  MLflow opened in {sink.ready_s:.1f} s beside the variants, logged {sink.wait_s:.1f} s after "
                   "the last")  # fmt: skip
    if not cold_start:
        from bench.isolate import server

        out.append(
            "  server: started by this command (its imports delayed the first variant)"
            if server.STARTED_HERE
            else "  server: kept from an earlier command (`perflab server stop` ends it)"
        )
    return out


def out_dir(path: Path | None) -> OutDir | None:
    """``--out DIR``: checked writable before anything runs (made as the files are written); None without it."""
    if path is None:
        return None
    from bench.cli.output import writable_dir
    from bench.record.manifest import host_manifest
    from bench.record.outdir import OutDir

    return OutDir(writable_dir(path, "--out"), host_manifest)
