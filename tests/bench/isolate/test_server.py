"""bench/isolate/server.py: the pre-warmed server kept between commands.

Reused while its code is unchanged, replaced when a file it imported changes, private to its user,
gone when idle; a caller that goes away takes its child with it. Tests run against the session's own
server directory (tests/conftest.py); each test that needs a server of its own changes the key (an
environment variable the key covers, read by nothing: TORCH_PERFLAB_TEST_*) so as not to disturb the others.
"""

from __future__ import annotations

import operator
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.isolate import rendezvous, server


def _interpret() -> bool:
    from bench.define.config import resolve_config
    from bench.isolate.process import server_interpret

    return server_interpret(resolve_config())


def _server_pid(key: str, timeout: float = 60.0) -> int:
    for s in server.servers(timeout=timeout):
        if s["key"] == key:
            return int(s["pid"])
    raise AssertionError(f"no server of key {key}")


def _gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not rendezvous.alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_call_returns_values_and_reraises_exceptions_with_the_childs_traceback() -> None:
    assert server.call(operator.add, 2, 3, interpret=_interpret(), timeout=120) == 5
    with pytest.raises(ValueError, match="invalid literal") as info:
        server.call(int, "x", interpret=_interpret(), timeout=60)
    assert any("Traceback" in note for note in getattr(info.value, "__notes__", []))


def test_a_child_that_dies_or_hangs_is_an_error_not_a_hang() -> None:
    with pytest.raises(server.ServerError, match="died in the server's child"):
        server.call(os._exit, 9, interpret=_interpret(), timeout=60)
    t0 = time.monotonic()
    with pytest.raises(server.ServerError, match="ran past 1 s"):
        server.call(time.sleep, 60, interpret=_interpret(), timeout=1)
    assert time.monotonic() - t0 < 20


def test_the_child_gets_the_callers_environment_directory_and_own_process_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOME_USER_SETTING", "x1")
    monkeypatch.chdir(tmp_path)
    got = server.call(_describe, interpret=_interpret(), timeout=60)
    assert got["SOME_USER_SETTING"] == "x1"
    assert got["cwd"] == str(tmp_path)
    assert got["pgid"] == got["pid"] and got["sid"] == got["pid"]  # its own session: killable as a group
    assert got["ppid"] == _server_pid(server.server_key(_interpret()))  # forked by the server, not by us


def _describe() -> dict[str, object]:
    return {
        "SOME_USER_SETTING": os.environ.get("SOME_USER_SETTING"), "cwd": os.getcwd(), "pid": os.getpid(),
        "pgid": os.getpgid(0), "sid": os.getsid(0), "ppid": os.getppid(),
    }  # fmt: skip


def test_a_second_command_reuses_the_server(tmp_path: Path) -> None:
    """Two separate interpreters (two commands) get their children from one server."""
    code = (
        "import os, json\n"
        "from bench.isolate import server\n"
        "from bench.isolate.process import server_interpret\n"
        "from bench.define.config import resolve_config\n"
        "print(json.dumps(server.call(os.getppid, interpret=server_interpret(resolve_config()), timeout=120)))\n"
    )
    root = str(Path(server.__file__).resolve().parents[2])
    parents = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        parents.append(int(done.stdout.strip().splitlines()[-1]))
    assert parents[0] == parents[1]
    assert server._is_server(parents[0])


