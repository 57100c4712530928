"""Chapter 5's files, codecs and conversions: the image codec round-trips, every variant cleans up after
itself and can be set up again, each file variant records the page-cache ceiling it is judged against, and
the image normalisation is exact wherever it runs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from bench.define.context import context
from bench.define.protocol import load_benchmark
from bench.errors import Skip
from chapters.ch05.common import MEAN, STD, decode_image, encode, normalize, smooth_images, statistics

CH05 = Path(__file__).resolve().parents[2] / "chapters" / "ch05"
VARIANTS = sorted(p.stem for p in CH05.glob("*_*.py") if p.stem.split("_")[0] in ("baseline", "optimized"))
IN_MEMORY = ("uint8_upload",)  # examples that start from data in memory: no files, no page-cache probe
FILE_VARIANTS = [v for v in VARIANTS if v.split("_", 1)[1] not in IN_MEMORY]

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


@pytest.mark.parametrize("variant", FILE_VARIANTS)
def test_files_live_only_between_setup_and_teardown(variant: str) -> None:
    bench = load_benchmark(CH05 / f"{variant}.py")
    try:
        bench.setup()
    except Skip as exc:  # the cuFile side on a host without a GPU: nothing may stay behind
        assert not Path(bench.tmp.name).exists()
        pytest.skip(str(exc))
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


def rounded_per_op(x: torch.Tensor) -> torch.Tensor:
    """(x / 255 - mean) / std with each op's exact result rounded to fp32 (computed in fp64, then rounded: for
    +, -, x, / that gives the correctly rounded fp32 result), as IEEE fp32 arithmetic on any device gives."""
    mean, std = (torch.tensor(v).view(3, 1, 1).double() for v in (MEAN, STD))
    y = (x.double() / 255).float()
    y = (y.double() - mean.float().double()).float()
    return (y.double() / std.float().double()).float()


def test_normalize_rounds_each_op_correctly() -> None:
    x = torch.arange(256, dtype=torch.uint8).view(1, 1, 16, 16).expand(2, 3, 16, 16).contiguous()  # every byte
    out = torch.full(x.shape, float("nan"))
    normalize(x, statistics(torch.device("cpu")), out)
    assert torch.equal(out, rounded_per_op(x))
    # Why the constants are tensors: the reciprocal form (CUDA's path for a Python divisor) rounds otherwise.
    assert not torch.equal(x.float() * (1 / torch.tensor(255.0)), (x.double() / 255).float())


def test_normalize_operands_are_tensors_on_the_images_device() -> None:
    """The premise of the sides' bitwise agreement: no op of ``normalize`` takes a Python number (which a GPU
    would turn into a reciprocal multiplication) or an operand from another device."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: list[tuple[str, list[object]]] = []

    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            seen.append((str(func), [a for a in args if not isinstance(a, torch.Tensor)]))
            assert all(a.device == x.device for a in args if isinstance(a, torch.Tensor)), func
            return func(*args, **(kwargs or {}))

    x = torch.randint(0, 256, (2, 3, 5, 7), dtype=torch.uint8)
    stats, out = statistics(x.device), torch.empty(x.shape)
    with Log():
        normalize(x, stats, out)
    assert [op.split(".")[1] for op, _ in seen] == ["div", "sub_", "div_"] and all(not rest for _, rest in seen)


def test_uint8_upload_sides_agree_and_follow_the_images() -> None:
    benches = [load_benchmark(CH05 / f"{side}_uint8_upload.py") for side in ("baseline", "optimized")]
    for bench in benches:
        bench.setup()
    try:
        images = [bench.get_inputs()[0] for bench in benches]
        assert images[0].dtype == torch.uint8 and torch.equal(images[0], images[1])
        for change in (None, lambda x: x.bitwise_xor_(0x5A), lambda x: x.fill_(255)):
            outs = []
            for bench, x in zip(benches, images, strict=True):
                if change is not None:
                    change(x)
                bench.get_output().fill_(float("nan"))
                bench.benchmark_fn()
                outs.append(bench.get_output().clone())
            assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], rounded_per_op(images[0]))
        assert torch.equal(outs[0][:, 0], torch.full_like(outs[0][:, 0], (1 - MEAN[0]) / STD[0]))
        assert benches[0].get_work() == benches[1].get_work() == {"bytes": 5 * images[0].numel()}
    finally:
        for bench in benches:
            bench.teardown()


def test_gds_baseline_delivers_the_file_and_says_how_it_read() -> None:
    from chapters.ch05.common import byte_stream

    bench = load_benchmark(CH05 / "baseline_gds.py")
    bench.setup()
    try:
        bench.get_output().fill_(0)
        bench.benchmark_fn()
        size = bench.get_output().numel()
        assert size % 4096 == 0 and bench.host.data_ptr() % 4096 == 0  # O_DIRECT's alignment
        want = torch.frombuffer(bytearray(byte_stream(size, offset=5)), dtype=torch.uint8)
        assert torch.equal(bench.get_output().cpu(), want)
        assert context().sizes["io"].split()[0] in ("O_DIRECT", "buffered")
    finally:
        bench.teardown()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the skip of a host without a GPU")
def test_gds_cufile_side_skips_without_a_gpu_naming_it() -> None:
    bench = load_benchmark(CH05 / "optimized_gds.py")
    with pytest.raises(Skip, match="CUDA GPU"):
        bench.setup()
    assert not Path(bench.tmp.name).exists()
