"""Chapter 13's training steps on the CPU: every call starts from the set-up state and equals a plain training
loop in float64 (a fresh optimizer, no reset); each pair's two sides agree within the tolerance they declare,
and the precision-changing one really changes precision; the checks of host_sync stop on a non-finite loss
on both sides; the image dataset gives the same samples in any process; each variant's torch trace reaches
its MLflow run."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from bench.define.protocol import load_benchmark
from chapters.ch13.common import PAD, JpegDataset, conv_flops, jpeg, lm_flops, smooth_images
from tests.session import slow_for

CH13 = Path(__file__).resolve().parents[2] / "chapters" / "ch13"
VARIANTS = sorted(p.stem for p in CH13.glob("*_*.py") if p.stem.split("_")[0] in ("baseline", "optimized"))
# The variants one process sets up (a variant of several ranks needs its process group: test_ch13_fsdp2 runs it
# through the harness's ranks, its recheck included)
ONE_PROCESS = [v for v in VARIANTS if load_benchmark(CH13 / f"{v}.py").get_config().world_size in (None, 1)]

pytestmark = pytest.mark.usefixtures("cpu_smoke")


def load(variant: str, **attrs: Any) -> Any:
    bench = load_benchmark(CH13 / f"{variant}.py")
    for name, value in attrs.items():
        setattr(bench, name, value)
    bench.setup()
    return bench


def outputs(bench: Any) -> tuple[torch.Tensor, ...]:
    bench.benchmark_fn()
    return tuple(t.clone() for t in bench.get_output())


def trained(bench: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """A call's losses (each step's, and the probe's where the output has it) and its flattened updates."""
    losses = outputs(bench)[0]
    return losses, torch.cat([p.detach().reshape(-1) for p in bench.params]) - bench.flat_init


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm())


def reference(bench: Any, optimizer: Callable[[list[nn.Parameter]], torch.optim.Optimizer]) -> tuple[Any, Any]:
    """The variant's training run written plainly, in float64: the model as set up, a fresh optimizer, the
    same batches, ``loss.backward(); opt.step()``; the losses and the flattened updates."""
    model = copy.deepcopy(bench.model).double()
    with torch.no_grad():
        for p, p0 in zip(model.parameters(), bench.init, strict=True):
            p.copy_(p0)
    opt = optimizer(list(model.parameters()))
    losses = []
    for i in range(bench.steps):
        x, y = bench.batch(i)
        x = x.double() if x.is_floating_point() else x
        loss = F.cross_entropy(model(x).flatten(0, -2), y.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    if hasattr(bench, "probe"):  # the conv nets: the trained model's loss on the probe batch
        with torch.no_grad():
            x, y = bench.probe()
            losses.append(F.cross_entropy(model(x.double()), y))
    update = torch.cat([p.detach().reshape(-1) for p in model.parameters()]) - bench.flat_init.double()
    return torch.stack(losses), update


def adamw(params: list[nn.Parameter]) -> torch.optim.Optimizer:
    return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.1)


def sgd(params: list[nn.Parameter]) -> torch.optim.Optimizer:
    return torch.optim.SGD(params, lr=0.05, momentum=0.9)


# Adam divides by sqrt(v): a gradient that is pure rounding noise (exactly 0 in float64) still moves its weight by
# lr in fp32, so Adam's updates agree with float64's to ~1e-3 of their norm; SGD's to fp32's rounding.
@pytest.mark.parametrize(
    ("variant", "optimizer", "tolerance"),
    [
        ("baseline_optimizer", adamw, 1e-2),
        ("optimized_optimizer", adamw, 1e-2),
        ("optimized_optimizer_foreach", adamw, 1e-2),
        ("baseline_zero_grad", adamw, 1e-2),
        ("baseline_amp", sgd, 1e-4),
        ("baseline_channels_last", sgd, 1e-4),
    ],
)
def test_every_call_equals_a_fresh_training_run_in_float64(variant: str, optimizer: Any, tolerance: float) -> None:
    bench = load(variant, amp=False)  # fp32 on the CPU: compared with float64, not with bf16's rounding
    try:
        first = trained(bench)
        second = trained(bench)  # from the reset: parameters, buffers and optimizer state as set up
        assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])
        ref_losses, ref_update = reference(bench, optimizer)
        assert rel(second[0], ref_losses) < 1e-5
        assert rel(second[1], ref_update) < tolerance
        assert float(ref_update.abs().max()) > 0 and bool((second[0] != second[0][0]).any())  # it trained
    finally:
        bench.teardown()


