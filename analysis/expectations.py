"""Proof of benefit: a suite's speedups held against reviewed expectations kept in the repo.

``expectations/<hardware slug>/<chapter>.yaml`` records, per example and optimized variant, the
speedup (and the percent of peak, when one was measured) that a named run achieved, and what the speedup is on
(``speedup_metric``: ``time`` for the call time, or a generation's ``ttft``, ``tpot``, ``throughput``...; a file
without it, on whatever the run's is):

    hardware: NVIDIA H100 80GB HBM3
    chapter: ch07
    examples:
      transpose:
        optimized: {speedup: 6.79, speedup_metric: time, pct_of_peak: null, run_id: <variant run>,
                    parent_run_id: <suite>}

Expectations change only through ``perflab expectations update`` (an example's pairs whose verdict is
``faster``, from one named, verified run) and review of the diff — never automatically, never clamped (INTEGRITY #9).
``check`` gives each optimized variant of a suite one status:

* ``pass`` — verified, and neither rule below says regressed;
* ``regressed`` — verified, but the run's 95 % interval of the speedup lies wholly below the expectation ×
  (1 − tolerance): its ``speedup_ci_high`` is under that floor (a run without a logged interval is judged on its
  point speedup, and its row says so); or its pct_of_peak is below the expected one × (1 − tolerance), where the
  roofline binds the run (not for a wall-clock time on a GPU or a per-token or rate speedup: ``roofline_exempt``,
  as the chapter READMEs judge them);
* ``failed`` — the variant or its baseline did not run ok, or the pair is not verified;
* ``skipped`` — the pair was skipped for what the host lacks (a second GPU, a tool), with the reason: nothing
  measured, nothing to hold against the expectation; as for ``perflab run``, no failure;
* ``needs-work`` — no expectation recorded for this hardware and variant, or one on another metric.

Why the interval: a pair's point speedup moves between machine instances by more than 5 % at the same code
(host-bound and wall-clock pairs by 10–40 %: a busy host's launches, its PCIe and its CPU), so a point below the
floor flags noise; a run whose own interval reaches the floor has not shown a loss. The share of a ceiling of a
pair the roofline does not bind moves as freely (0.1 % of copy bandwidth for a host-bound decode). Measured on the
H100 runs of 2026-11-26: docs/results/h100.md, 2026-11-28.
"""

from __future__ import annotations

import csv
import io
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from analysis.readme import roofline_exempt
from bench.errors import unparsable
from bench.measure import ceilings as peaks
from bench.record import StoredRun, campaign_of, latest_suite_run_id, pair_verdict, read_run, speedup_text

__all__ = ["CSV_COLUMNS", "DEFAULT_DIR", "Row", "check", "check_csv", "expectation_file", "update"]

DEFAULT_DIR = Path("expectations")
CSV_COLUMNS = (
    "chapter", "example", "variant", "status", "speedup", "expected", "pct_of_peak", "min_pct_of_peak", "notes",
    "run_id", "speedup_ci_low", "speedup_ci_high",
)  # fmt: skip


@dataclass(frozen=True)
class Row:
    chapter: str
    example: str
    variant: str
    status: str  # pass | regressed | failed | skipped | needs-work
    speedup: float | None
    expected: float | None
    pct_of_peak: float | None
    min_pct_of_peak: float | None
    notes: str
    run_id: str
    speedup_ci_low: float | None = None  # the run's 95 % interval of the speedup, when it logged one
    speedup_ci_high: float | None = None


def hardware_of(run: StoredRun) -> str | None:
    return run.tags.get("perflab.hardware") or run.tags.get("perflab.gpu")


def expectation_file(root: Path, hardware: str, chapter: str) -> Path:
    return root / peaks.slug(hardware) / f"{chapter}.yaml"


FILE_KEYS = ("chapter", "examples", "hardware")  # what a file holds; each variant's entry, ENTRY_KEYS
ENTRY_KEYS = ("commit", "parent_run_id", "pct_of_peak", "run_id", "speedup", "speedup_metric")


