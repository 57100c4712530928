"""bench/isolate/rendezvous.py's PRELOAD: a child forked from the server imports nothing but its benchmark.

Every module a timed child imports costs every variant again (numpy.ma and numpy.random, imported by the first
median and the seed, took 0.13 s per child on the 2-core CPU host). The server imports them once.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

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
        child.run(job)
        with open(job["workdir"] + "/new_modules.json", "w") as f:
            json.dump(sorted(set(sys.modules) - before), f)
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


@pytest.mark.parametrize("source", [TRIVIAL, WITH_OPTIMIZER], ids=["trivial", "optimizer"])
def test_a_forked_child_imports_only_its_benchmark(tmp_path: Path, source: str) -> None:
    assert source.count("torch.optim.SGD") == (source is WITH_OPTIMIZER)
    bench_file = tmp_path / "ch00" / "baseline_trivial.py"
    bench_file.parent.mkdir()
    bench_file.write_text(source)
    job = {"path": str(bench_file), "reference": None, "workdir": str(tmp_path), "suite_layer": {},
           "cli_layer": {"iterations": 5, "warmup": 1, "device": "cpu"}, "mode": "run", "profile_tool": None,
           "gate": False, "measure_gate": False}  # fmt: skip
    out = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(job)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    kinds = [json.loads(line).get("t") for line in out.stdout.splitlines() if line.strip()]
    # every stage a variant's first round runs: the checks (output, the call's production), batch, recheck
    assert {"timing", "output", "produced", "batch", "done"} <= set(kinds), kinds
    new = json.loads((tmp_path / "new_modules.json").read_text())
    assert new == ["perflab_bench_ch00_baseline_trivial"], f"imported per child, not by the server: {new}"