@pytest.mark.parametrize("variant", ONE_PROCESS)
def test_set_up_again_after_teardown(variant: str) -> None:
    """What the harness's recheck does: set up, call, tear down, set up again, poison the outputs, call: the
    same output (a teardown that leaves workers behind or loses what __init__ gave shows here)."""
    bench = load(variant)
    first = outputs(bench)
    bench.teardown()
    bench.setup()
    try:
        for t in bench.get_output():
            t.fill_(float("nan"))
        again = outputs(bench)
        assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    finally:
        bench.teardown()


@pytest.mark.parametrize("example", ["amp", "optimizer", "zero_grad", "host_sync", "channels_last", "dataloader"])
def test_both_sides_agree_within_the_declared_tolerance(example: str) -> None:
    sides = sorted(v for v in VARIANTS if v == f"baseline_{example}" or v.startswith(f"optimized_{example}"))
    results = {}
    for variant in sides:
        bench = load(variant)
        try:
            results[variant] = outputs(bench), bench.get_config().rtol or 1e-5
        finally:
            bench.teardown()
    (base, _), *others = [results[v] for v in sides if v.startswith("baseline")] + [
        results[v] for v in sides if v.startswith("optimized")
    ]
    for out, rtol in others:
        errors = [rel(o, b) for o, b in zip(out, base, strict=True)]
        assert max(errors) <= rtol, (example, errors, rtol)
        if example == "amp":  # bf16 really ran: its rounding shows, well inside the tolerance
            assert 1e-4 < errors[1] < rtol / 4, errors


# the data loader's side (11 s: its worker processes) in the full tier only; the same output check in the fast one
@pytest.mark.parametrize(
    "variant", slow_for(["optimized_channels_last", "optimized_dataloader"], {"optimized_dataloader"})
)
def test_conv_output_catches_a_skipped_last_update(variant: str) -> None:
    """The conv nets' output (each step's loss and the trained model's loss on the probe batch) moves past the
    pair's tolerance when the last optimizer step is skipped: the losses stand in for the updates."""
    results = []
    for skip in (False, True):
        bench = load(variant)
        try:
            if skip:
                step, calls = bench.opt.step, []

                def last_skipped(*args: Any, bench: Any = bench, step: Any = step, calls: list = calls) -> Any:
                    calls.append(1)
                    return None if len(calls) % bench.steps == 0 else step(*args)

                bench.opt.step = last_skipped
            losses = outputs(bench)[0]
            assert losses.shape == (bench.steps + 1,)
            results.append((losses, bench.get_config().rtol))
        finally:
            bench.teardown()
    (honest, rtol), (skipped, _) = results
    assert rel(skipped, honest) > 2 * rtol, (rel(skipped, honest), rtol)
    assert torch.equal(skipped[:-1], honest[:-1])  # only the probe saw the missing update


def test_channels_last_side_keeps_weights_and_batches_in_nhwc() -> None:
    bench = load("optimized_channels_last")
    try:
        conv = bench.model.stem[0].weight
        assert conv.is_contiguous(memory_format=torch.channels_last) and not conv.is_contiguous()
        assert bench.batch(0)[0].is_contiguous(memory_format=torch.channels_last)
        bench.benchmark_fn()
        assert bench.model.stem[0].weight.is_contiguous(memory_format=torch.channels_last)  # kept by the reset
    finally:
        bench.teardown()


def test_host_sync_logs_the_same_values_and_stops_on_a_non_finite_loss() -> None:
    logs = {}
    for variant in ("baseline_host_sync", "optimized_host_sync"):
        bench = load(variant)
        try:
            assert bool((bench.targets == PAD).any()) and bool((bench.targets != PAD).any())  # padding and tokens
            bench.benchmark_fn()
            bench.benchmark_fn()
            log = logs[variant] = torch.tensor(bench.log, dtype=torch.float64)
            # the last call's steps only: the loss, the total gradient norm, each parameter's gradient norm
            assert log.shape == (bench.steps, 2 + len(bench.params)) and bool((log > 0).all())
            bench.init[0].fill_(float("nan"))  # the position embedding: every loss becomes NaN
            with pytest.raises(FloatingPointError, match="nan"):
                bench.benchmark_fn()
        finally:
            bench.teardown()
    assert rel(logs["optimized_host_sync"], logs["baseline_host_sync"]) < 1e-4


def test_optimizer_rejects_an_unknown_implementation() -> None:
    from chapters.ch13.common import Optimizer

    with pytest.raises(ValueError, match="impl='fast'"):
        Optimizer("fast")