def _unknown(path: Path, where: str, keys: Any, accepted: tuple[str, ...]) -> None:
    """ValueError for the first key of ``keys`` not in ``accepted``, naming it, the closest accepted one, and all:
    a typo'd ``speedp`` would otherwise leave its variant without an expectation, and its row "pass"."""
    import difflib

    for key in keys:
        if key not in accepted:
            close = difflib.get_close_matches(str(key), accepted, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"{path}: {where}unknown key {key!r}{hint}; accepted: {', '.join(accepted)}")


def _load(path: Path) -> dict[str, Any]:
    """The expectations of ``path`` (``{}`` where there is no file), checked: ValueError naming the file and the
    first bad key or value."""
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise unparsable("expectations file", path, "YAML", exc,
                         "expected a mapping with an 'examples' mapping; fix or delete the file") from None  # fmt: skip
    if not isinstance(data, dict) or not isinstance(data.get("examples", {}), dict):
        raise ValueError(f"{path}: expected a mapping with an 'examples' mapping; fix or delete the file")
    _unknown(path, "", data, FILE_KEYS)
    if data.get("chapter", path.stem) != path.stem:
        raise ValueError(f"{path}: chapter {data['chapter']!r} in the file of {path.stem}; fix or delete the file")
    for example, variants in data.get("examples", {}).items():
        if not isinstance(variants, dict):
            raise ValueError(f"{path}: examples.{example}: expected a mapping of variant to its entry, "
                             f"got {variants!r}")  # fmt: skip
        for variant, entry in variants.items():
            where = f"examples.{example}.{variant}"
            if not isinstance(entry, dict):
                raise ValueError(f"{path}: {where}: expected a mapping with keys {', '.join(ENTRY_KEYS)}, "
                                 f"got {entry!r}")  # fmt: skip
            _unknown(path, f"{where}: ", entry, ENTRY_KEYS)
            for key in ("speedup", "pct_of_peak"):
                value = entry.get(key)
                if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value <= 0):
                    raise ValueError(f"{path}: {where}.{key} is {value!r}; accepted: a positive number"
                                     + (" or null" if key == "pct_of_peak" else ""))  # fmt: skip
    return data


def _suite(run_id: str | None, tracking_uri: str | None) -> tuple[str, list[StoredRun]]:
    run_id = run_id or latest_suite_run_id(tracking_uri)
    parent = read_run(run_id, tracking_uri)
    if parent.is_variant:
        raise ValueError(f"run {run_id!r} is the variant run {parent.name!r}; pass its suite {parent.parent_id!r}")
    parent.check_suite(run_id)
    runs = parent.check_variants(run_id, campaign_of(parent, tracking_uri).child_runs(tracking_uri))
    return parent.run_id, [r for r in runs if r.is_variant]


def _verdict(run: StoredRun, baseline: StoredRun | None, want: dict[str, Any] | None, tolerance: float) -> Row:
    t, m = run.tags, run.metrics
    speedup, pct = m.get("speedup"), m.get("pct_of_peak")
    on = t.get("perflab.speedup_metric", "time")  # what the speedup divides: the call time, TTFT, tokens/s ...
    expected = want.get("speedup") if want else None
    min_pct = want.get("pct_of_peak") if want else None
    status, notes = "pass", []
    if t.get("perflab.pair_status") == "skipped":  # a side skipped: the pair's verdict (bench.measure.compare)
        status, notes = "skipped", [t.get("perflab.verification") or "skipped"]
    elif t.get("perflab.status") != "ok" or baseline is None or baseline.tags.get("perflab.status") != "ok":
        base = "missing" if baseline is None else baseline.tags.get("perflab.status", "?")
        status, notes = "failed", [f"variant {t.get('perflab.status', '?')}, baseline {base}"]
    elif t.get("perflab.verified") != "true" or speedup is None:
        status, notes = "failed", [f"not verified: {t.get('perflab.verification', 'no comparison')}"]
    elif want is None:
        status, notes = "needs-work", [f"no expectation for {hardware_of(run)}; `perflab expectations update`"]
    elif want.get("speedup_metric", on) != on:  # a speedup on TTFT is no expectation for one on TPOT
        status = "needs-work"
        notes = [f"the expectation's speedup is on {want['speedup_metric']}, this run's on {on}; "
                 "`perflab expectations update`"]  # fmt: skip
    else:
        if expected is not None:
            status, said = _speedup_verdict(speedup, m.get("speedup_ci_high"), expected, tolerance)
            notes += said
        exempt = roofline_exempt(run) if min_pct is not None else None
        if exempt:  # the chapter READMEs' rule: the roofline does not bind a wall-clock or per-token number
            notes.append(f"pct_of_peak not judged: {exempt}")
        elif min_pct is not None:
            if pct is None:
                notes.append("pct_of_peak expected but not measured (no peak cached for this hardware)")
            elif pct < min_pct * (1 - tolerance):
                status = "regressed"
                notes.append(f"pct_of_peak {pct:.1f} < {min_pct:.1f}")
        source = want.get("run_id") or want.get("parent_run_id")
        if source:
            notes.append(f"expectation from run {source}")
    return Row(t["perflab.chapter"], t["perflab.example"], t["perflab.variant"], status, speedup, expected, pct,
               min_pct, "; ".join(notes), run.run_id, m.get("speedup_ci_low"), m.get("speedup_ci_high"))  # fmt: skip


