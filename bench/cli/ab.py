"""``perflab ab REF CAND [CAND ...]``: a reference file and candidate files timed, verified and logged exactly as a
chapter pair is (isolation, intervals, MLflow), with no chapters directory; one row per candidate.

Files are perflab benchmarks (``get_benchmark()``) or KernelBench-format problems (a reference with ``Model``,
``get_inputs()``, ``get_init_inputs()``; candidates with ``ModelNew``: bench.define.kernelbench), told apart by
reading them, not importing them (this process never imports torch). A directory stands for its files: the one
reference among them (a KernelBench ``Model`` file, or a benchmark named ``reference*.py``/``baseline*.py``) and
every candidate; a directory of such directories is one pair per problem.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from bench.cli.again import given_options
from bench.cli.common import (
    ColdCompileOpt,
    ColdStartOpt,
    DeviceOpt,
    ExperimentOpt,
    NoTrackOpt,
    RoundChildrenOpt,
    RoundsOpt,
    SmokeOpt,
    TimeoutOpt,
    cli_layer,
)
from bench.cli.deadline import check_suite_timeout
from bench.cli.report import AB_CHAPTER, out_dir
from bench.cli.run import (
    ConfigOpt,
    GpusOpt,
    IterationsOpt,
    JobsOpt,
    KeepOpt,
    NoiseOpt,
    OutOpt,
    SeedOpt,
    SuiteTimeoutOpt,
    TimingModeOpt,
    TrackingUriOpt,
    WarmupOpt,
    check_store,
    execute,
)
from bench.cli.workers import check_count, check_device, check_workers
from bench.define.config import load_config_file, resolve_config
from bench.define.discovery import Example
from bench.define.hints import written_for
from bench.define.kernelbench import file_kind
from bench.define.result import VariantSpec
from bench.errors import PerflabError

_REFERENCE_NAME = re.compile(r"^(reference|ref|baseline)([_\-.].*)?$")

FilesArg = Annotated[
    list[Path],
    typer.Argument(
        help="the reference file, then candidate files; or a directory of them (KernelBench format: the Model file "
        "is the reference, ModelNew files the candidates), or a directory of such directories",
        show_default=False,
    ),
]


def ab(
    ctx: typer.Context, files: FilesArg,
    iterations: IterationsOpt = None, warmup: WarmupOpt = None, seed: SeedOpt = None,
    device: DeviceOpt = None, timeout_multiplier: TimeoutOpt = None, smoke: SmokeOpt = None,
    timing_mode: TimingModeOpt = None, noise_target: NoiseOpt = None, config: ConfigOpt = None,
    experiment: ExperimentOpt = None, tracking_uri: TrackingUriOpt = None, no_track: NoTrackOpt = False,
    keep_workdir: KeepOpt = None, cold_start: ColdStartOpt = False, gpus: GpusOpt = None, jobs: JobsOpt = None,
    rounds: RoundsOpt = None, cold_compile: ColdCompileOpt = False, round_children: RoundChildrenOpt = None,
    suite_timeout: SuiteTimeoutOpt = None, out: OutOpt = None,
) -> None:  # fmt: skip
    """Time candidate files against a reference file: verified, with intervals, logged to MLflow."""
    suite_layer = load_config_file(config) if config else None
    layer = cli_layer(iterations=iterations, warmup=warmup, seed=seed, device=device, smoke=smoke,
                      timeout_multiplier=timeout_multiplier, timing_mode=timing_mode, noise_target=noise_target,
                      min_rounds=rounds, max_rounds=rounds, cold_compile=True if cold_compile else None,
                      round_children=round_children)  # fmt: skip
    effective = resolve_config(suite_layer, layer)
    check_suite_timeout(suite_timeout)
    check_device(effective.device)
    written = out_dir(out)
    examples = examples_of(files)
    if not no_track:
        check_store(tracking_uri)
    check_workers(gpus, jobs, effective.device)  # before the server's start-up, as `perflab run` does
    check_count("--jobs", jobs)
    targets = ",".join(e.target for e in examples)
    execute(examples, effective, suite_layer, layer, targets, {"perflab.ab": "true"}, experiment=experiment,
            tracking_uri=tracking_uri, no_track=no_track, cold_start=cold_start, overlap=True, gpus=gpus, jobs=jobs,
            ray=None, chapters_dir=None, keep_workdir=keep_workdir, suite_timeout=suite_timeout,
            files=written, again=given_options(ctx))  # fmt: skip


def examples_of(paths: list[Path]) -> list[Example]:
    """The pairs ``paths`` stand for: files (the first the reference), one directory, or a directory of problems."""
    if not paths:
        raise PerflabError("perflab ab needs a reference file and candidate files, or a directory of them")
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise PerflabError(f"no such file or directory: {', '.join(missing)}")
    if len(paths) == 1 and paths[0].is_dir():
        problems = sorted(d for d in paths[0].iterdir() if d.is_dir() and not d.name.startswith(("_", ".")))
        if not any(paths[0].glob("*.py")) and problems:
            return [_example(*_directory(d), name=d.name) for d in problems if any(d.glob("*.py"))]
        return [_example(*_directory(paths[0]), name=paths[0].resolve().name)]
    dirs = [str(p) for p in paths if p.is_dir()]
    if dirs:
        raise PerflabError(f"{', '.join(dirs)}: a directory is given alone (perflab ab DIR); with files, name files")
    kinds = {p: _kind(p) for p in paths}
    bad = [f"{p} ({k})" for p, k in kinds.items() if k not in _KINDS]
    if bad:  # what is accepted, where a file is not of an accepted kind (not where it does not parse)
        kind_only = any(not k.startswith(("syntax error", "unreadable")) for k in kinds.values() if k not in _KINDS)
        raise PerflabError(f"not a benchmark: {', '.join(bad)}" + (f"; {_ACCEPTED}" if kind_only else ""))
    if len(paths) < 2:
        raise PerflabError(f"perflab ab {paths[0]}: name at least one candidate file after the reference")
    return [_example(paths[0], paths[1:])]


_KINDS = ("benchmark", "reference", "candidate")
_ACCEPTED = (
    "accepted: a file with get_benchmark() or module-level setup() and benchmark_fn(), or a KernelBench file "
    "(Model and get_inputs(); or ModelNew)"
)


def _kind(path: Path) -> str:
    if path.suffix != ".py":
        return "not a .py file"
    try:
        return file_kind(path) or written_for(path)
    except SyntaxError as exc:
        return f"syntax error at line {exc.lineno}: {exc.msg}"
    except (OSError, UnicodeDecodeError) as exc:
        return f"unreadable: {exc}"


def _directory(directory: Path) -> tuple[Path, list[Path]]:
    """The reference and the candidates among ``directory``'s files (others, helpers, are left alone)."""
    files = sorted(p for p in directory.glob("*.py") if not p.name.startswith("_"))
    kinds = {p: _kind(p) for p in files}
    references = [p for p, k in kinds.items() if k == "reference"] or [
        p for p, k in kinds.items() if k == "benchmark" and _REFERENCE_NAME.match(p.stem)
    ]
    if len(references) != 1:
        found = ", ".join(p.name for p in references) or "none"
        raise PerflabError(
            f"{directory}: one reference needed (a KernelBench file with Model and get_inputs(), or a benchmark named "
            f"reference*.py or baseline*.py), found {found}"
        )
    reference = references[0]
    candidates = [p for p, k in kinds.items() if p != reference and k in ("benchmark", "candidate")]
    if not candidates:
        raise PerflabError(f"{directory}: no candidate beside {reference.name} (ModelNew or get_benchmark() files)")
    return reference, candidates


