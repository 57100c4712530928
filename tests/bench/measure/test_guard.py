"""bench/measure/guard.py's changed inputs: ``perturb`` gives the same bits in every process, thread and layout.

Both sides of a pair change their set-up inputs with it and must then agree on their outputs; a map that a second
thread or another vector width computes differently (a sine: up to 1.5e-4 apart on a 2-core CPU) fails pairs that
agree. The map is checked bit for bit against numpy's float32 arithmetic, which rounds every operation exactly.
And a process's CPU seconds, its workers' with them (the host-busy share).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bench.measure.guard import _HOST_WAVE, _WAVE, _wave_, perturb


def reference(x: np.ndarray) -> np.ndarray:
    """x·(1 + ½·w(x)), w = 4·|frac(x·7/2π + ¼) − ½| − 1, in float32 one operation at a time."""
    f = np.float32
    phase = x * f(_WAVE) + f(0.25)
    w = np.abs(phase - np.floor(phase) - f(0.5)) * f(4.0) - f(1.0)
    out = x * (w * f(0.5) + f(1.0))
    return np.where(np.isfinite(x), out, x)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n", [1, 7, 4096, 100_003])
def test_perturb_is_the_same_bits_whatever_the_threads_and_size(n: int, threads: int) -> None:
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        x = torch.randn(n, generator=torch.Generator().manual_seed(n)) * 3
        expected = reference(x.numpy().copy())
        assert perturb({"x": x}) == 1
        assert np.array_equal(x.numpy(), expected)  # bit for bit (no NaN here)
    finally:
        torch.set_num_threads(before)


def test_perturb_moves_small_values_a_little_and_each_its_own_way() -> None:
    """Near 0 (a layer's weights) the factor is ≈ 1 − 2.2·x: no common scale that would change a deep model's
    conditioning (a wave peaking at 0 multiplied every small weight by ~1.5)."""
    x = torch.tensor([0.0, 0.01, -0.01, 0.036, -0.036])
    y = x.clone()
    perturb({"x": y})
    assert y[0] == 0
    factor = y[1:] / x[1:]
    assert torch.allclose(factor, 1 - 2.228 * x[1:], atol=1e-3), factor
    assert float(factor.max() - factor.min()) > 0.1  # the same magnitude of either sign moves its own way


def test_perturb_commutes_with_a_relayout_and_leaves_what_it_cannot_change() -> None:
    a = torch.randn(64, 48, generator=torch.Generator().manual_seed(1))
    b = a.t().contiguous()  # a variant that transposed its input in set-up
    at = a.t().clone()  # and one that keeps it strided
    assert not at.is_contiguous()
    perturb({"a": a})
    perturb({"b": b, "at": at})
    assert torch.equal(a.t(), b) and torch.equal(at, b)
    special = torch.tensor([0.0, float("inf"), float("-inf"), float("nan")])
    ints = torch.arange(5)
    assert perturb({"s": special, "i": ints}) == 1  # integer tensors (indices) stay as they are
    assert special[0] == 0 and special[1] == float("inf") and special[2] == float("-inf") and special[3].isnan()
    assert torch.equal(ints, torch.arange(5))


def test_perturb_moves_values_within_half_and_not_monotonically() -> None:
    x = torch.linspace(0.01, 5.0, 2000)
    y = x.clone()
    perturb({"y": y})
    ratio = y / x
    assert bool(((ratio >= 0.5) & (ratio <= 1.5)).all()) and not torch.equal(x, y)
    assert not bool((y[1:] >= y[:-1]).all())  # sorted inputs come out unsorted: a sort's output changes order


@pytest.mark.skipif(not torch.cuda.is_available(), reason="a GPU's small tensors are changed on the host: needs CUDA")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_perturb_on_the_host_is_the_bits_the_gpu_computes(dtype: torch.dtype) -> None:
    """A small GPU tensor goes through the host (no kernel loads) and a large one through the GPU's kernels: both
    sides of a pair must change their inputs alike whatever their sizes."""
    x = (torch.randn(_HOST_WAVE, generator=torch.Generator().manual_seed(3)) * 3).to(dtype)
    x[:4] = torch.tensor([0.0, float("inf"), float("-inf"), float("nan")])
    on_host, on_gpu = x.cuda(), x.cuda()
    assert perturb({"x": on_host}) == 1
    _wave_(on_gpu)
    assert torch.equal(on_host[4:], on_gpu[4:]) and on_host[3].isnan() and torch.equal(on_host[:3], x[:3].cuda())


def test_a_process_cpu_time_holds_its_live_workers() -> None:
    """A DataLoader's workers are the variant's work: their CPU seconds count as its own, so a data-loading variant
    on an idle host does not read "host busy" (bench.isolate.timed's share of other processes)."""
    import subprocess
    import sys
    import time

    from bench.measure.cores import process_cpu_s

    own0 = process_cpu_s()
    worker = subprocess.Popen([sys.executable, "-c", "import time\nt = time.process_time()\n"
                               "while time.process_time() - t < 0.6: pass\ntime.sleep(30)"])  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while process_cpu_s() - own0 < 0.5 and time.monotonic() < deadline:  # alive, its 0.6 s spent or spending
            time.sleep(0.05)
        spent = process_cpu_s() - own0
        assert worker.poll() is None and spent >= 0.5, spent  # counted while the worker still runs
    finally:
        worker.kill()
        worker.wait()


def test_a_functions_inputs_are_the_globals_and_closure_it_reads() -> None:
    """A function as the benchmark (``def get_benchmark(): return run``) holds no attributes: its inputs are the
    module globals it names and its closure's variables, so the recheck changes them as it changes a ``setup()``'s."""
    from bench.define.protocol import check_benchmark
    from bench.measure.guard import setup_tensors

    space: dict = {"torch": torch, "a": torch.randn(4, 4), "b": torch.randn(4, 4), "unused": torch.randn(2)}
    exec("def run():\n    return torch.mm(a, b)\n", space)
    scale = torch.randn(3)
    found = setup_tensors(check_benchmark(space["run"], "x.py"))
    assert list(found) == ["a", "b"] and found["a"] is space["a"]
    assert list(setup_tensors(check_benchmark(lambda: scale * 2, "x.py"))) == ["scale"]
