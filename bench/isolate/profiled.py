"""Profile children: after a variant's timed run (``--profile``), or alone (``perflab profile``), one child
per tool in job mode ``profile`` (startup → setup → warmup → profiling → teardown), the same runner and stage
limits as a timed child, the profiling stage bounded by ``profiling_timeout_seconds``. ncu and nsys wrap a
cold-started child (bench.profile.tools has their command lines and reads their reports). Timed numbers never
come from a profile child.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from bench.define.config import Layer, resolve_config
from bench.define.result import Profile, VariantResult, VariantSpec
from bench.isolate.process import cuda_available
from bench.isolate.runner import run_variant
from bench.profile.sanitize import EXECUTABLE, SANITIZE_ENV, SANITIZERS, read_sanitizer, sanitizer_command
from bench.profile.tools import TOOLS, TRACE, ncu_command, nsys_command, read_ncu
from bench.profile.verdict import verdict_for


def tools_for(mode: str) -> list[str]:
    """The tools of a profile mode: "all" the profilers, "sanitize" both compute-sanitizer tools, else the one."""
    return list(TOOLS) if mode == "all" else list(SANITIZERS) if mode == "sanitize" else [mode]


def profile_variant(
    spec: VariantSpec,
    workdir: str | Path,
    suite_layer: Layer = None,
    cli_layer: Layer = None,
    timed: VariantResult | None = None,
    cold_start: bool = False,
    env: dict[str, str] | None = None,
) -> VariantResult:
    """Profile one variant with the configured tools, each in its own child; never raises for a tool.

    Returns the first profile child's result (its stages; no timing) with ``profile`` filled in, the
    verdict included; a suite copies ``profile`` onto the timed result. ``profile.split_s`` says where its
    ``wall_s`` went: the children's stages summed over tools (startup, setup, warmup, profiling, teardown), and
    the torch tool's profiling stage in parts (torch_calls, torch_stop: the events gathered, torch_export,
    torch_summary: the top ops).
    """
    t0 = time.monotonic()
    config = resolve_config(timed.config if timed is not None else None, suite_layer, cli_layer)
    wd = Path(workdir)
    out = wd / "profile"
    out.mkdir(parents=True, exist_ok=True)
    profile = Profile(dir=str(out))
    first: VariantResult | None = None
    device = timed.device if timed is not None else _expected_device(config.device)
    for tool in tools_for(config.profile_mode):
        why = _skip_reason(tool, device)
        if why:
            profile.tools[tool] = f"skipped: {why}"
            continue
        wrapper: list[str] | None = None
        tool_env = env
        if tool in SANITIZERS:
            wrapper = sanitizer_command(shutil.which(EXECUTABLE) or EXECUTABLE, tool, out / f"{tool}.log")
            tool_env = {**(env or {}), **SANITIZE_ENV}
        elif tool == "ncu":
            wrapper = ncu_command(shutil.which("ncu") or "ncu", config.ncu_preset, out / "profile")
        elif tool == "nsys":
            wrapper = nsys_command(shutil.which("nsys") or "nsys", out / "profile")
        try:
            r = run_variant(
                spec, wd / f"profile-{tool}", suite_layer, cli_layer, mode="profile", profile_tool=tool,
                cold_start=cold_start or wrapper is not None, env=tool_env, wrapper=wrapper,
            )  # fmt: skip
        except OSError as exc:  # the profiler's executable could not be started
            profile.tools[tool] = f"failed: {exc}"
            continue
        first = first or r
        device = device or r.device
        profile.tools[tool] = _collect(tool, r, profile, wd / f"profile-{tool}", out)
    profile.bound, profile.bound_evidence = verdict_for(timed or first, profile)
    profile.wall_s = time.monotonic() - t0
    (out / "profile.json").write_text(profile.model_dump_json(indent=2))
    if first is None:  # every tool skipped: the console's line and the run's tags say why
        why = dict.fromkeys(s.removeprefix("skipped: ") for s in profile.tools.values() if s.startswith("skipped: "))
        first = VariantResult(spec=spec, status="skipped", config=config.model_dump(), device=device,
                              skip_reason="; ".join(why) or None)  # fmt: skip
    result = first
    result.profile = profile
    return result


def _collect(tool: str, r: VariantResult, profile: Profile, child_wd: Path, out: Path) -> str:
    """What the tool's child left, gathered under ``out`` and into ``profile``; the tool's state ("ok",
    "failed: <why>")."""
    for stage in r.stages:  # the stages a profile child ran (a run's batch and recheck pass it by)
        if stage.duration_s:
            profile.split_s[stage.name] = profile.split_s.get(stage.name, 0.0) + stage.duration_s
    if tool in SANITIZERS:  # what the tool found, whatever became of the child (an invalid access may end it)
        errors, state = read_sanitizer(out / f"{tool}.log", tool)
        if errors is not None:
            profile.metrics[f"sanitize_{tool}_errors"] = float(errors)
        if errors or r.status == "ok":
            return state
    if r.status != "ok":
        message = r.error.message.splitlines()[0] if r.error else r.status
        return f"failed: stage {r.failed_stage}: {message}"[:500]
    if tool == "torch" and r.profile is not None:
        profile.metrics.update(r.profile.metrics)
        profile.top_ops = r.profile.top_ops
        profile.split_s.update(r.profile.split_s)
        for name in (TRACE, "top_ops.csv", "top_ops.md"):
            src = Path(r.profile.dir or child_wd) / name
            if src.is_file() and src.parent != out:
                shutil.move(str(src), out / name)
    elif tool == "ncu":
        metrics, note = read_ncu(out / "profile.ncu-rep", out / "ncu.csv")
        profile.metrics.update(metrics)
        if note:
            return f"failed: {note}"
    elif tool == "nsys" and not (out / "profile.nsys-rep").is_file():
        return "failed: nsys wrote no profile.nsys-rep"
    return "ok"


def _expected_device(device: str) -> str:
    if device != "auto":
        return device
    return "cuda" if cuda_available() else "cpu"


def _skip_reason(tool: str, device: str | None) -> str | None:
    if tool == "torch":
        return None
    executable = EXECUTABLE if tool in SANITIZERS else tool
    if shutil.which(executable) is None:
        return f"{executable} not on PATH"
    if device is not None and not device.startswith("cuda"):
        return f"{tool} profiles CUDA kernels; the variant ran on {device}"
    return None
