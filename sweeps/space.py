"""The search space: the knobs a trial sets, the values each may take, and which combinations are one.

Two combinations are the same configuration when they differ only in knobs that do nothing there:
with 0 DataLoader workers, ``prefetch_factor`` and ``persistent_workers`` have no meaning, so
``canonical`` sets them to their first value and the grid measures that configuration once. A batch
size that ``grad_accum`` does not divide is no configuration at all (``canonical`` returns None).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from bench.measure import usable_cores  # re-exported: the cores a sweep's worker counts are weighed against

__all__ = ["DEFAULTS", "PARAMS", "Space", "key", "usable_cores", "worker_ladder"]

PARAMS = ("batch_size", "num_workers", "amp", "pin_memory", "grad_accum", "channels_last", "compile",
          "prefetch_factor", "persistent_workers")  # fmt: skip
OTHER = PARAMS[1:]  # everything but the batch size: an OOM wall is per combination of these
# Values of knobs a results table may lack (sweeps before they existed ran with these).
DEFAULTS: dict[str, Any] = {"grad_accum": 1, "channels_last": False, "compile": False, "prefetch_factor": 2,
                            "persistent_workers": True}  # fmt: skip
LOADER_ONLY = ("prefetch_factor", "persistent_workers")  # meaningless without workers


def worker_ladder(cores: int) -> list[int]:
    """DataLoader worker counts worth measuring on a host of ``cores`` usable cores: none, then doubling
    from 2, and the cores themselves (each worker decodes on a core of its own)."""
    ladder, w = [0], 2
    while w < cores:
        ladder.append(w)
        w *= 2
    return ladder + ([cores] if cores > 1 else [1])


def key(p: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(p.get(k, DEFAULTS.get(k)) for k in PARAMS)


class Space:
    """Each knob's candidate values, in ascending order (False before True)."""

    def __init__(self, values: Mapping[str, list[Any]]) -> None:
        missing = [k for k in PARAMS if not values.get(k)]
        if missing:
            raise ValueError(f"the search space needs at least one value for {missing}")
        self.values = {k: list(values[k]) for k in PARAMS}

    def canonical(self, p: Mapping[str, Any]) -> dict[str, Any] | None:
        """The configuration ``p`` stands for, or None when it is not one (grad_accum ∤ batch_size)."""
        c = {k: p.get(k, DEFAULTS.get(k)) for k in PARAMS}
        if c["batch_size"] % c["grad_accum"]:
            return None
        if c["num_workers"] == 0:
            c.update({k: self.values[k][0] for k in LOADER_ONLY})
        return c

    def points(self) -> list[dict[str, Any]]:
        """Every distinct configuration, in the product's order."""
        seen: dict[tuple[Any, ...], dict[str, Any]] = {}
        for combo in itertools.product(*self.values.values()):
            c = self.canonical(dict(zip(PARAMS, combo, strict=True)))
            if c is not None:
                seen.setdefault(key(c), c)
        return list(seen.values())

    def size(self) -> int:
        return len(self.points())

    def base(self) -> dict[str, Any]:
        """Where the smart strategy's batch-size ladder climbs: the settings that usually run fastest —
        the most workers, AMP, pinning, channels_last and persistent workers when offered; no gradient
        accumulation and no torch.compile (its compile time is only worth it once the rest is chosen)."""
        v = self.values
        return {"num_workers": v["num_workers"][-1], "amp": v["amp"][-1], "pin_memory": v["pin_memory"][-1],
                "grad_accum": v["grad_accum"][0], "channels_last": v["channels_last"][-1],
                "compile": v["compile"][0], "prefetch_factor": v["prefetch_factor"][0],
                "persistent_workers": v["persistent_workers"][-1]}  # fmt: skip

    def varied(self) -> list[str]:
        """The knobs with more than one value (the ones a picture or an importance can show)."""
        return [k for k in PARAMS if len(self.values[k]) > 1]
