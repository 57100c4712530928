"""Mean NVML GPU utilisation over a trial's measured steps, sampled in a thread beside them."""

from __future__ import annotations

import threading

__all__ = ["UtilSampler"]


class UtilSampler(threading.Thread):
    """Mean NVML GPU utilisation over the measured steps.

    NVML is initialised once and only the utilisation counter is polled: ``bench.measure.machine.snapshot``
    initialises NVML and reads a dozen counters per call, too much to repeat every 0.1 s beside the
    steps being timed, and ``stop()`` would wait for a whole snapshot in flight.
    """

    def __init__(self, index: int, interval: float) -> None:
        super().__init__(daemon=True)
        self.index, self.interval, self.values = index, interval, []  # type: ignore[var-annotated]
        self.reason: str | None = None
        self._stop_event = threading.Event()

    def run(self) -> None:
        try:
            import pynvml  # nvidia-ml-py

            pynvml.nvmlInit()
        except Exception as exc:  # not installed, no driver, container without NVML
            self.reason = f"NVML unavailable: {exc}"
            return
        try:
            h = pynvml.nvmlDeviceGetHandleByIndex(self.index)
            while not self._stop_event.is_set():
                self.values.append(float(pynvml.nvmlDeviceGetUtilizationRates(h).gpu))
                self._stop_event.wait(self.interval)
        except Exception as exc:
            self.reason = f"NVML reading failed: {exc}"
        finally:
            try:
                pynvml.nvmlShutdown()
            except Exception:
                pass

    def stop(self) -> float | None:
        self._stop_event.set()
        self.join(timeout=5)
        return sum(self.values) / len(self.values) if self.values else None
