"""``perflab ab``: a reference file against candidate files, perflab benchmarks or KernelBench-format problems, timed,
verified and logged as a chapter pair; every integrity check applies."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.cli.ab import examples_of
from bench.define.kernelbench import file_kind
from bench.errors import PerflabError
from bench.isolate.suite import run_suite
from tests.bench.cli.test_cli import perflab

REPO = Path(__file__).resolve().parents[3]
KERNELBENCH = REPO / "chapters" / "ch20" / "kernelbench"
STYLES = REPO / "tests" / "bench" / "exploits" / "ch92"

MODEL = "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n\n" \
        "def get_inputs():\n    return [torch.randn(8)]\n"  # fmt: skip
NEW = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x + x\n"


def _write(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(text)
    return root


def test_file_kinds_are_read_without_importing(tmp_path: Path) -> None:
    _write(tmp_path, {"ref.py": MODEL, "new.py": NEW, "bench.py": "def get_benchmark():\n    raise SystemExit\n",
                      "helper.py": "X = 1\n", "alias.py": "Model = object\nget_inputs = list\n",
                      "script.py": SCRIPT, "half.py": "def benchmark_fn():\n    pass\n"})  # fmt: skip
    kinds = {p.name: file_kind(p) for p in tmp_path.iterdir()}
    assert kinds == {"ref.py": "reference", "new.py": "candidate", "bench.py": "benchmark", "helper.py": None,
                     "alias.py": "reference", "script.py": "benchmark", "half.py": None}  # fmt: skip


def test_a_directory_is_its_reference_and_candidates_named_for_it(tmp_path: Path) -> None:
    root = _write(tmp_path / "relu", {"ref.py": MODEL, "b.py": NEW, "a.py": NEW, "optimized_c.py": NEW,
                                      "common.py": "X = 1\n"})  # fmt: skip
    (example,) = examples_of([root])
    assert example.target == "ab:relu" and Path(example.baseline.path).name == "ref.py"  # type: ignore[union-attr]
    assert [v.variant for v in example.optimized] == ["optimized_a", "optimized_b", "optimized_c"]
    assert {v.reference for v in example.variants} == {str(root / "ref.py")}


def test_a_directory_of_problems_is_a_pair_each(tmp_path: Path) -> None:
    for name in ("one", "two"):
        _write(tmp_path / "set" / name, {"reference.py": MODEL, "fast.py": NEW})
    assert [e.target for e in examples_of([tmp_path / "set"])] == ["ab:one", "ab:two"]


@pytest.mark.parametrize(
    ("files", "args", "message"),
    [
        ({"ref.py": MODEL}, ["ref.py"], "name at least one candidate file after the reference"),
        ({"ref.py": MODEL}, ["ref.py", "nope.py"], "no such file or directory: .*nope.py"),
        ({"ref.py": MODEL, "x.txt": ""}, ["ref.py", "x.txt"], r"not a benchmark: .*x.txt \(not a .py file\)"),
        ({"ref.py": MODEL, "b.py": "def f(:\n"}, ["ref.py", "b.py"], r"b.py \(syntax error at line 1: [^)]+\)$"),
        ({"ref.py": MODEL, "h.py": "X = 1\n"}, ["ref.py", "h.py"], r"h.py \(no get_benchmark\(\), setup\(\) and "),
        (
            {"ref.py": MODEL, "p.py": "def test_mm(benchmark):\n    benchmark(sum, [1])\n"},
            ["ref.py", "p.py"],
            r"p.py \(a pytest-benchmark test, test_mm\(benchmark\): its code before benchmark\(...\) goes in setup\(\)",
        ),
        (
            {"ref.py": MODEL, "t.py": "import timeit\nt = timeit.Timer(stmt='x * 2', setup='x = 3')\n"},
            ["ref.py", "t.py"],
            r"t.py \(a Timer\(stmt=...\) \(torch.utils.benchmark, timeit\): its setup and globals go in setup\(\)",
        ),
        (
            {
                "ref.py": MODEL,
                "u.py": "import torch.utils.benchmark as tb\nprint(tb.Timer('x*2').blocked_autorange())\n",
            },
            ["ref.py", "u.py"],
            r"u.py \(a Timer\(stmt=...\) \(torch.utils.benchmark, timeit\)",
        ),
        (
            {"ref.py": MODEL, "r.py": "import timeit\nprint(timeit.repeat('x*2', 'x = 3'))\n"},
            ["ref.py", "r.py"],
            r"r.py \(a Timer\(stmt=...\)",
        ),
        (
            {"ref.py": MODEL, "i.py": "import itertools\nX = list(itertools.repeat(1, 3))\n"},
            ["ref.py", "i.py"],
            r"i.py \(no get_benchmark\(\)",
        ),
        (
            {"ref.py": MODEL, "k.py": "from triton.testing import do_bench\nms = do_bench(lambda: None)\n"},
            ["ref.py", "k.py"],
            r"k.py \(a Triton do_bench\(fn\) call: what fn uses goes in setup\(\)",
        ),
        (
            {"ref.py": MODEL, "f.py": "A = [1.0]\ndef run():\n    return A\n"},
            ["ref.py", "f.py"],
            r"f.py \(a function run\(\) but no get_benchmark\(\): add def get_benchmark\(\): return run ",
        ),
        (
            {"ref.py": MODEL, "c.py": "class MatMul:\n    def setup(self): ...\n    def __call__(self): ...\n"},
            ["ref.py", "c.py"],
            r"c.py \(a class MatMul with __call__\(\) but no get_benchmark\(\): add def get_",
        ),
        (
            {"ref.py": MODEL, "s.py": "def benchmark_fn():\n    return 1\n"},
            ["ref.py", "s.py"],
            r"s.py \(module-level benchmark_fn\(\) without setup\(\): add a setup\(\)",
        ),
        ({"b.py": "def get_benchmark(): ...\n", "n.py": NEW}, ["b.py", "n.py"], "n.py is a KernelBench candidate"),
        ({"ref.py": MODEL, "a": None}, ["ref.py", "a"], "a directory is given alone"),
        ({"ref.py": MODEL}, ["ref.py", "ref.py"], "both the reference and a candidate"),
    ],
)
def test_bad_files_are_one_line_naming_them(tmp_path: Path, files: dict, args: list[str], message: str) -> None:
    for name, text in files.items():
        (tmp_path / name).mkdir() if text is None else (tmp_path / name).write_text(text)
    with pytest.raises(PerflabError, match=message):
        examples_of([tmp_path / a for a in args])


@pytest.mark.parametrize(("files", "message"), [
    ({"a.py": MODEL, "b.py": MODEL, "n.py": NEW}, "one reference needed .* found a.py, b.py"),
    ({"n.py": NEW}, "one reference needed .* found none"),
    ({"reference.py": MODEL, "x.py": "X = 1\n"}, "no candidate beside reference.py"),
])  # fmt: skip
def test_a_directory_without_one_reference_and_a_candidate_is_refused(tmp_path: Path, files: dict, message: str) \
        -> None:  # fmt: skip
    with pytest.raises(PerflabError, match=message):
        examples_of([_write(tmp_path / "p", files)])


@pytest.mark.slow  # every problem of chapter 20's directory (8-15 s); one file pair's fake is in the fast tier
def test_chapter_20s_kernelbench_problems_catch_their_fakes(tmp_path: Path) -> None:
    """Each problem's honest candidate verified, each fake not ok or not verified (on this host's device)."""
    layer = {"timeout_multiplier": 4.0, "min_rounds": 1, "max_rounds": 1}  # the checks are round 0's
    suite = run_suite(examples_of([KERNELBENCH]), cli_layer=layer, workdir=tmp_path)
    by = {f"{c.example}:{c.variant}": c for c in suite.comparisons}
    assert set(by) == {"attention:optimized_background", "attention:optimized_sdpa", "layernorm:optimized_fused",
                       "layernorm:optimized_half", "softmax:optimized_cached", "softmax:optimized_fused"}  # fmt: skip
    honest = {"attention:optimized_sdpa", "layernorm:optimized_fused", "softmax:optimized_fused"}
    for key, c in by.items():
        ok = c.optimized_status == "ok" and c.verification.verified
        assert ok == (key in honest), f"{key}: {c.optimized_status}, {c.verification.detail}"
        assert c.baseline_status == "ok", f"{key}: baseline {c.baseline_status}"


def test_perflab_ab_times_files_in_any_output_style_and_refuses_a_fake(tmp_path: Path) -> None:
    """The command on benchmark files as users write them: a new output each call (the reference), a returned one,
    and a fake whose thread does the work; exit 1 (a pair not verified), a row per candidate; with ``--out``, the
    files a CI system reads (a JUnit test case per pair, the fake's a failure)."""
    import xml.etree.ElementTree as ET

    done = perflab("ab", STYLES / "baseline_sorted.py", STYLES / "optimized_sorted_returned.py",
                   STYLES / "optimized_sorted_thread.py", "--no-track", "--out", tmp_path / "ci",
                   timeout=400)  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("baseline_sorted ")]
    assert len(rows) == 2 and "(optimized_sorted_returned)" in rows[0], done.stdout  # not optimized_optimized_
    assert "faster" in rows[0] or "no significant difference" in rows[0] or "slower" in rows[0], rows[0]
    # the thread still running at the call's return, the CPU's clock, a GPU's replay
    why = ("it started still running", "get_output() took", "CUDA-graph replay of one call did not write")
    assert "failed" in rows[1] and any(w in done.stdout for w in why), done.stdout
    cases = list(ET.parse(tmp_path / "ci" / "junit.xml").getroot().iter("testcase"))
    assert len(cases) == 2 and [c.find("failure") is not None for c in cases] == [False, True]
    assert (tmp_path / "ci" / "summary.json").is_file() and (tmp_path / "ci" / "summary.md").is_file()


