"""bench.measure.streams on the CPU: the verdicts' logic with the device's answers given (the probes themselves
run on a GPU: tests/bench/measure/test_clocks.py, tests/bench/test_exploits.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from bench.measure import streams
from bench.measure.guard import BOUND


@pytest.fixture(autouse=True)
def no_device_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(BOUND, "synchronize", lambda device: None, raising=False)


def test_a_replay_that_writes_its_outputs_stands() -> None:
    out, flags = torch.zeros(8), torch.zeros(4, dtype=torch.int32)

    def replay() -> None:
        out.copy_(torch.arange(8.0))
        flags.fill_(3)

    assert streams.unwritten([replay], lambda: [out, flags], "cpu") is None
    assert out.tolist() == list(range(8)) and flags.tolist() == [3] * 4


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_a_replay_that_leaves_an_output_unwritten_is_named(dtype: torch.dtype) -> None:
    written, left = torch.zeros(8), torch.zeros(8, dtype=dtype)

    def replay() -> None:  # its second output was written once, at capture, outside the graph
        written.fill_(1.0)

    reason = streams.unwritten([replay], lambda: [written, left], "cpu")
    assert reason is not None and "did not write output(s) 1 " in reason, reason


def test_an_output_in_host_memory_on_a_cuda_clock_says_so() -> None:
    """A benchmark whose tensors were made on the CPU, run on a GPU host: the replay captured no work, and the reason
    says where its output is and what to do, not "a side stream"."""
    host = torch.zeros(8)
    reason = streams.unwritten([lambda: None], lambda: [host], "cuda:0")
    assert reason is not None and "output(s) 0 are in host memory (CPU tensors)" in reason, reason
    assert "--device cpu" in reason and "side stream" not in reason, reason


def test_an_output_poisoned_before_the_replay_is_not_watched() -> None:
    """An output that already reads as poisoned (a NaN the call computes) cannot be told from one left unwritten."""
    nan_out = torch.full((4,), float("nan"))
    assert streams.unwritten([lambda: None], lambda: [nan_out], "cpu") is None


def test_no_replay_no_outputs_asked() -> None:
    def outputs() -> list[torch.Tensor]:
        raise AssertionError("outputs read without a replay to check")

    assert streams.unwritten([], outputs, "cpu") is None


def test_side_streams_leave_out_the_current_one(monkeypatch: pytest.MonkeyPatch) -> None:
    current = SimpleNamespace(stream_id=0, device_index=0, device_type=1)
    monkeypatch.setattr(BOUND, "current_stream", lambda device: current, raising=False)
    monkeypatch.setattr(BOUND, "Stream", SimpleNamespace, raising=False)
    sides = streams.side_streams("cuda:0", {(0, 0, 1), (7, 0, 1), (3, 0, 1)})
    assert [s.stream_id for s in sides] == [3, 7]


@pytest.mark.parametrize(
    ("unforked", "late", "expected"),
    [
        ([], [], None),
        (["7"], [], "work on stream(s) 7 starts without waiting for the current stream"),
        ([], ["3", "7"], "does not wait for stream(s) 3, 7 before the call returns"),
    ],
)
def test_unjoined_names_each_stream_and_what_it_skipped(
    monkeypatch: pytest.MonkeyPatch, unforked: list[str], late: list[str], expected: str | None
) -> None:
    monkeypatch.setattr(streams, "_probe_fork", lambda fn, device, sides, hold: unforked)
    monkeypatch.setattr(streams, "_probe_join", lambda fn, device, sides, hold: late)
    reason = streams.unjoined(lambda: None, "cuda:0", [], 1)
    if expected is None:
        assert reason is None
    else:
        assert reason is not None and reason.startswith("work on an unjoined side stream: ") and expected in reason


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2])
def test_has_nan_in_any_float_dtype_and_chunk(dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch) -> None:
    """The poison checks read FP8 outputs too (torch has no NaN test or sum for FP8 on a GPU: a chapter-19 FP8
    output failed its warm-up there), in chunks, and a strided view as a whole."""
    from bench.measure import guard

    monkeypatch.setattr(guard, "_CHUNK", 7)  # several chunks, the NaN in the last, short one
    x = torch.randn(50).to(dtype)
    assert not guard.has_nan(x)
    x[49] = float("nan")
    assert guard.has_nan(x)
    y = torch.randn(6, 5).to(dtype).t()
    assert not guard.has_nan(y)
    y[4, 5] = float("nan")
    assert guard.has_nan(y)
