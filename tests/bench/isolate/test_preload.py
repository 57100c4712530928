"""bench/isolate/rendezvous.py's PRELOAD: a child forked from the server imports nothing but its benchmark.

Every module a timed child imports costs every variant again (numpy.ma and numpy.random, imported by the first
median and the seed, took 0.13 s per child on the 2-core CPU host). The server imports them once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from bench.audit.overhead import TRIVIAL

_CHILD = textwrap.dedent(
    """
    import importlib, json, os, sys
    from bench.isolate.rendezvous import preload_modules
    for name in preload_modules():
        importlib.import_module(name)
    job = json.loads(sys.argv[1])
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # as a child of the server: bench.isolate.child.entry, its modules compared at the end
        os.close(read)
        from bench.isolate import child
        from bench.isolate.channel import attach
        attach(write)
        before = set(sys.modules)
        hashed = []  # torch's sources hashed in the child (Inductor's torch_key(), warmed by the server): -1 unknown
        codecache = sys.modules.get("torch._inductor.codecache")
        if codecache is None:
            hashed.append(-1)
        else:
            real = codecache.build_code_hash
            codecache.build_code_hash = lambda *a: hashed.append(1) or real(*a)
        child.run(job)
        with open(job["workdir"] + "/new_modules.json", "w") as f:
            json.dump({"new": sorted(set(sys.modules) - before), "hashed": sum(hashed)}, f)
        os._exit(0)
    os.close(write)
    messages = b""
    while chunk := os.read(read, 1 << 16):
        messages += chunk
    os.waitpid(pid, 0)
    sys.stdout.write(messages.decode())
    """
)


# A set-up that builds an optimizer, as every training variant's does: torch.optim imports torch._dynamo then.
WITH_OPTIMIZER = TRIVIAL.replace(
    "        self.out = torch.empty_like(self.x)\n",
    "        self.out = torch.empty_like(self.x)\n"
    "        self.opt = torch.optim.SGD([torch.nn.Parameter(self.x.clone())], lr=0.1)\n",
)


# A set-up that compiles, as chapter 14's do: a matmul only (an extern kernel, no C++ to build: seconds, not minutes).
WITH_COMPILE = TRIVIAL.replace(
    "        self.out = torch.empty_like(self.x)\n",
    "        self.out = torch.empty_like(self.x)\n"
    "        square = self.x.view(16, 16)\n"
    "        torch.compile(lambda a: a @ a.T, fullgraph=True, dynamic=False)(square)\n",
)


def _run_child(tmp_path: Path, source: str) -> dict[str, Any]:
    """``source`` as a benchmark in a child forked from a process that imported the server's modules: the modules
    the child imported, and how often it hashed torch's sources."""
    bench_file = tmp_path / "ch00" / "baseline_trivial.py"
    bench_file.parent.mkdir()
    bench_file.write_text(source)
    job = {"path": str(bench_file), "reference": None, "workdir": str(tmp_path), "suite_layer": {},
           "cli_layer": {"iterations": 5, "warmup": 1, "device": "cpu"}, "mode": "run", "profile_tool": None,
           "gate": False, "measure_gate": False}  # fmt: skip
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}  # compiled here, not found cached
    out = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(job)], capture_output=True, text=True, timeout=120,
                         env=env)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    kinds = [json.loads(line).get("t") for line in out.stdout.splitlines() if line.strip()]
    # every stage a variant's first round runs: the checks (output, the call's production), batch, recheck
    assert {"timing", "output", "produced", "batch", "done"} <= set(kinds), kinds
    return json.loads((tmp_path / "new_modules.json").read_text())  # type: ignore[no-any-return]


@pytest.mark.parametrize("source", [TRIVIAL, WITH_OPTIMIZER], ids=["trivial", "optimizer"])
def test_a_forked_child_imports_only_its_benchmark(tmp_path: Path, source: str) -> None:
    assert source.count("torch.optim.SGD") == (source is WITH_OPTIMIZER)
    new = _run_child(tmp_path, source)["new"]
    assert new == ["perflab_bench_ch00_baseline_trivial"], f"imported per child, not by the server: {new}"


def test_a_compiling_child_imports_no_compiler_and_hashes_no_torch(tmp_path: Path) -> None:
    """Inductor's front end (1.5-2.3 s of imports) and its hash of torch's sources (0.2-0.3 s) are the server's,
    not each compiled variant's; what a compile still imports (its generated code, per-device back ends) is small."""
    got = _run_child(tmp_path, WITH_COMPILE)
    front_end = {"torch._inductor.compile_fx", "torch._inductor.lowering", "torch._functorch.aot_autograd"}
    compiler = front_end & set(got["new"])
    assert not compiler, f"imported per compiled child, not by the server: {sorted(compiler)}"
    assert any(m.startswith("torch._inductor.runtime.compile_tasks.") for m in got["new"]), "no graph compiled?"
    assert got["hashed"] == 0, "torch_key() computed in the child (bench.isolate.warm.warm_inductor did not run)"
