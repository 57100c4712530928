"""Numbers as tables print them: a unit per column, chosen from the column's values and named in its header.

A column of CPU throughputs between 0.0004 and 0.014 GB/s printed in GB/s with one decimal reads ``0.0``
throughout; the same column in MB/s reads 0.4 … 14. Times alike: one column of medians from 2 µs to 0.3 s
reads best in the unit its typical value needs. Values keep about three significant figures (the medians'
own spread is larger than that), never in exponent form.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable

__all__ = ["ENERGY_UNITS", "RATE_UNITS", "TIME_UNITS", "Column", "column", "sig", "time_text"]

# (name, size of one unit in the column's stored unit), largest first
TIME_UNITS: tuple[tuple[str, float], ...] = (("s", 1e3), ("ms", 1.0), ("µs", 1e-3), ("ns", 1e-6))  # of ms
RATE_UNITS: tuple[tuple[str, float], ...] = (("TB/s", 1e3), ("GB/s", 1.0), ("MB/s", 1e-3), ("kB/s", 1e-6))  # of GB/s
ENERGY_UNITS: tuple[tuple[str, float], ...] = (("J", 1e3), ("mJ", 1.0), ("µJ", 1e-3), ("nJ", 1e-6))  # of mJ
MISSING = "—"


def sig(x: float | None, digits: int = 3) -> str:
    """``x`` to ``digits`` significant figures (all of its integer digits), never in exponent form; '—' for
    no value."""
    if x is None or not math.isfinite(x):
        return MISSING
    if x == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    return f"{x:.{decimals}f}"


def ratio_text(x: float) -> str:
    """A speedup: two decimals from 0.1 to 10 (``0.99``, ``1.61``), three significant figures outside (``49.1``,
    ``0.0000703``: an interpreted kernel against a native call is no ``0.00``)."""
    return f"{x:.2f}" if 0.1 <= x < 10 else sig(x, 3)


class Column:
    """One column's unit: ``name`` for its header, ``text(value)`` for its cells (value in the stored unit)."""

    def __init__(self, name: str, size: float, digits: int = 3) -> None:
        self.name, self.size, self.digits = name, size, digits

    def text(self, value: float | None) -> str:
        return sig(None if value is None else value / self.size, self.digits)

    def __repr__(self) -> str:
        return f"Column({self.name!r})"


def column(values: Iterable[float | None], units: tuple[tuple[str, float], ...] = TIME_UNITS,
           digits: int = 3) -> Column:  # fmt: skip
    """The largest unit in which the column's typical (median) value is at least 1; the stored unit's
    (the one of size 1) when the column holds no positive value."""
    shown = [abs(v) for v in values if v is not None and math.isfinite(v) and v != 0]
    if not shown:
        name, size = next(u for u in units if u[1] == 1.0)
        return Column(name, size, digits)
    typical = statistics.median(shown)
    for name, size in units:
        if typical >= size:
            return Column(name, size, digits)
    name, size = units[-1]
    return Column(name, size, digits)


def time_text(ms: float | None, digits: int = 3) -> str:
    """One time with its own unit: ``2.52 ms``, ``17.4 µs``."""
    if ms is None:
        return MISSING
    unit = column([ms], TIME_UNITS, digits)
    return f"{unit.text(ms)} {unit.name}"
