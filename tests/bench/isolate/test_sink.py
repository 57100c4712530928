"""BackgroundSink: the store opens and logs on its own thread; the suite neither waits for it nor outruns it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from bench.define.discovery import discover, select
from bench.define.result import Comparison, VariantResult
from bench.errors import PerflabError
from bench.isolate.sink import BackgroundSink
from bench.isolate.suite import run_suite

FAST = {"warmup": 1, "iterations": 3, "device": "cpu", "min_rounds": 1, "max_rounds": 1}


class ListSink:
    def __init__(self, fail_on: str | None = None) -> None:
        self.logged: list[tuple[str, Comparison | None]] = []
        self.fail_on = fail_on

    def log_variant(self, result: VariantResult, comparison: Comparison | None = None) -> str:
        if result.spec.key == self.fail_on:
            raise OSError("disk full")
        self.logged.append((result.spec.key, comparison))
        return str(len(self.logged))


@pytest.fixture
def pair(chapters: Any) -> list[Any]:
    return select(discover(chapters({"ch07/baseline_a.py": {}, "ch07/optimized_a.py": {}})))


def test_a_host_clocked_measurement_waits_for_the_sink_to_open_and_all_are_logged_in_order(
    chapters: Any, tmp_path: Path
) -> None:
    """MLflow's import and store open are seconds of CPU-bound Python in this process: a CPU measurement
    beside them read 16 ms instead of 0.03 ms on the 2-core CI machine. Set-up runs while the sink opens;
    the measurement waits for it (the time line says how long)."""
    sink = ListSink()
    marker = tmp_path / "set-up"  # the baseline's set-up is over: however long a loaded machine took to get there
    extra = f"_setup = Bench.setup\ndef _marked(self):\n    _setup(self)\n    open({str(marker)!r}, 'w').close()\n"
    pair = select(discover(chapters({"ch07/baseline_a.py": {"extra": extra + "Bench.setup = _marked"},
                                     "ch07/optimized_a.py": {}})))  # fmt: skip

    def open_sink() -> ListSink:
        deadline = time.monotonic() + 300
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(2.0)  # the baseline waits at its measurement gate meanwhile
        return sink

    background = BackgroundSink(open_sink)
    suite = run_suite(pair, cli_layer=FAST, sink=background)
    assert background.close() is sink
    assert [key for key, _ in sink.logged] == ["ch07:a:baseline", "ch07:a:optimized"]
    assert sink.logged[0][1] is None and sink.logged[1][1] is suite.comparisons[0]
    first = next(t for t in suite.timeline if t["key"] == "ch07:a:baseline")
    assert first["alone_wait_s"] is not None and first["alone_wait_s"] > 0.5, first


def test_files_a_queued_result_points_to_exist_until_it_is_logged(pair: list[Any]) -> None:
    """A result logged after the suite's last variant (the sink still busy) still finds its work directory:
    a profiled run once tagged the last variant's trace ok and stored none."""
    seen: list[bool] = []

    class SlowSink(ListSink):
        def log_variant(self, result: VariantResult, comparison: Comparison | None = None) -> str:
            time.sleep(0.5)
            assert result.output is not None and result.output.path is not None
            seen.append(Path(result.output.path).parent.is_dir())
            return super().log_variant(result, comparison)

    background = BackgroundSink(SlowSink)
    run_suite(pair, cli_layer=FAST, sink=background)
    background.close()
    assert seen == [True, True]


def test_a_sink_that_cannot_open_stops_the_suite_before_a_variant_runs(pair: list[Any]) -> None:
    def open_sink() -> ListSink:
        raise ConnectionError("tracking server refused the connection")

    background = BackgroundSink(open_sink)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the open fails on the sink's thread; wait until it has
        try:
            background.check()
        except PerflabError:
            break
        time.sleep(0.01)
    ran: list[str] = []
    with pytest.raises(PerflabError, match="cannot be logged.*ConnectionError.*refused"):
        run_suite(pair, cli_layer=FAST, sink=background, on_result=lambda r, c: ran.append(r.spec.key))
    assert ran == []
    with pytest.raises(PerflabError, match="refused"):
        background.close()


def test_a_sink_that_fails_to_log_names_what_was_not_logged(pair: list[Any], tmp_path: Path) -> None:
    background = BackgroundSink(lambda: ListSink(fail_on="ch07:a:baseline"))
    with pytest.raises(PerflabError, match=r"OSError: disk full.*not logged: ch07:a:baseline"):
        run_suite(pair, cli_layer=FAST, sink=background)  # may stop before the optimized variant ...
        background.close()  # ... or, if it outran the sink's thread, fail here
