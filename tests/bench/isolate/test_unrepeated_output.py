"""A call whose output depends on something besides its inputs (an unseeded ``torch.randn`` in the call, a call
counter) reads as a plain mismatch of values unless the harness says why: the check stage calls once more on the same
inputs (bench.isolate.timed, bench.measure.repeat), and a pair whose outputs differ names the side whose output did
not repeat. An honest pair, and a variant whose timed calls change its set-up tensors, are left as they were."""

from __future__ import annotations

from pathlib import Path

from bench.define.discovery import discover, select
from bench.isolate.suite import run_suite
from tests.bench.isolate.test_isolation import FAST

RETURNED = """import torch

class Bench:
    def setup(self):
        self.x = torch.randn(4096, generator=torch.Generator().manual_seed(0))
        self.n = 0

    def benchmark_fn(self):
        {body}

def get_benchmark():
    return Bench()
"""

# Writes through a scratch tensor made in setup(): the timed calls change a set-up tensor, the output stays the
# call's and the same every call.
IN_PLACE = """import torch

class Bench:
    def setup(self):
        self.x = torch.randn(4096, generator=torch.Generator().manual_seed(0))
        self.tmp = torch.zeros(4096)
        self.out = torch.empty(4096)

    def benchmark_fn(self):
        torch.mul(self.x, 2.0, out=self.tmp)
        torch.add(self.tmp, 1.0, out=self.out)

    def get_output(self):
        return self.out

def get_benchmark():
    return Bench()
"""

BODIES = {
    "baseline_x": "return self.x * 2.0",
    "optimized_x": "return (self.x * 4.0) / 2.0",  # honest: the same values
    "optimized_x_random": "return self.x * 2.0 + 0.1 * torch.randn(4096)",  # unseeded, drawn in the call
    "optimized_x_counter": "self.n += 1\n        return self.x * 2.0 * self.n",  # depends on how often it ran
}
WHY = "differs between two calls on the same inputs"


def test_an_output_that_does_not_repeat_is_named_in_the_mismatch(tmp_path: Path) -> None:
    root = tmp_path / "chapters"
    (root / "ch07").mkdir(parents=True)
    for name, body in BODIES.items():
        (root / "ch07" / f"{name}.py").write_text(RETURNED.format(body=body))
    for name in ("baseline_inplace", "optimized_inplace"):
        (root / "ch07" / f"{name}.py").write_text(IN_PLACE)
    suite = run_suite(select(discover(root)), cli_layer={**FAST, "device": "cpu"}, workdir=tmp_path / "work")
    variants = {v.spec.key: v for v in suite.variants}
    failed = {k: (v.status, v.error) for k, v in variants.items() if v.status != "ok"}
    assert not failed, failed
    repeated = {k: v.output.repeated if v.output else "no output" for k, v in variants.items()}
    pairs = {f"{c.example}:{c.variant}": c for c in suite.comparisons}

    honest = pairs["x:optimized"]
    assert honest.status == "ok" and honest.verification.verified, honest.verification
    assert WHY not in honest.verification.detail
    assert repeated["ch07:x:baseline"] is True and repeated["ch07:x:optimized"] is True, repeated

    for name in ("optimized_random", "optimized_counter"):
        c = pairs[f"x:{name}"]
        assert repeated[f"ch07:x:{name}"] is False, repeated
        assert c.status == "mismatch" and not c.verification.verified, c.verification
        detail = c.verification.detail
        assert f"the optimized side's output {WHY}" in detail and "baseline side" not in detail, detail
        assert "max abs diff" in detail, detail

    # The timed calls changed a set-up tensor (its scratch): its output is not looked at again, and not named.
    in_place = pairs["inplace:optimized"]
    recheck = variants["ch07:inplace:optimized"].recheck
    assert recheck is not None and [m.split(":")[0] for m in recheck.mutated] == ["tmp"], recheck
    assert repeated["ch07:inplace:baseline"] is None and repeated["ch07:inplace:optimized"] is None, repeated
    assert in_place.status == "ok" and WHY not in in_place.verification.detail, in_place.verification
