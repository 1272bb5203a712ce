"""The sandbox's parts on their own: the policy a worker gets, and what Landlock and the dropped
capabilities leave a confined process (a real process each, on the real kernel; the attacks
themselves are in tests/redteam/test_sandbox.py)."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from kernelcraft.judge import isolation as iso
from kernelcraft.judge.worker.confine import BOOT, ENV, PATH_ENV, Policy, python_command
from kernelcraft.judge.worker.landlock import abi_version

needs_landlock = pytest.mark.skipif(sys.platform != "linux" or abi_version() < 1, reason="needs Landlock")

PROBE = """
import json, os, sys
found = {}
for name, path in json.loads(sys.argv[1]).items():
    path = path.replace("{ppid}", str(os.getppid()))
    try:
        if name.startswith("write"):
            with open(path, "w") as f:
                f.write("x")
        else:
            with open(path) as f:
                f.read()
        found[name] = "ok"
    except OSError as e:
        found[name] = type(e).__name__
status = open("/proc/self/status").read()
found["cap_eff"] = next(l.split()[1] for l in status.splitlines() if l.startswith("CapEff"))
found["uid"] = os.getuid()
print(json.dumps(found))
"""


def confined(policy: Policy, probes: dict[str, str], tmp_path: Path) -> dict[str, object]:
    """Run PROBE as `policy.module` would run: through BOOT, confined by `policy`."""
    (tmp_path / "probe").mkdir()
    (tmp_path / "probe" / "kc_probe.py").write_text(PROBE)
    policy.module = "kc_probe"
    policy.sys_path = [str(tmp_path / "probe"), *policy.sys_path]
    policy.read = [*policy.read, str(tmp_path / "probe")]
    r = subprocess.run([sys.executable, "-I", "-S", "-c", BOOT, json.dumps(probes)], env={**os.environ, ENV: policy.to_env()},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_the_workers_module_path_and_reads_leave_out_the_cache_and_what_holds_it(tmp_path: Path, monkeypatch) -> None:
    project = tmp_path / "project"
    cache = project / "ws" / "cache"
    (cache / "scratch").mkdir(parents=True)
    monkeypatch.syspath_prepend(str(project))  # a test runner puts the project's root on the path
    monkeypatch.chdir(tmp_path)
    pol = iso.policy("kernelcraft.judge.worker.loop", cache / "scratch", cache, read=(cache / "builds",))
    assert str(project) not in pol.sys_path and str(tmp_path) not in pol.sys_path
    assert all(not str(cache).startswith(p.rstrip("/") + "/") for p in pol.read), pol.read
    assert "/" not in pol.read
    assert pol.write[0] == str(cache / "scratch")
    assert any(Path(p) == Path(iso._src_root()) for p in pol.sys_path)


@needs_landlock
def test_landlock_leaves_writes_to_the_scratch_directory_only(tmp_path: Path) -> None:
    scratch, judge = tmp_path / "scratch", tmp_path / "judge"
    scratch.mkdir()
    judge.mkdir()
    (judge / "kernelcraft.db").write_text("the store")
    pol = iso.policy("x", scratch, judge)
    pol.uid = None
    pol.private_shm = False
    found = confined(pol, {"write_scratch": str(scratch / "a"), "write_judge": str(judge / "b"),
                           "read_store": str(judge / "kernelcraft.db"), "write_tmp": "/tmp/kc-isolation-probe",
                           "read_python": os.__file__}, tmp_path)
    assert found["write_scratch"] == "ok" and found["read_python"] == "ok"
    assert found["write_judge"] == found["read_store"] == found["write_tmp"] == "PermissionError", found
    assert not (judge / "b").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="a root judge's workers")
def test_a_root_worker_keeps_no_capability(tmp_path: Path) -> None:
    other = tmp_path / "others"
    other.write_text("another user's")
    os.chown(other, 65534, 65534)
    other.chmod(0o600)
    pol = Policy(module="x", sys_path=[p for p in sys.path if p], landlock=False, drop_capabilities=True)
    found = confined(pol, {"read_others": str(other)}, tmp_path)
    assert int(str(found["cap_eff"]), 16) == 0 and found["uid"] == 0
    assert found["read_others"] == "PermissionError"  # only CAP_DAC_OVERRIDE would open it


def test_a_cache_closed_to_the_workers_user_is_one_line_at_the_judges_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers that run as another user cannot enter a cache under a 0700 directory: said once, at the start,
    not as a judge error on every candidate."""
    from kernelcraft.judge import isolation as iso_mod
    from kernelcraft.judge.isolation import CacheClosed, check_cache_reachable

    base = Path(tempfile.mkdtemp())  # not tmp_path: pytest's own folder is closed to other users
    try:
        base.chmod(0o755)
        closed = base / "closed"
        (closed / "ws").mkdir(parents=True)
        closed.chmod(0o700)
        real = iso_mod.isolation()
        monkeypatch.setattr(iso_mod, "isolation", lambda: dataclasses.replace(real, uid=12345, gid=12345))
        with pytest.raises(CacheClosed, match=f"{closed} is closed to other users"):
            check_cache_reachable(closed / "ws" / "cache")
        closed.chmod(0o755)
        check_cache_reachable(closed / "ws" / "cache")
    finally:
        shutil.rmtree(base)


