"""The host side of a measurement: while one worker is timed, the judge's other workers (and whatever
they run) are stopped, their calls' timeouts not counting the stopped time, but for the trusted worker
while it checks a timed call; the timed rounds run pinned to the CPU where the host probe is fastest,
and move when it slows, and so does every other call of the candidate's."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from kernelcraft.judge import Judge, Status
from kernelcraft.judge.protocol import Done, Exit, Release, SetupDone
from kernelcraft.judge.sandbox import awake, hold_still, live_worker_pids
from kernelcraft.judge.worker_process import WorkerProcess
from kernelcraft.judge.worker.timing import FastCpu, pinned
from kernelcraft.tasks import resolve_task

from .conftest import FAST
from .test_judge_cpu import triton_candidate


def state(pid: int) -> str:
    """The process's state letter in /proc: T when stopped."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0]


def stopped(pid: int, within_s: float = 5.0) -> bool:
    """Whether the process is stopped within `within_s` (a signal takes effect when the process next runs)."""
    deadline = time.monotonic() + within_s
    while state(pid) != "T":
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_the_others_stop_while_one_is_timed_and_go_on_after(tmp_path: Path) -> None:
    judge = Judge("cpu", cache_dir=tmp_path, config=FAST)
    timed, other = judge.workers.new(), judge.workers.new()
    with timed, other:
        for w in (timed, other):
            assert isinstance(judge.workers.setup(w, "reference", None, judge.config), SetupDone)
        with hold_still(timed):
            assert stopped(other.proc.pid) and state(timed.proc.pid) != "T"
            with WorkerProcess("cpu", 0, tmp_path) as late:  # started while one is timed: it waits too
                assert stopped(late.proc.pid)
                # A call with a 0.5 s timeout to a worker stopped for longer still gets its answer.
                answers: list[object] = []
                caller = threading.Thread(target=lambda: answers.append(other.call(Exit(), timeout=0.5)))
                caller.start()
                time.sleep(1.5)
                assert caller.is_alive() and state(other.proc.pid) == "T"
            assert other.stopped_s() >= 1.5
        caller.join(10)
        assert answers == [Done()]
        assert state(timed.proc.pid) != "T"


def test_a_measurement_stops_only_its_own_devices_processes(tmp_path: Path) -> None:
    """Another device's workers run on while one device times a candidate where each has CPUs of its own, and
    one started meanwhile is not stopped: two GPUs judged 1.26x faster than one while every measurement
    stopped both devices' work. Without CPUs of their own, every measurement stops them all."""
    own = frozenset(os.sched_getaffinity(0))  # CPUs of their own (a pool's slices; here all, the rule is the same)
    with WorkerProcess("cpu", 0, tmp_path, cpus=own) as timed, WorkerProcess("cpu", 0, tmp_path, cpus=own) as mine, \
            WorkerProcess("cpu", 1, tmp_path, cpus=own) as theirs, WorkerProcess("cpu", 1, tmp_path) as unsliced:
        assert timed.group == mine.group != theirs.group
        with hold_still(timed):
            assert stopped(mine.proc.pid)
            with WorkerProcess("cpu", 1, tmp_path, cpus=own) as late:
                assert not stopped(theirs.proc.pid, within_s=0.5) and not stopped(late.proc.pid, within_s=0.5)
        assert not stopped(mine.proc.pid, within_s=0.5)
        # a device's processes without CPUs of their own stop for every measurement of the judge
        with WorkerProcess("cpu", 0, tmp_path) as unsliced_timed, hold_still(unsliced_timed):
            assert stopped(unsliced.proc.pid)


def test_a_worker_runs_on_the_cpus_it_is_given_and_the_judge_keeps_its_own(tmp_path: Path) -> None:
    before = os.sched_getaffinity(0)
    one = frozenset({min(before)})
    with WorkerProcess("cpu", 0, tmp_path, cpus=one) as w:
        assert os.sched_getaffinity(w.proc.pid) == one  # from its first instruction: it inherits them
    assert os.sched_getaffinity(0) == before