PLAIN = """import torch

class Bench:  # no teardown(), as a first benchmark is often written
    def setup(self):
        self.x = torch.randn(1000)

    def benchmark_fn(self):
        return self.x * 2

def get_benchmark():
    return Bench()
"""
TRITON = """import torch, triton, triton.language as tl

@triton.jit
def double(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    keep = MASK
    tl.store(Y + offs, tl.load(X + offs, mask=keep) * 2, mask=keep)

class Bench:
    def setup(self):
        self.x = torch.randn(1000)

    def benchmark_fn(self):
        y = torch.empty_like(self.x)
        double[(triton.cdiv(1000, 256),)](self.x, y, 1000, BLOCK=256)
        return y

def get_benchmark():
    return Bench()
"""

SCRIPT = """import torch

x = None


def setup():
    global x
    x = torch.randn(1000)


def benchmark_fn():
    return x * 2
"""


@pytest.mark.slow  # four files through `perflab ab` (10-19 s); the interpreter is in the fast tier (test_interpreter)
def test_a_triton_kernel_that_reaches_past_its_tensor_fails_its_variant_on_the_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Interpreted on the CPU: the kernel without its tail mask fails, naming the access and the tensor
    (bench.define.interpreter), where it would read and write the host's memory past ``x`` and ``y``; the masked
    one is verified against the plain file (no ``teardown()`` in any of them), and so is a script of module-level
    functions (no class, no ``get_benchmark()``)."""
    _write(tmp_path, {"plain.py": PLAIN, "masked.py": TRITON.replace("MASK", "offs < n"),
                      "unmasked.py": TRITON.replace("MASK", "offs >= 0"), "script.py": SCRIPT})  # fmt: skip
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    done = perflab("ab", tmp_path / "plain.py", tmp_path / "masked.py", tmp_path / "unmasked.py",
                   tmp_path / "script.py", "--no-track", "--rounds", "1", "--device", "cpu", timeout=400)  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 1, out  # a pair not verified
    assert "ok plain:optimized_masked" in out and "failed plain:optimized_unmasked  [warmup]" in out, out
    assert "OutOfBounds" in out and "past the end of X (float32[1000], 4000 bytes)" in out, out
    assert "2/3 pairs verified" in out and "ok plain:optimized_script" in out, out  # masked and script: plain's


@pytest.mark.parametrize(("count", "device", "said"), [
    (0, "cuda", "torch sees no CUDA GPU on this host"), (2, "cuda:2", "this host has 2 CUDA GPU(s)"),
    (2, "cuda:1", None), (0, "cpu", None), (0, "auto", None)])  # fmt: skip
def test_check_device_names_a_cuda_device_the_host_lacks(
    monkeypatch: pytest.MonkeyPatch, count: int, device: str, said: str | None
) -> None:
    from bench.cli import workers

    monkeypatch.setattr(workers, "cuda_count", lambda: count)  # the GPUs this host has, as the workers count them
    check_device = workers.check_device
    if said is None:
        check_device(device)
        return
    with pytest.raises(PerflabError) as e:
        check_device(device)
    assert said in str(e.value) and f"device={device!r}" in str(e.value) and "accepted" in str(e.value)


@pytest.mark.slow
def test_a_cuda_device_this_host_lacks_is_one_line_before_anything_runs(tmp_path: Path) -> None:
    """``--device cuda`` where torch sees no GPU (or ``cuda:N`` past the last one) ends at once with one line naming
    the value and what this host accepts, not with the same set-up failure in every variant."""
    import torch

    _write(tmp_path, {"plain.py": PLAIN, "script.py": SCRIPT})
    device = "cuda:99" if torch.cuda.is_available() else "cuda"
    done = perflab("ab", tmp_path / "plain.py", tmp_path / "script.py", "--no-track", "--device", device, timeout=120)
    out = (done.stdout + done.stderr).strip()
    assert done.returncode == 2 and len(out.splitlines()) == 1, out
    assert f"device='{device}'" in out and "accepted" in out and "set-up" not in out, out
