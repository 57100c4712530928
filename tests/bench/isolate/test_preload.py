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
    import importlib, json, os, sys, traceback
    from bench.isolate.rendezvous import preload_modules
    for name in preload_modules():  # once, as the server does: each job below is a child forked from here
        importlib.import_module(name)
    for job in json.loads(sys.argv[1]):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # as a child of the server: bench.isolate.child.entry, its modules compared at the end
            try:
                os.close(read)
                from bench.isolate import child
                from bench.isolate.channel import attach
                attach(write)
                before = set(sys.modules)
                child.run(job)
                with open(job["workdir"] + "/new_modules.json", "w") as f:
                    json.dump(sorted(set(sys.modules) - before), f)
            except BaseException:
                traceback.print_exc()
                os._exit(1)
            os._exit(0)
        os.close(write)
        messages = b""
        while chunk := os.read(read, 1 << 16):
            messages += chunk
        os.close(read)
        _, status = os.waitpid(pid, 0)
        with open(job["workdir"] + "/messages.json", "w") as f:
            json.dump({"status": status, "messages": messages.decode()}, f)
    """
)


# A set-up that builds an optimizer, as every training variant's does: torch.optim imports torch._dynamo then.
WITH_OPTIMIZER = TRIVIAL.replace(
    "        self.out = torch.empty_like(self.x)\n",
    "        self.out = torch.empty_like(self.x)\n"
    "        self.opt = torch.optim.SGD([torch.nn.Parameter(self.x.clone())], lr=0.1)\n",
)


SOURCES = {"trivial": TRIVIAL, "optimizer": WITH_OPTIMIZER}


@pytest.fixture(scope="module")
def children(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each of ``SOURCES`` as a benchmark in a child forked from one process that imported the server's modules
    (once, as a server does: not a fresh interpreter's imports per source): the workdir of each."""
    jobs, workdirs = [], {}
    for name, source in SOURCES.items():
        workdirs[name] = tmp_path_factory.mktemp(name)
        bench_file = workdirs[name] / "ch00" / "baseline_trivial.py"
        bench_file.parent.mkdir()
        bench_file.write_text(source)
        jobs.append({"path": str(bench_file), "reference": None, "workdir": str(workdirs[name]), "suite_layer": {},
                     "cli_layer": {"iterations": 5, "warmup": 1, "device": "cpu"}, "mode": "run",
                     "profile_tool": None, "gate": False, "measure_gate": False})  # fmt: skip
    out = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(jobs)], capture_output=True, text=True,
                         timeout=180)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    return workdirs


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_a_forked_child_imports_only_its_benchmark(children: dict[str, Path], source: str) -> None:
    assert SOURCES[source].count("torch.optim.SGD") == (source == "optimizer")
    ran = json.loads((children[source] / "messages.json").read_text())
    assert ran["status"] == 0, ran
    kinds = [json.loads(line).get("t") for line in ran["messages"].splitlines() if line.strip()]
    # every stage a variant's first round runs: the checks (output, the call's production), batch, recheck
    assert {"timing", "output", "produced", "batch", "done"} <= set(kinds), kinds
    new = json.loads((children[source] / "new_modules.json").read_text())
    assert new == ["perflab_bench_ch00_baseline_trivial"], f"imported per child, not by the server: {new}"
