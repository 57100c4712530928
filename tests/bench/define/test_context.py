"""bench.define.context: sizes relative to the device, recorded in the result; requirements that skip with a reason."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bench.define.config import resolve_config
from bench.define.context import RunContext, device_facts, make_context, set_rank
from bench.define.discovery import discover, select
from bench.errors import Skip
from bench.isolate.suite import run_suite

BENCH = """
import torch
from bench import context

class B:
    def setup(self):
        ctx = context()
        {body}
        n = ctx.working_set(l2=4, smoke=4096, name="x_bytes") // 4
        self.x = torch.randn(n, generator=torch.Generator().manual_seed(ctx.seed)).to(ctx.device)
        self.out = torch.empty_like(self.x)

    def benchmark_fn(self):
        torch.mul(self.x, 2.0, out=self.out)

    def teardown(self):
        pass

    def get_output(self):
        return self.out

def get_benchmark():
    return B()
"""


def _chapter(root: Path, body_baseline: str, body_optimized: str) -> Path:
    ch = root / "ch02"
    ch.mkdir(parents=True)
    (ch / "baseline_scaled.py").write_text(BENCH.replace("{body}", body_baseline))
    (ch / "optimized_scaled.py").write_text(BENCH.replace("{body}", body_optimized))
    return root


def _run(root: Path, tmp_path: Path):
    examples = select(discover(root), ["ch2:scaled"])
    layer = {"iterations": 3, "warmup": 1, "device": "cpu", "max_rounds": 1, "min_rounds": 1}
    return run_suite(examples, cli_layer=layer, workdir=tmp_path / "w")


def test_working_set_is_recorded_in_the_result(tmp_path: Path) -> None:
    suite = _run(_chapter(tmp_path / "chapters", "pass", "pass"), tmp_path)
    assert [v.status for v in suite.variants] == ["ok", "ok"]
    for v in suite.variants:
        assert v.sizes == {"x_bytes": 4096}  # smoke size on the CPU
    assert suite.comparisons[0].verification.verified


def test_a_variant_needing_two_gpus_is_skipped_with_the_reason(tmp_path: Path) -> None:
    suite = _run(_chapter(tmp_path / "chapters", "pass", "ctx.require(gpus=2, tools=('no-such-tool-xyz',))"), tmp_path)
    base, opt = suite.variants
    assert base.status == "ok"
    assert opt.status == "skipped" and opt.error is None
    assert "a CUDA GPU" in (opt.skip_reason or "") and "no-such-tool-xyz" in (opt.skip_reason or "")
    (c,) = suite.comparisons
    assert c.status == "skipped" and not c.verification.verified
    assert "no-such-tool-xyz" in c.verification.detail


def test_full_size_scales_with_the_device_facts() -> None:
    ctx = make_context(resolve_config({"device": "cpu", "smoke": False}))
    assert ctx.facts is not None and ctx.facts.l2_bytes > 0 and ctx.facts.memory_bytes > 0
    assert ctx.working_set(l2=4, smoke=1, name="a") == 4 * ctx.facts.l2_bytes
    assert ctx.working_set(memory=0.001, smoke=1, name="b") == int(0.001 * ctx.facts.memory_bytes)
    assert ctx.sizes == {"a": 4 * ctx.facts.l2_bytes, "b": int(0.001 * ctx.facts.memory_bytes)}


def test_working_set_refuses_ambiguous_or_bad_scales() -> None:
    ctx = RunContext(
        device=torch.device("cpu"),
        seed=0,
        smoke=False,
        config=resolve_config(),
        facts=device_facts(torch.device("cpu")),
    )
    with pytest.raises(ValueError, match="exactly one of l2= or memory="):
        ctx.working_set(l2=1, memory=1, smoke=1)
    with pytest.raises(ValueError, match="must be > 0, got -1"):
        ctx.working_set(l2=-1, smoke=1)


def test_require_passes_when_the_host_has_it() -> None:
    ctx = make_context(resolve_config({"device": "cpu"}))
    ctx.require(tools=("python3",), modules=("torch",))  # no exception
    with pytest.raises(Skip, match="the Python module 'not_a_module_xyz'"):
        ctx.require(modules=("not_a_module_xyz",))


def test_a_rank_of_several_knows_its_place() -> None:
    set_rank(1)
    try:
        ranked = make_context(resolve_config({"device": "cpu", "world_size": 3}))
        single = make_context(resolve_config({"device": "cpu"}))
    finally:
        set_rank(0)
    assert (ranked.rank, ranked.world_size, ranked.device.type) == (1, 3, "cpu")
    assert (single.rank, single.world_size) == (0, 1)  # a one-process variant is rank 0 whatever set_rank said
    if torch.cuda.is_available():  # "auto" and "cuda" mean cuda:rank
        set_rank(0)
        assert make_context(resolve_config({"device": "cuda", "world_size": 2})).device == torch.device("cuda", 0)


def test_file_is_a_plain_name_in_the_variants_directory(tmp_path: Path) -> None:
    ctx = make_context(resolve_config({"device": "cpu"}), files_dir=str(tmp_path / "files"))
    assert ctx.file("snapshot.pickle") == tmp_path / "files" / "snapshot.pickle"
    assert (tmp_path / "files").is_dir()  # made on first use
    for bad in ("", ".", "..", "a/b.txt", "/etc/passwd"):
        with pytest.raises(ValueError, match="plain file name"):
            ctx.file(bad)
    outside = make_context(resolve_config({"device": "cpu"}))  # outside the harness: a temporary directory
    path = outside.file("x.txt")
    assert path.parent.is_dir() and path.parent == Path(outside.files_dir or "")
