"""Exploit classes 28 and 29 (docs/judge.md): a candidate that acts on the judge itself rather
than on its outputs. Only isolation answers these, so static checks are off for every case here
but one: the sandbox must hold for code the static layer would have let through. The one is class
15's reading of the environment, which the static layer lets through since judge 17. CPU cases run
in CI; the cuda ones are `-m gpu`."""

from __future__ import annotations

import os
import socket
import sqlite3
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from kernelcraft.judge import Judge, Status
from kernelcraft.judge.isolation import isolation
from kernelcraft.judge.protocol import Load, Setup, SetupDone
from kernelcraft.judge.worker_process import WorkerProcess
from kernelcraft.store import Store
from kernelcraft.tasks import Task, load_task_file, task_from_source

from ..conftest import FAST
from .cases import CANDIDATES_DIR, TASKS_DIR

RUNTIME = FAST.with_overrides({"static_checks": False})
PLANT_NAMES = ("kc_redteam_planted.pth", "sitecustomize.py", "usercustomize.py")
DAEMON_MARKER = b"kc-redteam-daemon-marker"


def candidate(name: str) -> str:
    return (CANDIDATES_DIR / name).read_text()


def relu() -> Task:
    return load_task_file(TASKS_DIR / "relu.py")


def planted_files() -> list[Path]:
    """Every file the planting candidate tried to write that exists now (and holds its payload)."""
    import site
    import sys
    import sysconfig

    import torch
    base = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_prefix})
    dirs = set(sys.path) | set(site.getsitepackages()) | {site.getusersitepackages(), base["purelib"], base["platlib"],
                                                          sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
                                                          str(Path(torch.__file__).parent.parent)}
    found = []
    for d in dirs:
        for name in PLANT_NAMES:
            p = Path(d or ".") / name
            if p.is_file() and "kc-redteam-planted" in p.read_text(errors="replace"):
                found.append(p)
    return found