def test_the_trusted_worker_runs_for_a_check_in_a_measurement_and_stops_again_after(tmp_path: Path) -> None:
    judge = Judge("cpu", cache_dir=tmp_path, config=FAST)
    timed, trusted = judge.workers.new(), judge.workers.new()
    with timed, trusted:
        for w in (timed, trusted):
            assert isinstance(judge.workers.setup(w, "reference", None, judge.config), SetupDone)
        with hold_still(timed):
            assert stopped(trusted.proc.pid)
            with awake(trusted):
                assert trusted.call(Release(), timeout=10) == Done()  # it answers, the others stay stopped
            assert stopped(trusted.proc.pid)
        with awake(timed):  # no measurement: nothing to stop after
            pass
        assert state(timed.proc.pid) != "T"


def test_a_judge_stops_its_spare_workers_during_a_measurement_only(tmp_path: Path) -> None:
    task = resolve_task("leaky_relu_clamp").with_sizes("cpu", {"N": 65536})
    judge = Judge("cpu", cache_dir=tmp_path, config=FAST, spare_workers=2)
    seen: dict[int, set[str]] = {}
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            for pid in live_worker_pids():
                try:
                    seen.setdefault(pid, set()).add(state(pid))
                except (FileNotFoundError, ProcessLookupError):
                    pass
            time.sleep(0.002)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        v = judge.evaluate(task, triton_candidate())
    finally:
        done.set()
        watcher.join()
    try:
        assert v.status is Status.CORRECT, v.message
        assert any("T" in states for states in seen.values()), "no worker was stopped while the candidate was timed"
        assert all(state(pid) != "T" for pid in live_worker_pids())  # the spares go on
    finally:
        judge.close()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to choose from")
def test_the_timed_rounds_run_on_the_fastest_cpu_and_move_when_it_slows() -> None:
    allowed = os.sched_getaffinity(0)
    pin = FastCpu(slower_than=1.3)
    pin.pick()
    try:
        (cpu,) = pin.picked
        assert os.sched_getaffinity(0) == {cpu} and cpu in allowed and pin.best_ms > 0
        for _ in range(4):
            pin.observe(pin.best_ms * 10)
        assert len(pin.picked) == 1  # four slow probes are not yet the window's median
        pin.observe(pin.best_ms * 10)
        assert len(pin.picked) == 2  # five are: picked again
    finally:
        pin.release()
    assert os.sched_getaffinity(0) == allowed


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to choose from")
def test_a_verdict_says_which_cpus_its_rounds_ran_on(tmp_path: Path) -> None:
    task = resolve_task("leaky_relu_clamp").with_sizes("cpu", {"N": 65536})
    judge = Judge("cpu", cache_dir=tmp_path, config=FAST)
    v = judge.evaluate(task, triton_candidate())
    assert v.status is Status.CORRECT, v.message
    cpus = v.stage("timing").details["cpus"]
    assert cpus and set(cpus) <= os.sched_getaffinity(0)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to choose from")
def test_one_thread_pinned_hands_its_cpus_back_to_the_threads_it_started() -> None:
    allowed = os.sched_getaffinity(0)
    started: list[int] = []
    with pinned(FAST.timing, cuda=True) as pin:  # the calling thread alone, as on a GPU
        assert os.sched_getaffinity(0) == set(pin.picked)
        t = threading.Thread(target=lambda: (started.append(threading.get_native_id()), time.sleep(0.5)))
        t.start()
        while not started:
            time.sleep(0.001)
        assert os.sched_getaffinity(started[0]) == set(pin.picked)  # it took the pinned thread's CPU
    assert os.sched_getaffinity(0) == allowed and os.sched_getaffinity(started[0]) == allowed
    t.join()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to choose from")
def test_every_call_of_the_candidates_runs_pinned_so_its_affinity_tells_it_nothing(cpu_judge: Judge) -> None:
    """A candidate that fails wherever it runs on every CPU (as correctness calls did, and a timing's
    warm-up): pinned like the timed rounds everywhere, it never does."""
    task = resolve_task("leaky_relu_clamp").with_sizes("cpu", {"N": 65536})
    source = triton_candidate(forward=f"import os; assert len(os.sched_getaffinity(0)) < {len(os.sched_getaffinity(0))}, 'unpinned'")
    v = cpu_judge.evaluate(task, source, config=FAST.with_overrides({"static_checks": False}))
    assert v.status is Status.CORRECT, v.message
