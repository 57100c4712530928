"""The fast path and Triton's interpreter: Triton fixes its mode at import, the server imports it once.

A server for CPU runs imports Triton with TRITON_INTERPRET=1, so kernels that call Triton's own jit
helpers (tl.sum, tl.zeros) work in forked children; a variant needing the other mode goes to a server
of that mode (servers are keyed by it). Each case runs in a fresh interpreter, as a command would.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

KERNEL = """
import torch
import triton
import triton.language as tl

from bench.define.context import context


@triton.jit
def row_sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + row * n + cols, mask=cols < n, other=0.0)
    tl.store(out_ptr + row, tl.sum(v, axis=0))  # a Triton jit helper: breaks if modes are mixed


class RowSum:
    def setup(self):
        self.x = torch.randn(4, 37, device=context().device)
        self.out = torch.empty(4, device=context().device)

    def benchmark_fn(self):
        row_sum[(4,)](self.x, self.out, 37, BLOCK=64)

    def teardown(self):
        pass

    def get_output(self):
        return self.out


def get_benchmark():
    return RowSum()
"""

SCRIPT = """
import json, sys
from bench.define.result import VariantSpec
from bench.isolate.runner import run_variant

path, wd, first_env = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
spec = VariantSpec(chapter="ch98", example="rowsum", variant="baseline", path=path)
layer = {"iterations": 2, "warmup": 1, "device": "cpu"}
if first_env is not None:  # start the server in the other Triton mode first
    run_variant(spec, wd + "/first", cli_layer=layer, env=first_env)
r = run_variant(spec, wd + "/second", cli_layer=layer)
from bench.isolate import server
live = {s["key"]: s["triton_interpret"] for s in server.servers()}  # this interpreter's servers, by mode
modes = sorted(live[k] for k in (server.server_key(False), server.server_key(True)) if k in live)
print(json.dumps({"status": r.status, "launch": r.launch, "error": r.error and r.error.message, "modes": modes}))
"""

REPO = Path(__file__).resolve().parents[3]


def _run(tmp_path: Path, first_env: dict[str, str] | None) -> dict[str, str]:
    bench_file = tmp_path / "ch98" / "baseline_rowsum.py"
    bench_file.parent.mkdir(parents=True)
    bench_file.write_text(KERNEL)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(bench_file), str(tmp_path / "wd"), json.dumps(first_env)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_interpreted_kernel_with_triton_helpers_runs_on_the_fast_path(tmp_path: Path) -> None:
    r = _run(tmp_path, None)
    assert r["status"] == "ok", r["error"]
    assert r["launch"] == "server"
    assert "1" in r["modes"]


@pytest.mark.slow  # a server per Triton mode, each a fresh interpreter
def test_each_triton_mode_has_its_own_server(tmp_path: Path) -> None:
    r = _run(tmp_path, {"TRITON_INTERPRET": "0"})  # first a variant whose server imports Triton compiled
    assert r["status"] == "ok", r["error"]
    assert r["launch"] == "server"  # the interpreted variant was not sent to the compiled server
    assert r["modes"] == ["", "1"]


PRESTART = """
import json, sys
from bench.isolate import server
from bench.define.config import resolve_config
from bench.define.result import VariantSpec
from bench.isolate.process import prestart_server
from bench.isolate.runner import run_variant

path, wd = sys.argv[1], sys.argv[2]
layer = {"iterations": 2, "warmup": 1, "device": "cpu"}
interpret = prestart_server(resolve_config(layer))
before = [s["pid"] for s in server.servers(timeout=0.1)]  # running before any variant asked for it
spec = VariantSpec(chapter="ch98", example="rowsum", variant="baseline", path=path)
r = run_variant(spec, wd, cli_layer=layer)
print(json.dumps({"interpret": interpret, "server": before, "same": before == [s["pid"] for s in server.servers()],
                  "status": r.status, "launch": r.launch, "error": r.error and r.error.message}))
"""


def test_prestarted_server_is_the_one_variants_use(tmp_path: Path) -> None:
    """perflab run starts the server before opening MLflow, so its imports overlap; variants reuse it."""
    bench_file = tmp_path / "ch98" / "baseline_rowsum.py"
    bench_file.parent.mkdir(parents=True)
    bench_file.write_text(KERNEL)
    done = subprocess.run([sys.executable, "-c", PRESTART, str(bench_file), str(tmp_path / "wd")],
                          cwd=REPO, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    r = json.loads(done.stdout.strip().splitlines()[-1])
    assert r["interpret"] is True and r["server"] and r["same"]  # CPU run: the interpreter's mode
    assert r["status"] == "ok", r["error"]
    assert r["launch"] == "server"
