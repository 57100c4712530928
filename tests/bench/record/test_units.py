"""bench/record/units.py: a column's unit from its typical value; about three significant figures, no exponent."""

from __future__ import annotations

from bench.record.units import RATE_UNITS, column, sig, time_text


def test_cpu_throughputs_read_in_megabytes_not_zero() -> None:
    values = [0.0004, 0.002, 0.005, 0.014]  # GB/s, as a CPU's chapter 7 logs them
    unit = column(values, RATE_UNITS)
    assert unit.name == "MB/s"
    assert [unit.text(v) for v in values] == ["0.400", "2.00", "5.00", "14.0"]


def test_time_columns_take_the_unit_of_their_typical_value() -> None:
    assert column([2.0, 15.1, 279.0]).name == "ms"
    assert column([0.0027, 0.0031, 0.5]).name == "µs"
    assert column([1500.0, 2500.0]).name == "s"
    assert column([None, None]).name == "ms"  # nothing to go by: the stored unit
    assert column([4e-6]).text(4e-6) == "4.00"  # ns


def test_significant_figures_keep_integer_digits_and_never_use_exponents() -> None:
    assert [sig(x) for x in (279068.7, 4.2478, 0.00270, 0.0, None)] == ["279069", "4.25", "0.00270", "0", "—"]
    assert sig(float("nan")) == "—"
    assert time_text(0.0174) == "17.4 µs" and time_text(141.6) == "142 ms"


def test_a_speedup_far_below_1_keeps_its_figures() -> None:
    """An interpreted Triton kernel against a native call read 0.00x [0.00, 0.00]: three significant figures below
    0.1 and from 10 on, two decimals between."""
    from bench.record.units import ratio_text

    assert [ratio_text(x) for x in (7.03e-5, 0.0512, 0.1, 0.99, 1.614, 9.994, 49.13, 312.6)] == [
        "0.0000703", "0.0512", "0.10", "0.99", "1.61", "9.99", "49.1", "313"]  # fmt: skip
