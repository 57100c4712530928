"""A sweep's conclusion from its whole table: recommend, rank, find the bottleneck, verify.

1. ``sweeps.recommend``: the fastest ok trial within the memory margin (always one when any ran there).
2. ``sweeps.rank``: the ``rank_top`` fastest re-measured until their order is decided; the leader is
   the recommendation.
3. ``sweeps.probe`` + ``sweeps.bottleneck``: the leader's data path alone per worker count and its step
   alone, against its re-measured throughput.
4. ``sweeps.verify``: the leader against the user's current configuration, alternating repeats.

Runs once per study (``sweeps.final``); what it returns is JSON, published for the other workers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sweeps.bottleneck import Bottleneck
from sweeps.config import SweepConfig
from sweeps.rank import Ranking, rank
from sweeps.recommend import Recommendation, Rules, describe_config, remeasured_text, snippet_yaml, table_markdown
from sweeps.space import PARAMS, usable_cores, worker_ladder
from sweeps.trial import TrialOutcome
from sweeps.verify import Verification, verification_markdown, verify

__all__ = ["Conclusion", "conclude"]

Run = Callable[[dict[str, Any]], TrialOutcome]


@dataclass
class Conclusion:
    rec: Recommendation
    ranking: Ranking | None = None
    bottleneck: Bottleneck | None = None
    verification: Verification | None = None
    notes: list[str] = field(default_factory=list)  # a part that could not be measured, and why
    yours: bool = False  # the recommendation is the user's own configuration (the baseline): nothing to verify

    def markdown(self, overhead_line: str) -> str:
        remeasured = (
            None
            if self.ranking is None
            else {c.row.get("trial"): (c.mean, c.low, c.high, len(c.samples_per_s)) for c in self.ranking.contenders}
        )
        parts = [table_markdown(self.rec, remeasured)]
        parts += [p.markdown() for p in (self.ranking, self.bottleneck) if p is not None]
        if self.verification is not None:
            parts.append(verification_markdown(self.verification))
        parts += [f"_{n}_" for n in self.notes]
        if self.rec.recommended is not None:
            parts.append("**to apply**: " + " ".join(self.apply()[1]))
        return "\n\n".join([*parts, f"_{overhead_line}_"])

    def apply(self) -> tuple[str, list[str]]:
        """Which configuration recommendation.yaml holds, "recommended" or "baseline", and why, in lines.

        A change is applied when the verification showed it faster than the user's configuration (its interval
        above the noise band), or when no verification ran (said so). A verification that did not show it
        faster — slower, tied, or too few ok repeats to tell — keeps the user's configuration: a change with no
        measured gain still costs (AMP's numerics, a batch's learning rate), and the sweep's own figures are the
        ones that picked it. Only a baseline that ran ok in no repeat leaves the pick standing: nothing ran to
        compare it with."""
        rec, v = self.rec.recommended, self.verification
        assert rec is not None
        pick, memory = describe_config(rec), f"{rec.get('memory_pct', float('nan')):.1f} % of device memory"
        if self.yours:
            return "baseline", [
                f"keep your configuration ({pick}): it is the sweep's pick — {self._figure()}, {memory};",
                "no other configuration measured faster, so none was verified",
            ]
        if v is None:
            return "recommended", [f"{pick} — {self._figure()}, {memory};",
                                   "not verified against your configuration (verify_repeats 0)"]  # fmt: skip
        from bench.measure import NOISE_THRESHOLD, significance

        base, mine = v.baseline, v.recommended
        yours = f"your configuration ({describe_config(base.params)})"
        runs = f"{len(mine.samples_per_s)} + {len(base.samples_per_s)} ok fresh runs"
        if not base.samples_per_s:
            return "recommended", [
                f"{pick} — {self._figure()}, {memory};",
                f"not compared: {yours} ran ok in none of its repeats ({_statuses(base)})",
            ]
        verdict = significance(v.low, v.high, NOISE_THRESHOLD)
        if verdict == "faster":
            assert v.speedup is not None and v.low is not None and v.high is not None and mine.mean is not None
            return "recommended", [f"{pick}, verified faster than {yours}: {v.speedup:.3g}x [{v.low:.3g}, "
                                   f"{v.high:.3g}] over {runs};",
                                   f"{mine.mean:,.0f} samples/s against {base.mean:,.0f} (the fresh runs' means), "
                                   f"{memory}"]  # fmt: skip
        if v.speedup is None:
            shown = f"it ran ok in none of its repeats ({_statuses(mine)})"
        elif v.low is None or v.high is None:
            shown = f"{v.speedup:.3g}x over {runs}, too few for an interval; more verify_repeats may decide"
        else:
            shown = f"{v.speedup:.3g}x [{v.low:.3g}, {v.high:.3g}] over {runs}" + (
                "" if verdict == "slower" else ", not significant; more verify_repeats may decide"
            )
        return "baseline", [f"keep {yours}, below: the sweep's pick ({pick}) was not verified faster than it:",
                            shown]  # fmt: skip

    def failure(self) -> str | None:
        """Why the sweep has no answer, or None where it has one. None is recommended (no trial ran ok, or none within
        the memory margin), or the pick ran ok in none of its verification repeats: nothing measured it again. A
        pick that is the user's own configuration, or one not verified faster, is an answer: keep yours."""
        rec, v = self.rec.recommended, self.verification
        if rec is None:
            return f"nothing to recommend: {self.rec.why_none or 'no configuration qualified'}"
        if v is not None and not v.recommended.samples_per_s:
            return (f"the sweep's pick ({describe_config(rec)}) ran ok in none of its {len(v.recommended.statuses)} "
                    f"verification repeats ({_statuses(v.recommended)})")  # fmt: skip
        return None

    def _figure(self) -> str:
        """The recommendation's throughput from the most runs there are: the ranking's mean, else its one trial."""
        rec = self.rec.recommended
        assert rec is not None
        if self.ranking is not None:
            c = self.ranking.leader
            return remeasured_text(c.mean, c.low, c.high, len(c.samples_per_s))
        return f"{rec['samples_per_s']:,.0f} samples/s (one trial)"

    def snippet(self, rules: Rules) -> str:
        """recommendation.yaml: the configuration ``apply`` picks, under its reason."""
        if self.rec.recommended is None:
            return snippet_yaml(self.rec, rules)
        which, why = self.apply()
        settings = self.verification.baseline.params if which == "baseline" and self.verification else None
        return snippet_yaml(self.rec, rules, settings, ["perflab sweep: " + why[0], *why[1:]])

    def published(self, overhead_line: str, rules: Rules) -> dict[str, Any]:
        """The JSON every worker on the study reports."""
        v = self.verification
        return {
            "recommended": self.rec.recommended, "markdown": self.markdown(overhead_line),
            "snippet": self.snippet(rules),
            "apply": None if self.rec.recommended is None else self.apply()[0],
            "failed": self.failure(),  # the sweep's exit status: 1 where it says why, else 0
            "speedup": None if v is None else [v.speedup, v.low, v.high],
            "headline": None if self.bottleneck is None else self.bottleneck.headline(),
            "bottleneck": None if self.bottleneck is None else self.bottleneck.numbers(),
            "ranking_decided": None if self.ranking is None else self.ranking.decided,
            "remeasured": self.remeasured(),
        }  # fmt: skip

    def remeasured(self) -> dict[str, Any] | None:
        """The recommendation's throughput measured again: the ranking's runs of the leader (its sweep trial
        included) and the verification's fresh runs, each a mean with its 95 % interval and the runs."""
        if self.rec.recommended is None:
            return None
        out: dict[str, Any] = {"configuration": describe_config(self.rec.recommended)}
        if self.ranking is not None:
            c = self.ranking.leader
            out["ranking"] = {"mean": c.mean, "low": c.low, "high": c.high, "runs": c.samples_per_s}
        v = self.verification
        if v is not None and v.recommended.mean is not None:
            r = v.recommended
            out["verified"] = {"mean": r.mean, "low": r.low, "high": r.high, "runs": r.samples_per_s}
        return out


