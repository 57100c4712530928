"""The same benchmarks written in each output style (tests/fixtures/benchmark_template.py's STYLE: the output
written into a tensor made in setup(), made anew by each call, or returned by it) end the same way: faults, fakes,
honest and A/A pairs are each handled exactly as their in-place twin is."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.define.discovery import discover, select
from bench.define.result import SuiteResult
from bench.isolate.suite import run_suite
from tests.bench.isolate.test_isolation import FAST, TIGHT

STYLES = ("in_place", "allocated", "returned")
FILES: dict[str, dict[str, Any]] = {
    "ch07/baseline_x.py": {},
    "ch07/optimized_x.py": {},  # A/A: the same code
    "ch07/optimized_x_wrong.py": {"SCALE": 2.5},
    "ch07/optimized_x_precomputed.py": {"OUTPUT": "precomputed"},
    "ch07/optimized_x_hang.py": {"FAULT": ("warmup", "hang")},  # measured calls may be graph replays
    "ch07/optimized_x_crash.py": {"FAULT": ("warmup", "segfault")},
    "ch07/baseline_zeros.py": {"OUTPUT": "zeros"},
    "ch07/optimized_zeros.py": {"OUTPUT": "zeros"},
    "ch07/baseline_broken.py": {"FAULT": ("setup", "raise")},
    "ch07/optimized_broken.py": {},
}


def _outcomes(suite: SuiteResult) -> dict[str, Any]:
    variants = {v.spec.key: (v.status, v.failed_stage) for v in suite.variants}
    pairs = {f"{c.example}:{c.variant}": (c.status, c.verification.verified, c.verification.outcome)
             for c in suite.comparisons}  # fmt: skip
    return {"variants": variants, "pairs": pairs}


def test_each_style_ends_as_its_in_place_twin(tmp_path: Path, write_benchmark: Any) -> None:
    def run(style: str) -> SuiteResult:
        root = tmp_path / style
        for rel, knobs in FILES.items():
            write_benchmark(root / rel, STYLE=style, **knobs)
        return run_suite(select(discover(root)), cli_layer={**TIGHT, **FAST}, workdir=tmp_path / f"{style}-work")

    with ThreadPoolExecutor(max_workers=len(STYLES)) as pool:
        outcomes = dict(zip(STYLES, (_outcomes(s) for s in pool.map(run, STYLES)), strict=True))
    base = outcomes["in_place"]
    assert base["pairs"]["x:optimized"][:2] == ("ok", True), base  # the matrix is not vacuous
    assert base["pairs"]["x:optimized_wrong"][2] == "mismatch", base
    assert base["variants"]["ch07:x:optimized_precomputed"][0] == "invalid", base
    assert base["variants"]["ch07:x:optimized_hang"][0] == "timeout", base
    assert base["variants"]["ch07:x:optimized_crash"][0] == "failed", base
    assert base["variants"]["ch07:zeros:baseline"][0] == "invalid", base
    for style in STYLES[1:]:
        assert outcomes[style] == base, f"{style} differs from in_place: {outcomes[style]} vs {base}"


INFERENCE = """import torch
DEV = "cuda" if torch.cuda.is_available() else "cpu"  # the harness's device by default

class Bench:
    def setup(self):
        g = torch.Generator().manual_seed(0)
        with torch.inference_mode():  # inputs made as a serving benchmark makes them
            self.x = torch.randn(4096, generator=g).to(DEV)

    @torch.{mode}()
    def benchmark_fn(self):
        return (self.x * 2.0).sin()

def get_benchmark():
    return Bench()
"""


def test_a_call_under_inference_mode_is_timed_and_verified_as_written(tmp_path: Path) -> None:
    """``@torch.inference_mode()`` on the call and inputs made under it: its outputs and inputs are inference tensors,
    which torch lets no in-place write touch outside inference mode. The harness's own writes (NaN into the outputs
    before the timed calls, the changed inputs of the recheck) must not fail a variant the user wrote correctly."""
    root = tmp_path / "chapters"
    (root / "ch07").mkdir(parents=True)
    (root / "ch07" / "baseline_inf.py").write_text(INFERENCE.format(mode="no_grad"))
    (root / "ch07" / "optimized_inf.py").write_text(INFERENCE.format(mode="inference_mode"))
    suite = run_suite(select(discover(root)), cli_layer={**TIGHT, **FAST}, workdir=tmp_path / "work")
    failed = {v.spec.key: v.error for v in suite.variants if v.status != "ok"}
    assert not failed, failed
    (c,) = suite.comparisons
    assert c.verification.verified, c.verification


COMPILING = """import time, torch
DEV = "cuda" if torch.cuda.is_available() else "cpu"  # the harness's device by default

class Bench:
    def setup(self):
        self.x = torch.randn(4096, generator=torch.Generator().manual_seed(0)).to(DEV)
        self.compiled = False

    def benchmark_fn(self):
        if not self.compiled:  # torch.compile's first call: the compile, then the call
            time.sleep(2.5)
            self.compiled = True
        return self.x * 2.0

def get_benchmark():
    return Bench()
