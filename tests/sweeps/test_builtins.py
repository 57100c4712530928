"""The built-in GPU workloads at smoke size on the CPU: the same code paths as on an H100, tiny shapes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from sweeps.builtins import BUILTINS, GPT_FULL, GPT_SMOKE, gpt, resnet
from sweeps.config import SweepConfig
from sweeps.data import H5Images, make_images
from sweeps.measure import measure
from sweeps.runner import job_for
from sweeps.trial import run_trial
from sweeps.workload import parse_workload

PLAIN = {"num_workers": 0, "pin_memory": False, "amp": False, "grad_accum": 1, "channels_last": False,
         "compile": False, "prefetch_factor": 2, "persistent_workers": True}  # fmt: skip


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> str:
    return make_images(tmp_path_factory.mktemp("img") / "images.h5", samples=48, size=40, classes=5).path


def job(name: str, data: str | None, steps: int = 1, warmup: int = 0, **params: Any) -> Any:
    cfg = SweepConfig(workload=name, steps_per_test=steps, warmup_steps=warmup)
    return job_for(cfg, parse_workload(name), data, cuda=False, smoke=True, params={**PLAIN, **params})


def test_images_are_encoded_jpegs_decoded_and_augmented_per_item(images: str) -> None:
    import h5py

    with h5py.File(images, "r") as f:
        raw = f["images"][0].tobytes()
        assert raw[:2] == b"\xff\xd8" and len(raw) < 40 * 40 * 3  # JPEG, compressed
    data = H5Images(images)
    assert len(data) == 48 and data.crop == 35
    torch.manual_seed(0)
    crops = [data[3][0] for _ in range(6)]
    x, y = data[3]
    assert x.shape == (3, 35, 35) and x.dtype == torch.uint8 and x.is_contiguous() and y.dtype == torch.int64
    assert len({c.numpy().tobytes() for c in crops}) > 1  # random crop/flip: the same image differs
    assert 30 < float(x.float().mean()) < 225 and float(x.float().std()) > 5  # an image, never zeros


def test_cnn_trains_with_decoding_workers_and_channels_last(images: str) -> None:
    out = run_trial(job("cnn", images, steps=3, warmup=1, batch_size=8, num_workers=2, amp=True,
                        channels_last=True), 120)  # fmt: skip
    assert out.status == "ok", out.error
    m = out.metrics
    assert m["workload_name"] == "cnn (smoke)" and m["samples_per_s"] > 0 and m["forward_ms"] > 0


def test_gpt_is_causal_and_full_size_has_the_promised_shape() -> None:
    torch.manual_seed(0)
    model = gpt(GPT_SMOKE).eval()
    a = torch.randint(GPT_SMOKE.vocab, (2, 40))
    b = a.clone()
    b[:, 25:] = torch.randint(GPT_SMOKE.vocab, (2, 15))  # change only the future of position 24
    with torch.no_grad():
        la, lb = model(a), model(b)
    assert torch.allclose(la[:, :25], lb[:, :25], atol=1e-5) and not torch.allclose(la[:, 25:], lb[:, 25:])
    assert (GPT_FULL.layers, GPT_FULL.d_model, GPT_FULL.seq) >= (12, 768, 1024)
    with torch.device("meta"):  # shapes only: no 136 M parameters allocated on the CPU
        n = sum(p.numel() for p in gpt(GPT_FULL).parameters())
        r50 = sum(p.numel() for p in resnet((3, 4, 6, 3), 64, 100, bottleneck=True).parameters())
    assert 120e6 < n < 150e6 and 20e6 < r50 < 26e6


def test_gpt_accumulates_gradients_and_amp_and_accumulation_lower_the_footprint() -> None:
    est = {(k, amp): measure(job("gpt", None, batch_size=16, grad_accum=k, amp=amp))["estimated_memory_gb"]
           for k, amp in ((1, False), (4, False), (1, True))}  # fmt: skip
    assert est[(4, False)] < est[(1, False)] and est[(1, True)] < est[(1, False)]
    out = run_trial(job("gpt", None, steps=2, warmup=1, batch_size=8, grad_accum=2, amp=True), 120)
    assert out.status == "ok", out.error
    assert out.metrics["final_loss"] == pytest.approx(np.log(GPT_SMOKE.vocab), rel=0.3)  # random tokens


def test_every_builtin_names_its_data_and_space(tmp_path: Path) -> None:
    assert {"cnn", "gpt", "tiny", "medium"} <= set(BUILTINS)
    for name, b in BUILTINS.items():
        assert b.data in (None, "features", "images"), name
        if b.config:
            assert (Path(__file__).parents[2] / "sweeps" / b.config).is_file()
