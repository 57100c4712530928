"""bench/profile/op_times.py: the top ops' times from the profiler's raw events."""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, record_function

from bench.profile.op_times import _from_averages, device_times, op_times, self_cpu_times


@dataclass
class Event:
    """The methods of a Kineto event that op_times reads."""

    name_: str
    start: int
    end: int
    device: str = "CPU"
    activity: str = "cpu_op"
    thread: int = 1
    asynchronous: bool = False

    def name(self) -> str:
        return self.name_

    def start_ns(self) -> int:
        return self.start

    def end_ns(self) -> int:
        return self.end

    def duration_ns(self) -> int:
        return self.end - self.start

    def device_type(self) -> str:
        return self.device

    def activity_type(self) -> str:
        return self.activity

    def start_thread_id(self) -> int:
        return self.thread

    def is_async(self) -> bool:
        return self.asynchronous


def as_dict(times: list[tuple[str, int, float]]) -> dict[str, tuple[int, float]]:
    return {name: (n, us) for name, n, us in times}


def test_self_time_is_a_span_less_the_spans_directly_inside_it() -> None:
    events = [
        Event("step", 0, 10_000, activity="user_annotation"),  # 10 µs: two ops of 3 and 4 µs inside
        Event("aten::mul_", 1_000, 4_000),
        Event("aten::empty", 1_500, 2_000),  # inside mul_: mul_'s self time is 2.5 µs
        Event("aten::mul_", 5_000, 9_000),
        Event("[memory]", 1_600, 1_600, activity="cpu_instant_event"),
        Event("aten::mul_", 0, 7_000, thread=2),  # another thread: not nested in "step"
        Event("gpu_kernel", 0, 99_000, device="CUDA", activity="kernel"),  # no CPU time
        Event("aten::copy_", 0, 5_000, asynchronous=True),
        Event("aten::sum", 20_000, 26_000),  # recorded twice on its way through the dispatcher: counted once
        Event("aten::sum", 20_500, 25_000),
        Event("aten::fill_", 21_000, 22_000),
    ]
    times = as_dict(self_cpu_times(events))
    assert times["step"] == (1, pytest.approx(3.0))
    assert times["aten::mul_"] == (3, pytest.approx(2.5 + 4.0 + 7.0))
    assert times["aten::empty"] == (1, pytest.approx(0.5))
    assert times["aten::sum"] == (1, pytest.approx(5.0)) and times["aten::fill_"] == (1, pytest.approx(1.0))
    assert set(times) == {"step", "aten::mul_", "aten::empty", "aten::sum", "aten::fill_"}


def test_device_time_leaves_out_the_gpu_annotations_that_span_kernels() -> None:
    events = [
        Event("Optimizer.step#AdamW.step", 0, 100_000, device="CUDA", activity="gpu_user_annotation"),
        Event("multi_tensor_apply_kernel", 0, 30_000, device="CUDA", activity="kernel"),
        Event("multi_tensor_apply_kernel", 40_000, 60_000, device="CUDA", activity="kernel"),
        Event("Memcpy DtoD", 70_000, 75_000, device="CUDA", activity="gpu_memcpy"),
        Event("aten::_foreach_add_", 0, 1_000),  # host side
    ]
    assert as_dict(device_times(events)) == {"multi_tensor_apply_kernel": (2, 50.0), "Memcpy DtoD": (1, 5.0)}


def test_raw_events_agree_with_key_averages_on_a_real_cpu_profile() -> None:
    x = torch.randn(96, 96)
    params = [torch.nn.Parameter(torch.randn(32, 32)) for _ in range(4)]
    for p in params:
        p.grad = torch.randn_like(p)
    opt = torch.optim.AdamW(params, foreach=False)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True) as prof:
        for _ in range(3):
            with record_function("call"):
                (x @ x).relu_().sum()
                opt.step()
    raw, averaged = as_dict(op_times(prof, gpu=False)), as_dict(_from_averages(prof, gpu=False))
    assert set(raw) == set(averaged) and "call" in raw and "aten::mm" in raw
    for name, (n, us) in averaged.items():
        assert raw[name][0] == n, name
        assert raw[name][1] == pytest.approx(us, rel=0.02, abs=1.0), name


class OlderEvent(Event):
    """A torch 2.11 Kineto event: no activity type, only whether it is a user annotation."""

    activity_type = None  # type: ignore[assignment]

    def __getattribute__(self, name: str) -> Any:
        if name == "activity_type":
            raise AttributeError(name)
        return super().__getattribute__(name)

    def is_user_annotation(self) -> bool:
        return "annotation" in self.activity


def test_an_older_torch_events_without_an_activity_type_are_read_by_their_annotation_flag() -> None:
    gpu = [OlderEvent("Optimizer.step#AdamW.step", 0, 100_000, device="CUDA", activity="gpu_user_annotation"),
           OlderEvent("k", 0, 30_000, device="CUDA", activity="kernel")]  # fmt: skip
    assert not hasattr(gpu[0], "activity_type")
    assert device_times(gpu) == [("k", 1, 30.0)]
    cpu = [OlderEvent("step", 0, 10_000, activity="user_annotation"), OlderEvent("aten::add", 1_000, 4_000)]
    assert as_dict(self_cpu_times(cpu)) == {"step": (1, 7.0), "aten::add": (1, 3.0)}


def test_raw_events_lacking_an_annotation_flag_too_fall_back_to_the_averages() -> None:
    class Bare:
        def device_type(self) -> str:
            return "CUDA"

        def name(self) -> str:
            return "k"

    class Averaged:
        key, count, self_device_time_total, device_type, is_user_annotation = "k", 1, 5.0, types.SimpleNamespace(
            name="CUDA"), False  # fmt: skip

    class Prof:
        profiler = types.SimpleNamespace(kineto_results=types.SimpleNamespace(events=lambda: [Bare()]))

        def key_averages(self) -> list[Averaged]:
            return [Averaged()]

    assert op_times(Prof(), gpu=True) == [("k", 1, 5.0)]


def test_without_raw_events_the_averages_are_read() -> None:
    class Averaged:
        key, count, self_cpu_time_total = "aten::add", 2, 7.0

    class Prof:
        profiler = None  # no kineto_results: an AttributeError

        def key_averages(self) -> list[Averaged]:
            return [Averaged()]

    assert op_times(Prof(), gpu=False) == [("aten::add", 2, 7.0)]