def daemons() -> list[int]:
    """Processes left running by the daemon candidate (their command line holds its marker)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if DAEMON_MARKER in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


@pytest.fixture
def remove_planted() -> Iterator[None]:
    """Should a plant get through, take it away before it poisons the rest of the run."""
    yield
    for p in planted_files():
        p.unlink(missing_ok=True)


@pytest.fixture
def kill_daemons() -> Iterator[None]:
    yield
    for pid in daemons():
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def test_isolation_is_complete_here() -> None:
    """CI and the GPU machines run as root on Linux with Landlock and namespaces: nothing is missing."""
    iso = isolation()
    assert iso.complete, iso.problems
    assert iso.landlock_abi >= 1 and iso.namespaces


def test_a_planted_startup_file_patches_no_later_process(cpu_judge: Judge, remove_planted: None) -> None:
    cpu_judge.evaluate(relu(), candidate("28_plant_pth.py"), config=RUNTIME)
    assert planted_files() == []
    v = cpu_judge.evaluate(relu(), candidate("28_returns_zeros.py"), config=RUNTIME)
    assert v.status is Status.INCORRECT, v.message


def test_a_candidate_cannot_write_the_store_or_the_cache(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    store = Store(workspace)
    judge = Judge("cpu", cache_dir=workspace / "cache", config=RUNTIME)
    try:
        task = relu()
        v = judge.evaluate(task, candidate("29_store_tamper.py"))
    finally:
        judge.close()
    assert v.status is Status.INCORRECT, v.message
    vid = store.record_verdict(task, candidate("29_store_tamper.py"), v)
    assert store.verdict(vid).status is Status.INCORRECT
    with sqlite3.connect(workspace / "kernelcraft.db") as con:
        assert con.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall() == []
    planted = [p for p in workspace.rglob("*") if p.name in ("kc_redteam_marker",)]
    assert planted == []
    assert not (workspace / "cache" / "ceilings.json").exists() or "kc-redteam" not in (workspace / "cache" / "ceilings.json").read_text()


def test_a_daemon_dies_with_its_evaluation(cpu_judge: Judge, kill_daemons: None) -> None:
    """The daemon holds every device lock it can open: its evaluation (and any other) must not wait
    for it, and it must not outlive the evaluation."""
    t0 = time.monotonic()
    v = cpu_judge.evaluate(relu(), candidate("29_daemon.py"), config=RUNTIME)
    assert v.status is not Status.JUDGE_ERROR, v.message
    assert time.monotonic() - t0 < 300, "the evaluation waited for the daemon's locks"
    deadline = time.monotonic() + 10
    while daemons() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert daemons() == []


def test_outside_a_pid_namespace_a_daemon_dies_with_its_worker(tmp_path: Path, kill_daemons: None) -> None:
    """As a CUDA worker runs (CUDA IPC needs the trusted worker's PID namespace): the daemon, in a
    session of its own, comes to the judge as its subreaper and is killed when the worker closes."""
    with WorkerProcess("cpu", 0, tmp_path, pid_namespace=False) as w:
        task = relu()
        answer = w.call(Setup("candidate", "cpu", RUNTIME, "float32", 1e-4, 1e-4, 0, str(tmp_path), os.geteuid(), "",
                              task.source), timeout=120)
        assert isinstance(answer, SetupDone), answer
        w.call(Load(candidate("29_daemon.py"), task.source), timeout=120)
        deadline = time.monotonic() + 20
        while not daemons() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert daemons(), "the daemon did not start"
    assert daemons() == []


class _Listener:
    """A TCP and a UDP socket on one loopback port, recording whatever arrives."""

    def __init__(self) -> None:
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.port = self.tcp.getsockname()[1]
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", self.port))
        self.udp.settimeout(0.2)
        self.tcp.settimeout(0.2)
        self.received: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.tcp.accept()
                self.received.append("tcp")
                conn.close()
            except OSError:
                pass
            try:
                self.udp.recvfrom(100)
                self.received.append("udp")
            except OSError:
                pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.tcp.close()
        self.udp.close()


def test_a_candidate_reaches_no_network(cpu_judge: Judge) -> None:
    listener = _Listener()
    try:
        source = (TASKS_DIR / "relu.py").read_text() + f"\nREDTEAM_PORT = {listener.port}\n"
        v = cpu_judge.evaluate(task_from_source(source, "redteam/relu_port"), candidate("29_network.py"), config=RUNTIME)
        time.sleep(0.5)
    finally:
        listener.close()
    assert v.status is not Status.JUDGE_ERROR, v.message  # only its messages were the attack
    assert listener.received == []


def test_a_candidate_reads_nothing_of_the_judges(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "cache").mkdir(parents=True)
    secret = "kc-redteam-secret-4711"
    (workspace / "secret.txt").write_text(secret)
    (workspace / "cache" / "secret.txt").write_text(secret)
    judge = Judge("cpu", cache_dir=workspace / "cache", config=RUNTIME)
    try:
        v = judge.evaluate(relu(), candidate("29_read_secrets.py"))
    finally:
        judge.close()
    assert v.status is Status.LOAD_FAILED, v.message
    assert "kc-redteam-read" in v.message
    assert secret not in v.message


@pytest.mark.gpu
def test_on_the_gpu_a_plant_and_a_daemon_holding_the_device_change_nothing(gpu_pool: object, remove_planted: None,
                                                                          kill_daemons: None) -> None:
    from kernelcraft.judge import Job, LocalPool
    assert isinstance(gpu_pool, LocalPool)
    task = relu()
    first = list(gpu_pool.map([Job(task, candidate("28_plant_pth.py"), tag="plant", config=RUNTIME),
                               Job(task, candidate("29_daemon.py"), tag="daemon", config=RUNTIME)]))
    assert all(r.verdict is not None and r.verdict.status is not Status.JUDGE_ERROR for r in first), [r.error for r in first]
    assert planted_files() == []
    t0 = time.monotonic()
    (after,) = gpu_pool.map([Job(task, candidate("28_returns_zeros.py"), tag="zeros", config=RUNTIME)])
    assert after.verdict is not None and after.verdict.status is Status.INCORRECT, after.error
    assert time.monotonic() - t0 < 300  # no lock left held by a daemon
    assert daemons() == []


def test_a_candidate_that_reads_the_environment_finds_nothing_of_the_judges(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading os.environ passes the static checks (judge 17); the worker's environment is scrubbed, so a key in
    the judge's own environment never reaches the candidate (static checks on: this is what the narrowed rule lets
    through)."""
    secret = "kc-redteam-secret-0815"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("KERNELCRAFT_REDTEAM_TOKEN", secret)
    judge = Judge("cpu", cache_dir=tmp_path / "cache", config=FAST)
    try:
        v = judge.evaluate(relu(), candidate("15_env_secrets.py"))
    finally:
        judge.close()
    assert v.status is Status.LOAD_FAILED, v.message
    assert "kc-redteam-env" in v.message and "HOME" in v.message  # it read the environment
    assert secret not in v.message and "OPENAI_API_KEY" not in v.message and "KERNELCRAFT_REDTEAM" not in v.message