def conclude(
    cfg: SweepConfig,
    rec: Recommendation,
    run: Run,
    probe: Run | None,
    baseline: dict[str, Any],
    echo: Callable[[str], None],
) -> Conclusion:
    """Rank, probe and verify ``rec``'s recommendation (``run``: one fresh trial of a configuration;
    ``probe``: the bottleneck probe of one, or None where it cannot run)."""
    out = Conclusion(rec)
    if rec.recommended is None:
        if cfg.verify_repeats:
            out.notes.append("Verification skipped: nothing was recommended.")
        return out
    fits = [r for r in rec.diagnoses if r["status"] == "ok" and r.get("samples_per_s") is not None
            and r.get("memory_pct") is not None and r["memory_pct"] <= cfg.max_memory_pct]  # fmt: skip
    if cfg.rank_rounds and len(fits) > 1:
        echo(f"ranking: the {min(cfg.rank_top, len(fits))} fastest re-measured, up to {cfg.rank_rounds} rounds")
        out.ranking = rank(run, fits, cfg.rank_top, cfg.rank_rounds, echo)
        rec.recommended = {k: v for k, v in out.ranking.leader.row.items() if k != "diagnosis"}
    chosen = rec.recommended
    params = {k: chosen[k] for k in PARAMS}
    measured = out.ranking.leader.mean if out.ranking is not None else float(chosen["samples_per_s"])
    if cfg.probe and probe is not None:
        out.bottleneck = _bottleneck(probe, params, measured, echo, out.notes)
    out.yours = params == {k: baseline.get(k) for k in PARAMS}
    if cfg.verify_repeats and out.yours:
        out.notes.append("Verification skipped: the recommendation is your configuration.")
    elif cfg.verify_repeats:
        echo(f"verifying: recommended vs baseline, {cfg.verify_repeats} fresh runs each")
        out.verification = verify(run, params, baseline, cfg.verify_repeats, echo)
    return out


def _statuses(side: Any) -> str:
    return ", ".join(sorted(set(side.statuses)))


def probe_workers(chosen: int) -> tuple[int, ...]:
    """The worker counts whose data path the probe times: the host's ladder and the chosen count."""
    return tuple(sorted({*worker_ladder(usable_cores()), chosen}))


def _bottleneck(probe: Run, params: dict[str, Any], measured: float, echo: Callable[[str], None],
                notes: list[str]) -> Bottleneck | None:  # fmt: skip
    echo("bottleneck: the data path alone per worker count, the step alone on the device")
    for again in (False, True):
        out = probe(params)
        if out.status != "ok":
            notes.append(f"Bottleneck not measured: the probe ended {out.status}: "
                         f"{(out.error or '').splitlines()[0:1]}")  # fmt: skip
            return None
        b = Bottleneck.from_probe(out.metrics, measured, params["num_workers"])
        if b.bound_named or again:
            break
        # a part read under the job's own rate measured less than the job gets (a busy host's slice): once more
        echo(f"bottleneck: {b.headline()} Probing again.")
    echo(b.headline())
    return b