def test_the_workers_process_cap_grows_with_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every worker of every judge on a machine runs as one user, whose process count the cap bounds: on a
    large host (a thread per core in each torch process) it must leave a pool room, and still stop a fork bomb."""
    from kernelcraft.judge.worker.state import process_cap

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert process_cap() == 4096  # the floor, as it always was
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    with open("/proc/sys/kernel/pid_max") as f:
        pid_max = int(f.read())
    assert process_cap() == max(4096, min(8192, pid_max // 4))


NET_PROBE = """
import json, socket, sys
found = {}
for port in json.loads(sys.argv[1]):
    try:
        server = socket.create_server(("127.0.0.1", port))
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            found[str(port)] = "ok"
        server.close()
    except OSError as e:
        found[str(port)] = type(e).__name__
print(json.dumps(found))
"""


def _module_dir(tmp_path: Path, name: str, text: str) -> Path:
    where = tmp_path / "probe"
    where.mkdir(exist_ok=True)
    (where / f"{name}.py").write_text(text)
    return where


@needs_landlock
@pytest.mark.skipif(abi_version() < 4 or not iso.isolation().namespaces, reason="needs Landlock's TCP rules and namespaces")
def test_the_ncu_pass_binds_and_connects_on_its_ports_alone_on_a_loopback_of_its_own(tmp_path: Path) -> None:
    """ncu talks to the process it profiles over TCP: that pass's sandbox brings up its own namespace's loopback
    and lets it use ncu's ports, and no other."""
    where = _module_dir(tmp_path, "kc_net_probe", NET_PROBE)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    allowed, other = 49152, 49300
    for allow, expect in ((iso.Allowance(tcp_ports=(allowed,)), "ok"), (iso.Allowance(), "PermissionError")):
        pol = iso.policy("kc_net_probe", scratch, tmp_path / "cache", read=(where,), allow=allow)
        pol.sys_path = [str(where), *pol.sys_path]
        assert pol.loopback == bool(allow.tcp_ports)
        argv, env = iso.command([json.dumps([allowed, other])], pol)
        r = subprocess.run(argv, env={**os.environ, **env}, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        found = json.loads(r.stdout.strip().splitlines()[-1])
        assert found == {str(allowed): expect, str(other): "PermissionError"}, found


@pytest.mark.skipif(os.geteuid() != 0, reason="a root judge's workers")
def test_a_root_process_allowed_a_capability_keeps_it_alone_and_so_does_what_it_starts(tmp_path: Path) -> None:
    """The ncu pass (GPU counters): root with CAP_PERFMON alone, in its bounding set too, so a program it runs gets
    no other back; still no override of file permissions."""
    from kernelcraft.judge.nsight import CAP_PERFMON
    other = tmp_path / "others"
    other.write_text("another user's")
    os.chown(other, 65534, 65534)
    other.chmod(0o600)
    probe = PROBE + ("import subprocess\nstatus = subprocess.run(['cat', '/proc/self/status'], capture_output=True, text=True).stdout\n"
                     "print(json.dumps({**found, 'child_cap_eff': next(l.split()[1] for l in status.splitlines() "
                     "if l.startswith('CapEff'))}))\n")
    (tmp_path / "probe").mkdir()
    (tmp_path / "probe" / "kc_cap_probe.py").write_text(probe)
    pol = Policy(module="kc_cap_probe", sys_path=[str(tmp_path / "probe"), *(p for p in sys.path if p)], landlock=False,
                 drop_capabilities=True, keep_capabilities=[CAP_PERFMON])
    r = subprocess.run([sys.executable, "-I", "-S", "-c", BOOT, json.dumps({"read_others": str(other)})],
                       env={**os.environ, ENV: pol.to_env()}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    found = json.loads(r.stdout.strip().splitlines()[-1])
    assert int(found["cap_eff"], 16) == int(found["child_cap_eff"], 16) == 1 << CAP_PERFMON and found["uid"] == 0, found
    assert found["read_others"] == "PermissionError"


@needs_landlock
def test_a_python_process_a_confined_tool_starts_is_confined_and_one_started_outside_refuses(tmp_path: Path) -> None:
    """The ncu pass: ncu (worker/run_tool.py) starts the profile driver as confine.python_command says; the driver
    inherits the sandbox, and that command run anywhere else refuses to start."""
    where = _module_dir(tmp_path, "kc_probe", PROBE)
    scratch, judge = tmp_path / "scratch", tmp_path / "judge"
    scratch.mkdir()
    judge.mkdir()
    (judge / "kernelcraft.db").write_text("the store")
    pol = iso.policy("kernelcraft.judge.worker.run_tool", scratch, judge, read=(where,))
    pol.sys_path = [str(where), *pol.sys_path]
    pol.private_shm = False
    probes = {"read_store": str(judge / "kernelcraft.db"), "write_scratch": str(scratch / "a"), "write_judge": str(judge / "b")}
    child = python_command("kc_probe", [json.dumps(probes)])
    r = subprocess.run([sys.executable, "-I", "-S", "-c", BOOT, *child], env={**os.environ, ENV: pol.to_env()},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    found = json.loads(r.stdout.strip().splitlines()[-1])
    assert found["write_scratch"] == "ok" and found["read_store"] == found["write_judge"] == "PermissionError", found
    outside = subprocess.run(child, env={**os.environ, PATH_ENV: json.dumps(pol.sys_path)}, capture_output=True, text=True,
                             timeout=60)
    assert outside.returncode == 70 and "started outside the sandbox" in outside.stderr, outside.stderr


def test_a_python_process_a_confined_tool_starts_writes_only_its_own_proc_entry(tmp_path: Path) -> None:
    """The ncu pass may write its PID namespace's whole /proc (Policy.proc_tree: the CUDA driver of ncu's target writes
    the target's own entry as it starts, and the target is not the confined process). The Python process the tool
    starts confines itself again: its own entry it writes, its parent's it cannot open (without that second layer the
    open succeeds and only the write fails, EINVAL)."""
    where = _module_dir(tmp_path, "kc_probe", PROBE)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    pol = iso.policy("kernelcraft.judge.worker.run_tool", scratch, tmp_path / "judge", read=(where,))
    pol.sys_path = [str(where), *pol.sys_path]
    pol.private_shm, pol.proc_tree = False, True
    probes = {"write_own_proc": "/proc/self/comm", "write_parent_proc": "/proc/{ppid}/comm"}
    shell = ["/bin/sh", "-c", shlex.join(python_command("kc_probe", [json.dumps(probes)])) + "; true"]  # the child is not the tool
    r = subprocess.run([sys.executable, "-I", "-S", "-c", BOOT, *shell], env={**os.environ, ENV: pol.to_env()},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    found = json.loads(r.stdout.strip().splitlines()[-1])
    assert (found["write_own_proc"], found["write_parent_proc"]) == ("ok", "PermissionError"), found


@pytest.mark.skipif(os.geteuid() != 0, reason="a root judge's workers")
def test_only_the_ncu_pass_keeps_a_capability_and_it_stays_root_for_it_where_workers_are_another_user(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = iso.isolation()
    monkeypatch.setattr(iso, "isolation", lambda: dataclasses.replace(real, uid=12345, gid=12345))
    worker = iso.policy("x", tmp_path, tmp_path / "cache")
    assert (worker.uid, worker.keep_capabilities, worker.loopback, worker.tcp_ports) == (12345, [], False, [])
    ncu = iso.policy("x", tmp_path, tmp_path / "cache", allow=iso.Allowance(capabilities=(38,), tcp_ports=(49152,)))
    assert (ncu.uid, ncu.drop_capabilities, ncu.keep_capabilities, ncu.tcp_ports) == (None, True, [38], [49152])
    assert ncu.read == worker.read and ncu.write == worker.write  # its files are a worker's