def _example(reference: Path, candidates: list[Path], name: str | None = None) -> Example:
    """The pair of ``reference`` and ``candidates``, named ``name`` (a problem's directory) or for the reference."""
    ref_kind = _kind(reference)
    for c in candidates:
        if _kind(c) == "candidate" and ref_kind != "reference":
            raise PerflabError(
                f"{c} is a KernelBench candidate (ModelNew): its inputs come from a KernelBench reference (Model and "
                f"get_inputs()), and {reference} is not one"
            )
    name = _name(name or reference.stem)
    variants = {_variant(c.stem): c for c in candidates}
    if len(variants) < len(candidates):
        raise PerflabError(f"candidates with one name: {', '.join(str(c) for c in candidates)}; rename one")
    if reference.resolve() in {c.resolve() for c in candidates}:
        raise PerflabError(f"{reference} is both the reference and a candidate")
    ref = str(reference.resolve())

    def spec(variant: str, path: Path) -> VariantSpec:
        return VariantSpec(chapter=AB_CHAPTER, example=name, variant=variant, path=str(path.resolve()),
                           reference=ref if ref_kind == "reference" else None)  # fmt: skip

    return Example(AB_CHAPTER, name, baseline=spec("baseline", reference),
                   optimized=[spec(v, p) for v, p in variants.items()])  # fmt: skip


def _variant(stem: str) -> str:
    """A candidate's variant name: ``optimized_<stem>``, or its stem where it is one already (``optimized_sum.py``:
    ``optimized_sum``, not ``optimized_optimized_sum``)."""
    name = _name(stem)
    return name if name == "optimized" or name.startswith("optimized_") else f"optimized_{name}"


def _name(stem: str) -> str:
    """A file's stem as a name in a pair's key: letters, digits and underscores."""
    return re.sub(r"\W", "_", stem).strip("_") or "file"
