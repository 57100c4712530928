"""bench/measure/outputs.py: outputs round-trip through their raw files exactly, whatever their dtype or layout."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bench.measure import outputs


@pytest.mark.parametrize(
    "tensor",
    [
        torch.randn(3, 5),
        torch.randn(4, 6).t(),  # not contiguous
        torch.randn(7).to(torch.bfloat16),
        torch.randn(2, 3).to(torch.float16),
        torch.randn(5, dtype=torch.complex64),
        torch.arange(10, dtype=torch.int64).view(2, 5),
        torch.tensor([True, False, True]),
        torch.empty(0, 3),
        torch.tensor(2.5),  # 0-d
    ],
    ids=["fp32", "transposed", "bf16", "fp16", "complex64", "int64", "bool", "empty", "scalar"],
)
def test_round_trip_is_exact(tmp_path: Path, tensor: torch.Tensor) -> None:
    infos = outputs.save([tensor], str(tmp_path / "o"))
    assert infos == [{"shape": list(tensor.shape), "dtype": str(tensor.dtype).removeprefix("torch."), "device": "cpu"}]
    (back,) = outputs.load(str(tmp_path / "o"), infos)
    assert back.dtype == tensor.dtype and back.shape == tensor.shape
    assert torch.equal(back, tensor)


def test_several_outputs_and_a_sparse_one(tmp_path: Path) -> None:
    dense = torch.randn(4, 4)
    sparse = torch.eye(3).to_sparse()
    infos = outputs.save([dense, sparse], str(tmp_path / "o"))
    a, b = outputs.load(str(tmp_path / "o"), infos)
    assert torch.equal(a, dense) and torch.equal(b, torch.eye(3))


def test_saving_again_replaces_the_files(tmp_path: Path) -> None:
    d = str(tmp_path / "o")
    outputs.save([torch.ones(100)], d)
    infos = outputs.save([torch.zeros(10)], d)  # smaller: the old file's tail must not survive
    assert (tmp_path / "o" / "output-0.bin").stat().st_size == 10 * 4
    assert torch.equal(outputs.load(d, infos)[0], torch.zeros(10))