def _speedup_verdict(speedup: float, high: float | None, expected: float, tolerance: float) -> tuple[str, list[str]]:
    """``regressed`` when the run's 95 % interval lies wholly below ``expected`` × (1 − ``tolerance``) (its upper
    end ``high`` under that floor); without an interval, when the point speedup is under it. With notes."""
    floor = expected * (1 - tolerance)
    short = f"speedup {speedup:.3f} < {expected:.3f} by {100 * (1 - speedup / expected):.1f} %"
    if high is None:
        note = "no speedup_ci_high logged: judged on the point speedup"
        return ("regressed", [short, note]) if speedup < floor else ("pass", [note])
    if high < floor:
        return "regressed", [f"{short}; its 95 % interval ends at {high:.3f}, below {floor:.3f}"]
    if speedup < floor:
        return "pass", [f"{short}, but its 95 % interval reaches {high:.3f} (floor {floor:.3f}): not shown slower"]
    return "pass", []


def check(
    run_id: str | None = None, root: Path = DEFAULT_DIR, tolerance: float = 0.05, tracking_uri: str | None = None
) -> tuple[str, list[Row]]:
    """(suite parent run id, one row per optimized variant) against ``root``'s expectations."""
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance is a fraction in [0, 1), but got {tolerance=}")
    if not root.is_dir():  # a mistyped --dir (or another working directory) read as "no expectation" everywhere
        what = "a file, not a directory" if root.exists() else "no such directory"
        raise ValueError(f"--dir {str(root)!r}: {what}; pass the expectations root, a folder per hardware key "
                         "(the repo's expectations/; `perflab expectations update` starts one)")  # fmt: skip
    run_id, runs = _suite(run_id, tracking_uri)
    by_name = {r.name: r for r in runs}
    rows = []
    for r in sorted(runs, key=lambda r: r.name):
        t = r.tags
        if t["perflab.variant"] == "baseline":
            continue
        chapter, example = t["perflab.chapter"], t["perflab.example"]
        hardware = hardware_of(r)
        doc = _load(expectation_file(root, hardware, chapter)) if hardware else {}
        want = (doc.get("examples", {}).get(example) or {}).get(t["perflab.variant"])
        rows.append(_verdict(r, by_name.get(f"{chapter}:{example}:baseline"), want, tolerance))
    return run_id, rows


def check_csv(rows: list[Row]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if v is None else v for k, v in asdict(row).items()})
    return buf.getvalue()