def test_jpeg_dataset_gives_the_same_samples_in_workers() -> None:
    images = list(smooth_images(5, 23, seed=3))
    assert all(img.shape == (23, 23, 3) and img.std() > 5 for img in images)  # not constant
    data = JpegDataset([jpeg(img) for img in images], [1, 2, 3, 4, 5], size=9, seed=7)
    x, label = data[2]
    assert x.shape == (3, 9, 9) and x.dtype == torch.float32 and label == 3
    assert torch.equal(data[2][0], x) and not torch.equal(data[1][0], x)
    plain = [b for b, _ in torch.utils.data.DataLoader(data, batch_size=2)]
    workers = [b for b, _ in torch.utils.data.DataLoader(data, batch_size=2, num_workers=2)]
    assert all(torch.equal(a, b) for a, b in zip(plain, workers, strict=True))
    other = JpegDataset(data.blobs, data.labels, size=9, seed=8)
    assert not torch.equal(other[2][0], x)  # the augmentation follows the seed


def test_work_counts() -> None:
    with torch.device("meta"):
        counted = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1, bias=False), nn.Flatten(), nn.Linear(4 * 25, 2))
    assert conv_flops(counted, images=2, size=5) == 3 * 2 * (2 * 4 * 27 * 25 + 2 * 200)
    bench = load("baseline_optimizer")
    try:
        d, seq, layers = 24, bench.seq, len(bench.model.blocks)
        linear = sum(m.weight.numel() for m in bench.model.modules() if isinstance(m, nn.Linear))
        assert lm_flops(bench.model, 33, seq) == 6 * linear * 33 + 6 * 33 * seq * d * layers
    finally:
        bench.teardown()


@pytest.mark.slow  # the chapter's whole suite traced and logged (14 s); the trace's logging is tested in the fast tier
def test_each_variant_trace_is_logged_to_mlflow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The chapter's own config turns profiling on: a plain run (no --profile) logs a torch.profiler trace and the
    top ops of every variant to its MLflow run."""
    import shutil

    from mlflow import MlflowClient

    from bench.define.discovery import discover, select
    from bench.isolate.suite import run_suite
    from bench.record.tracking import Tracker

    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name in ("ncu", "nsys") else real(name, *a, **k))
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    example = select(discover(), ["ch13:zero_grad"])
    with Tracker(experiment="ch13-profile-test", tracking_uri=uri) as tracker:
        suite = run_suite(example, cli_layer={"smoke": True, "iterations": 3, "warmup": 1, "timeout_multiplier": 4.0},
                          sink=tracker, workdir=tmp_path / "wd")  # fmt: skip
    client = MlflowClient(uri)
    for v in suite.variants:
        assert v.status == "ok" and v.profile is not None and v.profile.tools["torch"] == "ok", v.error
        run = client.get_run(tracker.run_id(v.spec.key) or "")
        artifacts = {a.path for a in client.list_artifacts(run.info.run_id, "profile")}
        assert {"profile/trace.json.gz", "profile/top_ops.md"} <= artifacts
        assert run.data.params["enable_profiling"] == "True"


def test_work_names_the_matmuls_precision() -> None:
    """The losses are fp32 on every side; the work says which matmul peak the FLOPs compete with."""
    for variant, dtype in (("baseline_amp", "fp32"), ("optimized_amp", "bf16"), ("optimized_channels_last", "bf16")):
        bench = load(variant)
        try:
            assert bench.get_work()["dtype"] == dtype and bench.get_work()["flops"] > 0
        finally:
            bench.teardown()


@pytest.mark.parametrize("chapter", ["ch13", "ch14"])
def test_seeded_builds_on_the_runs_device_from_its_seed(chapter: str) -> None:
    """A model is initialised where it runs (a GPU's generator, not the host's then a copy), from the run's seed:
    the same weights for the same seed and offset, others for another offset; the caller's RNG state kept."""
    import importlib

    from bench.define.context import RunContext, context, set_context

    seeded = importlib.import_module(f"chapters.{chapter}.common").seeded
    cpu = context()
    where: list[torch.device] = []

    def build() -> nn.Module:
        where.append(torch.empty(()).device)  # a factory call's default device, inside the build
        return nn.Linear(6, 5)

    set_context(RunContext(device=torch.device("meta"), seed=cpu.seed, smoke=True, config=cpu.config))
    try:
        on_meta = seeded(build, offset=1)
    finally:
        set_context(cpu)
    assert where == [torch.device("meta")] and on_meta.weight.is_meta
    state = torch.get_rng_state()
    a, b, c = seeded(build, offset=1), seeded(build, offset=1), seeded(build, offset=2)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(a.weight, b.weight) and not torch.equal(a.weight, c.weight)
