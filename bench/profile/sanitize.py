"""compute-sanitizer over a variant's calls: memcheck (out-of-bounds and misaligned accesses, leaks of device
memory the kernels touch) and racecheck (shared-memory data races), each wrapping a profile child of its own.

``perflab run --sanitize`` (or ``--profile-mode memcheck|racecheck|sanitize``) runs them after the timed run;
the profile child does its set-up, warm-up and ``PROFILE_CALLS`` calls under the tool. Each finding count lands
in ``Profile.metrics`` (``sanitize_memcheck_errors``, ``sanitize_racecheck_errors``; MLflow metrics) and the tool's
state (tag ``perflab.profile_<tool>``) is "ok" when it found nothing, else "failed:" with the count and the first
report. torch's caching allocator carves tensors out of larger blocks, so an access past a tensor's end stays
inside memory the driver handed out: the child runs with ``PYTORCH_NO_CUDA_MEMORY_CACHING=1`` (every tensor
its own allocation) for memcheck to see it. The tools slow kernels 10-100x: sanitize at smoke size (``--smoke``)
unless the full size is the point.
"""

from __future__ import annotations

import re
from pathlib import Path

SANITIZERS = ("memcheck", "racecheck")
EXECUTABLE = "compute-sanitizer"
SANITIZE_ENV = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
PRINT_LIMIT = 20  # reports written per tool (the summary still counts them all)

_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) errors?")
_RACES = re.compile(r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?, (\d+) warnings?\)")
_FIRST = re.compile(r"^=+ (?!ERROR SUMMARY|RACECHECK SUMMARY|COMPUTE-SANITIZER)(\S.*)$", re.M)
_INVALID = re.compile(r"^=+ Invalid ", re.M)
# memcheck's own contradiction: an access it calls out of bounds at an address inside the allocation it names
_INSIDE = re.compile(
    r"Access to (0x[0-9a-f]+) is out of bounds\s*\n=+\s+and is inside the nearest allocation at (0x[0-9a-f]+) of "
    r"size ([\d,]+) bytes"
)


def sanitizer_command(executable: str, tool: str, log: Path) -> list[str]:
    """The compute-sanitizer prefix of the profile child's command line."""
    if tool not in SANITIZERS:
        raise ValueError(f"tool={tool!r} is not one of {', '.join(SANITIZERS)}")
    # --report-api-errors no: a CUDA API call that fails is the host code's to handle, not a kernel's fault; torch's
    # runtime probes driver entry points that may not exist (cuGetProcAddress), and on an H200 those 68 reports
    # came before the planted out-of-bounds write in memcheck's log.
    return [
        executable, "--tool", tool, "--target-processes", "all", "--print-limit", str(PRINT_LIMIT),
        "--report-api-errors", "no", "--log-file", str(log),
    ]  # fmt: skip


def read_sanitizer(log: Path, tool: str) -> tuple[int | None, str]:
    """(errors found, the tool's state) from compute-sanitizer's log: "ok" for none, "failed: ..." with the count
    and the first report otherwise, or with why the log says nothing (errors None)."""
    try:
        text = log.read_text(errors="replace")
    except OSError as exc:
        return None, f"failed: compute-sanitizer wrote no log ({exc})"
    races = _RACES.search(text)
    summary = _SUMMARY.search(text)
    if races is None and summary is None:
        tail = text[-300:].replace("\n", " ") or "empty"
        return None, f"failed: no summary in compute-sanitizer's {tool} log {log} ({tail})"
    errors = int(races.group(1)) if races else int(summary.group(1))  # type: ignore[union-attr]
    if errors == 0:
        return 0, "ok"
    first = _FIRST.search(text)
    what = first.group(1).strip() if first else "see the log"
    return errors, f"failed: {errors} error(s) found; the first: {what}{_inside_note(text)}"[:700]


def _inside_note(text: str) -> str:
    """A note when every invalid access memcheck printed lies inside the allocation it names as the nearest: in
    bounds by memcheck's own figures, its record of that allocation wrong at the time (seen with CUDA graphs whose
    conditional body reads buffers allocated before the capture: NVIDIA/warp#1406), not an access past a tensor."""
    inside = [(int(a, 16), int(base, 16), int(size.replace(",", ""))) for a, base, size in _INSIDE.findall(text)]
    printed = len(_INVALID.findall(text))
    if not inside or len(inside) != printed or not all(base <= a < base + size for a, base, size in inside):
        return ""
    a, base, size = inside[0]
    return (
        f" (every printed report's address lies inside the allocation memcheck names, e.g. byte {a - base} of "
        f"{size:,}: memcheck's record of the allocation, not an access past it; NVIDIA/warp#1406)"
    )