def update(
    run_id: str, target: str, root: Path = DEFAULT_DIR, tracking_uri: str | None = None
) -> tuple[Path, list[str]]:
    """Write one example's expectation from suite ``run_id``: each optimized variant whose pair is ``faster``.
    Returns (the file, a line per pair left out: its name and verdict).

    Refuses when any variant of the example is not ok or not verified, and when no pair of it is ``faster``: an
    expectation must come from a speedup the harness proved (a "no significant difference" of 1.13x [0.91, 1.42]
    is no speedup to hold a later run to). A pair left out keeps the entry it had, if any; other examples in the
    file are left as they are.
    """
    chapter, sep, example = target.partition(":")
    number = chapter.removeprefix("ch")
    if not sep or not number.isdigit() or not example:
        raise ValueError(f"--example takes chapter:example, e.g. ch07:transpose (or 7:transpose), but got {target!r}")
    chapter = f"ch{int(number):02d}"
    run_id, runs = _suite(run_id, tracking_uri)
    mine = [r for r in runs if (r.tags["perflab.chapter"], r.tags["perflab.example"]) == (chapter, example)]
    optimized = [r for r in mine if r.tags["perflab.variant"] != "baseline"]
    if not optimized:
        found = sorted({f"{r.tags['perflab.chapter']}:{r.tags['perflab.example']}" for r in runs})
        raise ValueError(f"suite {run_id} has no optimized variant of {chapter}:{example}; it has {found}")
    bad = [
        f"{r.name} ({r.tags.get('perflab.status')}, verified={r.tags.get('perflab.verified', 'false')})"
        for r in mine
        if r.tags.get("perflab.status") != "ok"
        or (r in optimized and (r.tags.get("perflab.verified") != "true" or "speedup" not in r.metrics))
    ]
    if bad:
        raise ValueError(f"refusing to record expectations from unverified or failed variants: {', '.join(bad)}")
    skipped = [f"{r.name}: {verdict} ({speedup_text(pair, verdict=False)})"
               for r in optimized if (verdict := pair_verdict(pair := _pair(r))) != "faster"]  # fmt: skip
    optimized = [r for r in optimized if pair_verdict(_pair(r)) == "faster"]
    if not optimized:
        raise ValueError(f"nothing recorded from suite {run_id}: no pair of {chapter}:{example} is faster ("
                         + "; ".join(skipped) + "); an expectation holds a decided speedup only")  # fmt: skip
    hardware = {hardware_of(r) for r in optimized}
    if len(hardware) != 1 or None in hardware:
        keys = sorted(map(str, hardware))
        raise ValueError(f"{chapter}:{example} in suite {run_id} has no single hardware key: {keys}")
    (key,) = hardware
    assert key is not None
    # The commit perflab stated for the suite (PERFLAB_GIT_COMMIT on a copied tree) wins over MLflow's
    # own git tag, which a copied tree with a stale .git gets wrong.
    parent_tags = read_run(run_id, tracking_uri).tags
    commit = parent_tags.get("perflab.git_commit")
    path = expectation_file(root, key, chapter)
    doc = _load(path) or {"hardware": key, "chapter": chapter, "examples": {}}
    doc["examples"][example] = (doc["examples"].get(example) or {}) | {
        r.tags["perflab.variant"]: {
            "speedup": r.metrics["speedup"],  # as measured: never rounded down or clamped
            "speedup_metric": r.tags.get("perflab.speedup_metric", "time"),  # what it divides (check compares it)
            "pct_of_peak": r.metrics.get("pct_of_peak"),  # None: no peak was cached when it ran
            "run_id": r.run_id,
            "parent_run_id": run_id,
            "commit": commit or r.tags.get("mlflow.source.git.commit"),
        }
        for r in sorted(optimized, key=lambda r: r.name)
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # --dir a file, or a directory that cannot be made
        raise ValueError(f"--dir {str(root)!r}: cannot write {str(path)!r} there ({exc.strerror}); pass a "
                         "writable expectations root") from None  # fmt: skip
    header = "# Reviewed expectations; written by `perflab expectations update`, changed only through review.\n"
    path.write_text(header + yaml.safe_dump(doc, sort_keys=True))
    return path, skipped


def _pair(run: StoredRun) -> dict[str, Any]:
    """An optimized variant's pair as ``pair_verdict`` and ``speedup_text`` read it, from its run."""
    m, t = run.metrics, run.tags
    return {"status": t.get("perflab.pair_status") or t.get("perflab.status"), "speedup": m.get("speedup"),
            "speedup_ci_low": m.get("speedup_ci_low"), "speedup_ci_high": m.get("speedup_ci_high"),
            "significance": t.get("perflab.significance")}  # fmt: skip
