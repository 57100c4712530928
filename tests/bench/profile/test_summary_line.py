"""The console's profile line: a tool that failed says why, one that ran clean stays one word."""

from bench.define.result import Profile
from bench.profile.tools import summary_line


def test_a_failed_sanitizer_says_what_it_found() -> None:
    p = Profile(bound="latency", bound_evidence="below the roof")
    p.tools = {
        "memcheck": "failed: 3 error(s) found; the first: Invalid __global__ write",
        "racecheck": "ok",
        "ncu": "skipped: ncu is not on PATH",
    }
    line = summary_line(p)
    assert "memcheck failed: 3 error(s) found; the first: Invalid __global__ write" in line
    assert line.endswith("racecheck ok, ncu skipped")
