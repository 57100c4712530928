"""bench/measure/machine.py: NVML readings come from the GPU the variant runs on, even under CUDA_VISIBLE_DEVICES.

NVML ignores CUDA_VISIBLE_DEVICES: a worker pinned to GPU 1 sees it as cuda:0, which NVML index 0 is
not. A fake NVML with two GPUs stands in for the driver (no GPU on CI).
"""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from bench.measure import machine


class FakeNvml(types.ModuleType):
    """Two GPUs: index 0 (busy with another worker's variant, pid 4242) and index 1 (idle)."""

    class NVMLError(Exception):
        pass

    def __init__(self) -> None:
        super().__init__("pynvml")
        self.gpus: dict[int, dict[str, Any]] = {
            0: {"uuid": "GPU-aaaa", "pids": [4242], "clock": 1980},
            1: {"uuid": "GPU-bbbb", "pids": [], "clock": 1500},
        }
        self.NVML_CLOCK_SM, self.NVML_CLOCK_MEM, self.NVML_TEMPERATURE_GPU = 0, 1, 0

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> int:
        for i, g in self.gpus.items():
            if g["uuid"] == uuid:
                return i
        raise self.NVMLError("not found")

    def nvmlSystemGetDriverVersion(self) -> str:
        return "580"

    def nvmlDeviceGetClockInfo(self, h: int, kind: int) -> int:
        return self.gpus[h]["clock"]

    def nvmlDeviceGetMaxClockInfo(self, h: int, kind: int) -> int:
        return 1980

    def nvmlDeviceGetTemperature(self, h: int, kind: int) -> int:
        return 30

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return 100_000

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:
        return 700_000

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:
        return types.SimpleNamespace(gpu=0)

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[Any]:
        return [types.SimpleNamespace(pid=p) for p in self.gpus[h]["pids"]]

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return 0


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    fake = FakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    return fake


def test_pinned_worker_reads_its_own_gpu_by_uuid(nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    state = machine.snapshot(0, "bbbb")  # cuda:0 of this worker is physical GPU 1
    assert state["nvml_device_by"] == "uuid"
    assert state["other_pids"] == [] and state["sm_clock_mhz"] == 1500  # GPU 1's, not GPU 0's
    assert machine.flags(state, state) == ["low SM clock after measurement: 1500 of 1980 MHz"]


def test_without_a_uuid_a_pinned_worker_gets_no_readings_rather_than_another_gpus(
    nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    state = machine.snapshot(0, None)
    assert "nvml" in state and "CUDA_VISIBLE_DEVICES='1'" in state["nvml"]
    assert machine.flags(state, state) == []  # unknown is not flagged as shared


def test_unpinned_index_is_nvmls_index(nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    state = machine.snapshot(0, None)
    assert state["nvml_device_by"] == "index" and state["other_pids"] == [4242]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert machine.snapshot(1, None)["sm_clock_mhz"] == 1500


def test_parked_children_are_listed_apart_from_processes_sharing_the_gpu(
    nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pair's children parked between rounds (bench.isolate.kept) hold a context and run nothing: not "shared";
    a process the harness did not park still is."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    nvml.gpus[0]["pids"] = [4242, 5151]
    state = machine.snapshot(0, None, parked=[5151, 6000])
    assert state["other_pids"] == [4242] and state["parked_pids"] == [5151]
    assert machine.flags(state, state)[0] == "shared: other processes on the GPU before measurement (pids [4242])"
    alone = machine.snapshot(0, None, parked=[4242, 5151])
    assert alone["other_pids"] == [] and not any(f.startswith("shared") for f in machine.flags(alone, alone))


def test_nvml_is_initialised_once_per_process(nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three snapshots per variant: one nvmlInit (each opens every GPU of the host), none shut down;
    a forked child (another pid) initialises its own."""
    calls: list[str] = []
    monkeypatch.setattr(nvml, "nvmlInit", lambda: calls.append("init"), raising=False)
    monkeypatch.setattr(nvml, "nvmlShutdown", lambda: calls.append("shutdown"), raising=False)
    monkeypatch.setattr(machine, "_NVML", None)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    for _ in range(3):
        assert machine.snapshot(0, "aaaa")["nvml_device_by"] == "uuid"
    assert calls == ["init"]
    monkeypatch.setattr(machine, "_NVML", (nvml, -1))  # as a fork sees it: initialised by another pid
    machine.snapshot(0, "aaaa")
    assert calls == ["init", "init"]


def test_nvml_init_failure_is_reported_and_retried(nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail() -> None:
        raise nvml.NVMLError("driver not loaded")

    monkeypatch.setattr(machine, "_NVML", None)
    monkeypatch.setattr(nvml, "nvmlInit", fail, raising=False)
    assert machine.snapshot(0, "aaaa") == {"nvml": "unavailable: driver not loaded"}
    monkeypatch.setattr(nvml, "nvmlInit", lambda: None, raising=False)
    assert machine.snapshot(0, "aaaa")["nvml_device_by"] == "uuid"
