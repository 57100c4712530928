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
from bench.isolate import rendezvous

_CHILD = textwrap.dedent(
    """
    import importlib, json, os, sys, traceback
    from bench.isolate.rendezvous import import_preload
    looked_up = set()  # the environment variables looked up by name while the server's modules import
    lookup = os._Environ.__getitem__  # what environ[k], .get, `in` and os.getenv go through (environb's too: bytes)
    def by_name(env, k):  # not a walk over every variable (tqdm's and networkx's imports pick theirs by prefix)
        if sys._getframe(1).f_code.co_name != "__iter__":
            looked_up.add(os.fsdecode(k))
        return lookup(env, k)
    os._Environ.__getitem__ = by_name
    assert not import_preload()  # once, as the server does: each job below is a child forked from here
    os._Environ.__getitem__ = lookup
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
                hashed = []  # torch's sources hashed in the child (Inductor's torch_key(), warmed by the server)
                codecache = sys.modules["torch._inductor.codecache"]
                real = codecache.build_code_hash
                codecache.build_code_hash = lambda *a: hashed.append(1) or real(*a)
                child.run(job)
                with open(job["workdir"] + "/new_modules.json", "w") as f:
                    json.dump({"new": sorted(set(sys.modules) - before), "hashed": len(hashed)}, f)
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
    # what the server's imports warmed (Triton compiled: TRITON_INTERPRET unset); read after the jobs, whose
    # children would otherwise find these modules imported
    import torch, bench.isolate.warm as w
    keys = [getattr(importlib.import_module(m), "triton_key", None)
            for m in ("triton.runtime.cache", "triton.compiler.compiler")]
    with open(sys.argv[2], "w") as f:
        json.dump({"triton_key_cached": [k.cache_info().currsize for k in keys if hasattr(k, "cache_info")],
                   "cuda_initialized": torch.cuda.is_initialized(), "warmed": w.WARMED,
                   "harness_settings_read": sorted(k for k in looked_up if k.startswith("PERFLAB_"))}, f)
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


SOURCES = {"trivial": TRIVIAL, "optimizer": WITH_OPTIMIZER, "compile": WITH_COMPILE}


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
    cache = tmp_path_factory.mktemp("inductor")  # the graph compiled here, not found in the user's cache
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # Triton compiled, as on a GPU host
    env["TORCHINDUCTOR_CACHE_DIR"] = str(cache)
    warmed = tmp_path_factory.mktemp("warmed") / "warmed.json"
    out = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(jobs), str(warmed)], capture_output=True,
                         text=True, timeout=180, env=env)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    return {**workdirs, "warmed": warmed}


def _ran(children: dict[str, Path], source: str) -> dict[str, Any]:
    """The child's status and messages, the modules it imported and how often it hashed torch's sources."""
    ran = json.loads((children[source] / "messages.json").read_text())
    return {**ran, **json.loads((children[source] / "new_modules.json").read_text())}


@pytest.mark.parametrize("source", ["trivial", "optimizer"])
def test_a_forked_child_imports_only_its_benchmark(children: dict[str, Path], source: str) -> None:
    assert SOURCES[source].count("torch.optim.SGD") == (source == "optimizer")
    ran = _ran(children, source)
    assert ran["status"] == 0, ran
    kinds = [json.loads(line).get("t") for line in ran["messages"].splitlines() if line.strip()]
    # every stage a variant's first round runs: the checks (output, the call's production), batch, recheck
    assert {"timing", "output", "produced", "batch", "done"} <= set(kinds), kinds
    assert ran["new"] == ["perflab_bench_ch00_baseline_trivial"], f"imported per child, not by the server: {ran['new']}"


def test_a_compiling_child_imports_no_compiler_and_hashes_no_torch(children: dict[str, Path]) -> None:
    """Inductor's front end (3.0 s of imports on the H200 host) and its hash of torch's sources are the server's,
    not each compiled variant's; what a compile still imports (its generated code, per-device back ends) is small."""
    ran = _ran(children, "compile")
    assert ran["status"] == 0, ran
    front_end = {"torch._inductor.compile_fx", "torch._inductor.lowering", "torch._functorch.aot_autograd"}
    compiler = front_end & set(ran["new"])
    assert not compiler, f"imported per compiled child, not by the server: {sorted(compiler)}"
    assert any(m.startswith("torch._inductor.runtime.compile_tasks.") for m in ran["new"]), "no graph compiled?"
    assert ran["hashed"] == 0, "torch_key() computed in the child (bench.isolate.warm.warm_inductor did not run)"


def test_the_servers_imports_hash_triton_once_and_leave_cuda_alone(children: dict[str, Path]) -> None:
    """Compiled mode: triton_key() is computed by the server's imports (bench.isolate.warm; children inherit it);
    CUDA untouched. (The same in a fresh interpreter of its own: test_server_start.py, the full tier.)"""
    pytest.importorskip("triton")
    warmed = json.loads(children["warmed"].read_text())
    assert any(n == 1 for n in warmed["triton_key_cached"]), warmed
    assert warmed["cuda_initialized"] is False
    assert any("triton_key" in x for x in warmed["warmed"]), warmed


def test_the_servers_imports_read_only_the_harness_settings_in_its_key(children: dict[str, Path]) -> None:
    """The server's key leaves out the harness's PERFLAB_* settings but those the server reads when it starts
    (bench.isolate.rendezvous): a child reads them from its caller's environment, never its server's. One read by a
    preloaded module at import would be fixed for every child of a server that several callers share."""
    warmed = json.loads(children["warmed"].read_text())
    assert set(warmed["harness_settings_read"]) <= rendezvous._KEYED_HARNESS, warmed["harness_settings_read"]
