"""Chapter 5's files and codecs: the image codec round-trips, every variant cleans up after itself and
can be set up again, and each records the page-cache ceiling it is judged against."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from bench.define.context import context
from bench.define.protocol import load_benchmark
from chapters.ch05.common import decode_image, encode, smooth_images

CH05 = Path(__file__).resolve().parents[2] / "chapters" / "ch05"
VARIANTS = sorted(p.stem for p in CH05.glob("*_*.py") if p.stem.split("_")[0] in ("baseline", "optimized"))

pytestmark = pytest.mark.usefixtures("cpu_smoke")


@pytest.mark.parametrize(("height", "width"), [(1, 1), (7, 13), (16, 300)])
def test_image_codec_round_trips(height: int, width: int) -> None:
    images = list(smooth_images(3, height, width, seed=height * width, piece=2))
    assert len(images) == 3 and all(img.shape == (height, width, 3) for img in images)
    for img in images:
        assert torch.equal(decode_image(encode(img), (height, width, 3)), img.permute(2, 0, 1))
    if width > 1:
        assert any(int(img.max()) != int(img.min()) for img in images)  # not constant images


def test_smooth_images_compress() -> None:
    img = next(smooth_images(1, 64, 64, seed=0))
    assert len(encode(img)) < 0.8 * img.numel()  # the differences make them compressible, as photographs are


@pytest.mark.parametrize("variant", VARIANTS)
def test_set_up_again_after_teardown(setup_again: Callable[[Path], None], variant: str) -> None:
    setup_again(CH05 / f"{variant}.py")


@pytest.mark.parametrize("variant", VARIANTS)
def test_files_live_only_between_setup_and_teardown(variant: str) -> None:
    bench = load_benchmark(CH05 / f"{variant}.py")
    bench.setup()
    directory = Path(bench.tmp.name)
    try:
        assert any(directory.iterdir())  # the data was written
        assert not (directory / "page-cache-probe.bin").exists()
        assert context().sizes["page_cache_read_gbps"] > 0
    finally:
        bench.teardown()
    assert not directory.exists()


def test_hdf5_layouts_differ_only_in_chunks() -> None:
    chunks = []
    for side in ("baseline", "optimized"):
        bench = load_benchmark(CH05 / f"{side}_hdf5_chunking.py")
        bench.setup()
        try:
            chunks.append(bench.dset.chunks)
            rows, features = bench.rows, bench.dset.shape[1]
        finally:
            bench.teardown()
    assert chunks[1] == (rows, features)  # one read, one chunk
    assert chunks[0][0] > rows and chunks[0][1] < features  # tall and narrow: one read spans many chunks