"""


def test_a_first_call_that_compiles_past_the_warm_up_limit_is_not_a_hang(tmp_path: Path) -> None:
    """Eager against torch.compile, written the usual way: the compile happens in the first call, which may take
    longer than the warm-up's limit (18 s from a cold cache on a 2-core host, against 15 s). The first call has a
    limit of its own (first_call_timeout_seconds); the rest of the warm-up keeps the warm-up's."""
    root = tmp_path / "chapters"
    (root / "ch07").mkdir(parents=True)
    (root / "ch07" / "baseline_comp.py").write_text(COMPILING.replace("time.sleep(2.5)", "pass"))
    (root / "ch07" / "optimized_comp.py").write_text(COMPILING)
    layer = {**FAST, "warmup_timeout_seconds": 1.0}
    suite = run_suite(select(discover(root)), cli_layer=layer, workdir=tmp_path / "work")
    failed = {v.spec.key: v.error for v in suite.variants if v.status != "ok"}
    assert not failed, failed
    slow = next(v for v in suite.variants if v.spec.variant == "optimized")
    assert slow.timing is not None and slow.timing.first_call_ms > 2000.0
    hang = COMPILING.replace("time.sleep(2.5)", "time.sleep(1000)")
    (root / "ch07" / "optimized_comp.py").write_text(hang)
    layer = {**layer, "first_call_timeout_seconds": 2.0}
    suite = run_suite(select(discover(root)), cli_layer=layer, workdir=tmp_path / "work2")
    hung = next(v for v in suite.variants if v.spec.variant == "optimized")
    assert hung.status == "timeout" and hung.failed_stage == "warmup", (hung.status, hung.error)
    assert hung.error is not None and "first_call_timeout_seconds" in hung.error.message, hung.error


NO_TENSOR = """import torch
DEV = "cuda" if torch.cuda.is_available() else "cpu"  # the harness's device by default

class Bench:
    def setup(self):
        self.x = torch.randn(4096, generator=torch.Generator().manual_seed(0)).to(DEV)

    def benchmark_fn(self):
        {body}

def get_benchmark():
    return Bench()
"""


def test_a_pair_without_a_tensor_output_says_what_the_call_returned(tmp_path: Path) -> None:
    """A call returning a Python number or None (an in-place update) has no output to compare: the pair's reason
    names what it returned and where the tensor goes, not only "no tensor or NumPy array"."""
    root = tmp_path / "chapters"
    (root / "ch07").mkdir(parents=True)
    bodies = {"baseline_num": "return float(self.x.sum())", "optimized_num": "return float(self.x.sum())",
              "baseline_inplace": "self.x.mul_(1.0)", "optimized_inplace": "self.x.mul_(1.0)"}  # fmt: skip
    for name, body in bodies.items():
        (root / "ch07" / f"{name}.py").write_text(NO_TENSOR.format(body=body))
    suite = run_suite(select(discover(root)), cli_layer={**TIGHT, **FAST}, workdir=tmp_path / "work")
    why = {c.example: c.verification.detail for c in suite.comparisons}
    assert not any(c.verification.verified for c in suite.comparisons), why
    assert "returned a Python float" in why["num"] and "as a tensor" in why["num"], why
    assert "returned None" in why["inplace"] and "get_output()" in why["inplace"], why


DRAWN = {
    "baseline_drawn": """import torch

class Bench:
    def setup(self):
        self.a, self.b = torch.randn(64, 64), torch.randn(64, 64)

    def benchmark_fn(self):
        return self.a @ self.b

def get_benchmark():
    return Bench()
""",
    "optimized_drawn_at_import": """import torch
a, b = torch.randn(64, 64), torch.randn(64, 64)

def run():
    return torch.mm(a, b)

def get_benchmark():
    return run
""",
    "optimized_drawn_in_init": """import torch

class Bench:
    def __init__(self):
        self.a, self.b = torch.randn(64, 64), torch.randn(64, 64)

    def __call__(self):
        return torch.matmul(self.a, self.b)

def get_benchmark():
    return Bench()
""",
}
# On the GPU, the harness's default device, tensors in host memory are refused: the inputs are drawn there.
ON_DEV = 'torch.randn(64, 64, device="cuda" if torch.cuda.is_available() else "cpu")'
DRAWN = {name: text.replace("torch.randn(64, 64)", ON_DEV) for name, text in DRAWN.items()}


def test_inputs_drawn_at_import_or_in_init_are_the_seeds_as_setups_are(tmp_path: Path) -> None:
    """Random inputs drawn where a script draws them (at import, in ``__init__``) come from the run's seed, as those
    drawn in ``setup()`` do: the same computation written in either style verifies against the other."""
    root = tmp_path / "chapters"
    (root / "ch07").mkdir(parents=True)
    for name, text in DRAWN.items():
        (root / "ch07" / f"{name}.py").write_text(text)
    suite = run_suite(select(discover(root)), cli_layer={**FAST, "seed": 7}, workdir=tmp_path / "work")
    failed = {v.spec.key: v.error for v in suite.variants if v.status != "ok"}
    assert not failed, failed
    why = {c.variant: c.verification.detail for c in suite.comparisons}
    assert len(why) == 2 and all(c.verification.verified for c in suite.comparisons), why


CACHED_FUNCTION = """import torch
a, b = torch.randn(64, 64), torch.randn(64, 64)
_cache = {}

def run():
    if "y" not in _cache:  # computed once, handed out anew each call
        _cache["y"] = torch.mm(a, b)
    return _cache["y"].clone()

def get_benchmark():
    return run
""".replace("torch.randn(64, 64)", ON_DEV)


def test_a_function_that_caches_its_result_is_invalid(tmp_path: Path) -> None:
    """A plain function as the benchmark, its inputs module globals: the recheck changes them as a setup()'s, so a
    result computed once and copied out each call is refused, not 80x faster."""
    root = tmp_path / "chapters"
    (root / "ch07").mkdir(parents=True)
    (root / "ch07" / "baseline_drawn.py").write_text(DRAWN["optimized_drawn_at_import"])
    (root / "ch07" / "optimized_drawn.py").write_text(CACHED_FUNCTION)
    suite = run_suite(select(discover(root)), cli_layer=FAST, workdir=tmp_path / "work")
    status = {v.spec.variant: (v.status, v.failed_stage) for v in suite.variants}
    assert status == {"baseline": ("ok", None), "optimized": ("invalid", "recheck")}, status