@pytest.mark.slow  # servers started and stopped in fresh interpreters (the server's other tests here: the fast tier)
def test_a_changed_module_file_replaces_the_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Never stale code: a file the server imported changes, the next request gets a fresh server."""
    module = tmp_path / "perflab_stale_probe.py"
    module.write_text("VALUE = 1\n")
    monkeypatch.setattr(sys, "path", [sys.path[0], str(tmp_path), *sys.path[1:]])  # the server's path too
    monkeypatch.setenv("PERFLAB_SERVER_PRELOAD", "perflab_stale_probe")  # keyed: a server of this test's own
    interpret = _interpret()
    key = server.server_key(interpret)
    assert server.call(_probe_value, interpret=interpret, timeout=120) == 1
    first = _server_pid(key)
    module.write_text("VALUE = 2  # changed\n")
    assert server.call(_probe_value, interpret=interpret, timeout=120) == 2  # not the server's old copy
    second = _server_pid(key)
    assert second != first
    assert _gone(first, 10.0), "the stale server did not exit"


def _probe_value() -> int:
    import perflab_stale_probe  # type: ignore[import-not-found]

    return int(perflab_stale_probe.VALUE)


def test_a_caller_that_goes_away_takes_its_child_with_it() -> None:
    import base64

    payload = base64.b64encode(pickle.dumps((time.sleep, (120,)))).decode()
    read_fd, write_fd = os.pipe()
    try:
        child = server.spawn(
            "bench.isolate.server:_call_entry",
            [payload],
            write_fd,
            dict(os.environ),
            os.getcwd(),
            os.devnull,
            _interpret(),
        )
    finally:
        os.close(write_fd)
    os.close(read_fd)
    assert rendezvous.alive(child.pid)
    child.close()  # as if this process had died: the server sees the connection end
    assert _gone(child.pid, 10.0), "the child outlived its caller"


@pytest.mark.slow  # servers started and stopped in fresh interpreters (the server's other tests here: the fast tier)
def test_idle_server_exits_and_removes_its_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFLAB_SERVER_IDLE_S", "5")  # keyed: a server of this test's own
    interpret = _interpret()
    key = server.server_key(interpret)
    assert server.call(operator.mul, 6, 7, interpret=interpret, timeout=120) == 42
    pid = _server_pid(key)
    assert _gone(pid, 30.0), "the idle server did not exit"
    assert not (server.runtime_dir() / f"{key}.sock").exists()


def test_stop_takes_this_checkouts_servers_and_all_every_one(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # in a directory of its own: the process's other servers, which its later tests use, are not stopped with it
    monkeypatch.setenv("PERFLAB_RUNTIME_DIR", str(tmp_path / "servers"))
    interpret = _interpret()
    server.call(operator.neg, 1, interpret=interpret, timeout=120)
    pid = _server_pid(server.server_key(interpret))
    monkeypatch.setenv("TORCH_PERFLAB_TEST_OTHER", "1")  # another checkout's or environment's server: another key
    # started, not waited for: one still importing (it cannot answer a stop yet) is stopped by a signal
    server.connect(interpret).close()
    other = next(pid for pid_file, pid in server._servers() if pid_file.stem == server.server_key(interpret))
    monkeypatch.delenv("TORCH_PERFLAB_TEST_OTHER")
    assert other != pid and server.stop_all(keys=server.own_keys()) == [pid]  # `perflab server stop`: its own
    assert not rendezvous.alive(pid) and rendezvous.alive(other)
    assert other in server.stop_all()  # `--all`
    assert not rendezvous.alive(other)
    assert server.servers() == []


def test_the_socket_directory_must_be_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    monkeypatch.setenv("PERFLAB_RUNTIME_DIR", str(shared))
    with pytest.raises(server.ServerError, match=r"shared'? must be a directory owned by uid .* mode 0700.*0o755"):
        server.runtime_dir()
    fresh = tmp_path / "fresh"
    monkeypatch.setenv("PERFLAB_RUNTIME_DIR", str(fresh))
    assert server.runtime_dir() == fresh and (fresh.stat().st_mode & 0o777) == 0o700


@pytest.mark.parametrize("raw", ["soon", "0", "-3"])
def test_bad_idle_setting_names_the_value(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("PERFLAB_SERVER_IDLE_S", raw)
    with pytest.raises(server.ServerError, match=f"PERFLAB_SERVER_IDLE_S='{raw}'.*>= 5"):
        server.idle_s()


def test_the_key_covers_mode_and_import_time_settings_but_not_per_variant_ones() -> None:
    base = dict(os.environ)
    key = server.server_key(True, base)
    assert server.server_key(False, base) != key
    assert server.server_key(True, {**base, "TORCH_SOME_FLAG": "1"}) != key
    assert server.server_key(True, {**base, "CUDA_VISIBLE_DEVICES": "1"}) == key  # each child sets its own
    assert server.server_key(True, {**base, "TERM": "dumb"}) == key


def test_the_key_covers_the_harness_settings_its_server_reads_not_those_its_children_read() -> None:
    """Of PERFLAB_*, the server reads its idle limit and extra preloads when it starts; a child reads the others
    (rounds, warm-up floor, caches, results) from its caller's environment, which it takes: one server serves them all
    (the tests' ``default_rounds`` and ``default_warmup`` unset two of them for a test: no second server)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("PERFLAB_")}
    key = server.server_key(True, base)
    read_by_a_child = [
        ("PERFLAB_ROUNDS", "1"), ("PERFLAB_MIN_WARMUP_SECONDS", "0.05"), ("PERFLAB_RUNTIME_DIR", "/x"),
        ("PERFLAB_RESULTS_DIR", "/r"), ("PERFLAB_DURATIONS", "/d.json"), ("PERFLAB_RANK_DEVICES", "0"),
    ]  # fmt: skip
    for name, value in read_by_a_child:
        assert server.server_key(True, {**base, name: value}) == key, name
    assert server.server_key(True, {**base, "PERFLAB_SERVER_IDLE_S": "60"}) != key
    assert server.server_key(True, {**base, "PERFLAB_SERVER_PRELOAD": "json"}) != key


def test_the_key_leaves_out_setuptools_vendored_packages_but_not_the_callers_own_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``import setuptools`` appends its ``_vendor`` directory to the importing process's path (CPU Inductor's C++
    builder imports it): a side effect a fresh interpreter of the caller has not had, not the caller's setting. The
    server's path, and its key, leave it out; a directory of the caller's own, or one $PYTHONPATH names, counts."""
    monkeypatch.delenv("PYTHONPATH", raising=False)
    vendor = tmp_path / "site" / "setuptools" / "_vendor"
    vendor.mkdir(parents=True)
    (vendor.parent / "__init__.py").write_text("")
    other = tmp_path / "site" / "other" / "_vendor"  # a _vendor directory of another package's
    other.mkdir(parents=True)
    (other.parent / "__init__.py").write_text("")
    base = [p for p in sys.path if not rendezvous.added_by_setuptools(p)]  # this process's, setuptools imported or not
    monkeypatch.setattr(sys, "path", base)
    key = server.server_key(True)
    monkeypatch.setattr(sys, "path", [*base, str(vendor)])
    assert rendezvous.added_by_setuptools(str(vendor)) and str(vendor) not in rendezvous.server_path()
    assert server.server_key(True) == key
    for path in ([*base, str(other)], [*base, str(tmp_path)], [base[0], str(tmp_path), *base[1:]], base[:-1]):
        monkeypatch.setattr(sys, "path", path)
        assert server.server_key(True) != key, path
    monkeypatch.setenv("PYTHONPATH", str(vendor))  # named by the caller: the caller's setting, kept
    monkeypatch.setattr(sys, "path", base)
    stated = server.server_key(True)
    monkeypatch.setattr(sys, "path", [*base, str(vendor)])
    assert str(vendor) in rendezvous.server_path() and server.server_key(True) != stated


def test_the_key_covers_cgroups_and_resource_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """A command in another batch job (cgroup) or under another ulimit gets a server of its own."""
    base = dict(os.environ)
    key = server.server_key(True, base)
    real = rendezvous.confinement()
    monkeypatch.setattr(rendezvous, "confinement", lambda: {**real, "cgroup": "0::/slurm/job_2\n"})
    assert server.server_key(True, base) != key
    limits = {**real["rlimits"], "RLIMIT_AS": (1 << 33, 1 << 33)}
    monkeypatch.setattr(rendezvous, "confinement", lambda: {**real, "rlimits": limits})
    assert server.server_key(True, base) != key
    monkeypatch.setattr(rendezvous, "confinement", lambda: real)
    assert server.server_key(True, base) == key


def test_the_child_gets_the_callers_umask_and_nice_level() -> None:
    old = os.umask(0o027)
    try:
        got = server.call(_umask_and_nice, interpret=_interpret(), timeout=60)
    finally:
        os.umask(old)
    assert got == (0o027, os.getpriority(os.PRIO_PROCESS, 0))


def _umask_and_nice() -> tuple[int, int]:
    return rendezvous.umask(), os.getpriority(os.PRIO_PROCESS, 0)


def test_outputs_compared_in_the_server_as_in_the_parent(tmp_path: Path) -> None:
    import torch

    from bench.measure import outputs
    from bench.measure.verify import verify_files

    x = torch.randn(1000)
    ref = (str(tmp_path / "ref"), outputs.save([x], str(tmp_path / "ref")))
    out = (str(tmp_path / "out"), outputs.save([x + 1e-3 * torch.randn(1000)], str(tmp_path / "out")))
    here = verify_files(ref, out, None)
    there = server.call(verify_files, ref, out, None, interpret=_interpret(), timeout=120)
    assert here == there and not here.verified and here.outcome == "mismatch"
    same = (str(tmp_path / "same"), outputs.save([x.clone()], str(tmp_path / "same")))
    assert server.call(verify_files, ref, same, None, interpret=_interpret(), timeout=120).verified
    # generated tokens (verify="greedy_tokens"): request 2 parts at the baseline's near-tie, to its runner-up
    tokens, runner_up, gap = torch.arange(12), torch.arange(12) + 50, torch.ones(12)
    offsets = torch.tensor([0, 3, 6, 9, 12])
    gap[8] = 1e-6
    other = tokens.clone()
    other[8] = runner_up[8]
    ref = (str(tmp_path / "tref"), outputs.save([tokens, runner_up, gap, offsets], str(tmp_path / "tref")))
    out = (str(tmp_path / "tout"), outputs.save([other, runner_up, gap, offsets], str(tmp_path / "tout")))
    here = verify_files(ref, out, None, "greedy_tokens")
    there = server.call(verify_files, ref, out, None, "greedy_tokens", interpret=_interpret(), timeout=120)
    assert here == there and here.verified and "request 2 at token 2" in here.detail


@pytest.mark.slow  # servers started and stopped in fresh interpreters (the server's other tests here: the fast tier)
def test_a_killed_server_is_replaced_and_its_childs_result_still_arrives(monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGKILL the server while its child works: the child finishes (its result comes through its own
    pipe), the caller learns the exit status is unknown rather than hanging, and the next request starts
    a new server on the dead one's socket."""
    import signal
    import threading

    monkeypatch.setenv("TORCH_PERFLAB_TEST_KILLED", "1")  # keyed: a server of this test's own
    interpret = _interpret()
    key = server.server_key(interpret)
    server.call(operator.neg, 1, interpret=interpret, timeout=120)
    first = _server_pid(key)
    got: dict[str, object] = {}
    worker = threading.Thread(
        target=lambda: got.update(v=server.call(_sleep_then, 1.5, 7, interpret=interpret, timeout=60))
    )
    worker.start()
    time.sleep(0.5)
    os.kill(first, signal.SIGKILL)
    worker.join(30)
    assert not worker.is_alive() and got == {"v": 7}
    assert server.call(operator.neg, 2, interpret=interpret, timeout=120) == -2
    assert _server_pid(key) != first


def _sleep_then(seconds: float, value: int) -> int:
    time.sleep(seconds)
    return value


@pytest.mark.slow  # servers started and stopped in fresh interpreters (the server's other tests here: the fast tier)
def test_cli_server_status_and_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from perflab.cli import app

    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("TORCH_PERFLAB_TEST_CLI", "1")  # keyed: a server of this test's own
    interpret = _interpret()
    server.call(operator.neg, 1, interpret=interpret, timeout=120)
    pid = _server_pid(server.server_key(interpret))
    status = CliRunner().invoke(app, ["server", "status"])
    assert status.exit_code == 0 and f"server {pid} key {server.server_key(interpret)}" in status.output
    assert f"TRITON_INTERPRET={'1' if interpret else ''!r}" in status.output
    stop = CliRunner().invoke(app, ["server", "stop"])
    assert stop.exit_code == 0 and "stopped" in stop.output and str(pid) in stop.output
    assert not rendezvous.alive(pid)
    assert f"server {pid} " not in CliRunner().invoke(app, ["server", "status"]).output  # others' may run on
