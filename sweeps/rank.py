"""Rankings that survive noise: the fastest configurations re-measured until their order is decided.

A sweep measures each configuration once, briefly; two close configurations can swap places between
two sweeps of the same job. Here the ``top`` fastest ok trials within the memory margin are run again
in fresh trial processes, one round after another (each round runs every contender once, in a rotated
order so a drift of the machine does not always favour the same one). A contender's figure is the mean
of its runs, the sweep's own trial included, with a 95 % t interval (``sweeps.verify.mean_interval``: three
runs give t with 2 degrees of freedom, 4.30; a percentile bootstrap over three sees only their own spread and
would call an order on a 0.2 % gap). After each round from the second on (three runs each), the order is
*decided* when the leader's interval lies above the runner-up's; after ``rounds`` rounds without that, the
contenders whose intervals overlap the leader's are reported as a tie, and the highest mean leads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sweeps.space import PARAMS
from sweeps.trial import TrialOutcome
from sweeps.verify import mean_interval

__all__ = ["Contender", "Ranking", "rank"]


@dataclass
class Contender:
    row: dict[str, Any]  # the sweep's results row of the configuration
    samples_per_s: list[float] = field(default_factory=list)  # the sweep's trial, then each re-run
    mean: float = 0.0
    low: float | None = None
    high: float | None = None

    @property
    def params(self) -> dict[str, Any]:
        return {k: self.row[k] for k in PARAMS}

    def update(self) -> None:
        self.mean, self.low, self.high = mean_interval(self.samples_per_s)


@dataclass
class Ranking:
    contenders: list[Contender]  # highest mean first
    rounds: int  # re-measurement rounds run
    decided: bool  # the leader's interval clears the runner-up's

    @property
    def leader(self) -> Contender:
        return self.contenders[0]

    def tied(self) -> list[Contender]:
        """The contenders the leader could not be told from (their intervals overlap its interval)."""
        lead = self.leader
        if lead.low is None:
            return self.contenders[1:]
        return [c for c in self.contenders[1:] if c.high is None or c.high >= lead.low]

    def markdown(self) -> str:
        from sweeps.recommend import describe_config

        lines = ["## Ranking: the fastest configurations re-measured", "",
                 "| rank | trial | configuration | runs | samples/s, mean [95 % interval] | each run |",
                 "|---:|---:|---|---:|---|---|"]  # fmt: skip
        for i, c in enumerate(self.contenders, 1):
            interval = f"{c.mean:,.0f}" + (f" [{c.low:,.0f}, {c.high:,.0f}]" if c.low is not None else "")
            each = ", ".join(f"{x:,.0f}" for x in c.samples_per_s)
            lines.append(f"| {i} | {c.row.get('trial')} | {describe_config(c.row)} | {len(c.samples_per_s)} | "
                         f"{interval} | {each} |")  # fmt: skip
        lines.append("")
        if self.decided:
            lines.append(f"_Order decided after {self.rounds} round(s): the leader's interval lies above the rest._")
        else:
            tied = ", ".join(f"trial {c.row.get('trial')}" for c in self.tied()) or "none"
            lines.append(f"_Not decided after {self.rounds} round(s): tied with the leader — {tied}; the highest mean "
                         "leads (the difference is within the noise)._")  # fmt: skip
        return "\n".join(lines)


def rank(
    run: Callable[[dict[str, Any]], TrialOutcome],
    rows: list[dict[str, Any]],
    top: int,
    rounds: int,
    echo: Callable[[str], None] = lambda _: None,
) -> Ranking:
    """Re-measure the ``top`` fastest of ``rows`` (ok, within the memory margin: the caller's choice) for
    up to ``rounds`` rounds, until their order is decided."""
    from sweeps.recommend import describe_config

    best = sorted(rows, key=lambda r: -r["samples_per_s"])[:top]
    contenders = [Contender(r, [float(r["samples_per_s"])]) for r in best]
    for c in contenders:
        c.update()
    ranking = Ranking(contenders, 0, len(contenders) < 2)
    for i in range(rounds if len(contenders) > 1 else 0):
        order = contenders[i % len(contenders) :] + contenders[: i % len(contenders)]
        for c in order:
            out = run(c.params)
            sps = out.metrics.get("samples_per_s")
            if out.status == "ok" and sps is not None:
                c.samples_per_s.append(float(sps))
            echo(f"rank round {i + 1}/{rounds}: trial {c.row.get('trial')} ({describe_config(c.row)}): "
                 + (f"{sps:.0f} samples/s" if out.status == "ok" and sps is not None else out.status))  # fmt: skip
        for c in contenders:
            c.update()
        contenders.sort(key=lambda c: -c.mean)
        a, b = contenders[0], contenders[1]
        decided = i >= 1 and a.low is not None and b.high is not None and a.low > b.high  # 3 runs each at least
        ranking = Ranking(list(contenders), i + 1, decided)
        if decided:
            break
    return ranking
