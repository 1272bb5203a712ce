"""The thread-count rules of CPU workers (guards.ThreadWatch) and FastCpu holding every thread to the
CPUs it picks, in this process (no worker, no build)."""

from __future__ import annotations

import os
import threading
import zlib
from typing import Iterator

import pytest

from kernelcraft.judge.worker import guards
from kernelcraft.judge.worker.guards import ThreadWatch
from kernelcraft.judge.worker.timing import FastCpu, pinned_cpus


@pytest.fixture
def sleeper() -> Iterator[threading.Thread]:
    """A thread that sleeps until the test ends, as an idle OpenMP pool thread does."""
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    yield t
    stop.set()
    t.join()


def test_new_threads_beyond_one_openmp_pool_per_runtime_are_breaches(sleeper: threading.Thread) -> None:
    one, two = ThreadWatch(1), ThreadWatch(2)
    one.arm()
    two.arm()
    sleeper.start()
    assert two.runtimes and two.pool_allowance() == len(two.runtimes)  # torch's OpenMP, at least
    assert two.native_breaches() == []  # asleep, within the pool two threads allow
    assert any("1 new native thread(s) outlived the call" in b for b in one.native_breaches())
    assert ThreadWatch(None).native_breaches() == []  # CUDA: not enforced


def test_a_thread_still_working_after_the_call_is_a_breach() -> None:
    stop = threading.Event()

    def work() -> None:
        data = os.urandom(1 << 22)
        while not stop.is_set():
            zlib.compress(data, 9)  # without the GIL, as native work left running by a candidate

    watch = ThreadWatch(2)
    watch.arm()
    t = threading.Thread(target=work)
    t.start()
    try:
        assert any("still working after the call returned" in b for b in watch.native_breaches())
    finally:
        stop.set()
        t.join()


def test_more_cpu_time_than_the_threads_can_use_is_a_breach(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = {"cpu": 0.0, "wall": 0.0}
    monkeypatch.setattr(guards, "_process_time", lambda: clock["cpu"])
    monkeypatch.setattr(guards, "_perf", lambda: clock["wall"])
    watch = ThreadWatch(2)
    watch.arm()
    clock.update(cpu=0.2, wall=0.1)  # two threads busy for the whole call
    assert not any("CPU time" in b for b in watch.cpu_breaches())
    clock.update(cpu=0.8)  # eight
    assert any("800.0 ms of CPU time in 100.0 ms" in b and "cpu_threads = 2" in b for b in watch.cpu_breaches())


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to choose from")
def test_the_whole_process_is_pinned_and_a_thread_moved_off_is_a_breach(sleeper: threading.Thread) -> None:
    allowed = os.sched_getaffinity(0)
    sleeper.start()  # started before the pin, as a pool started in the warm-up
    pin = FastCpu(slower_than=1.3, threads=1)
    pin.pick()
    try:
        (cpu,) = pin.picked
        assert pinned_cpus() == {cpu} and os.sched_getaffinity(sleeper.native_id) == {cpu}
        watch = ThreadWatch(1)
        watch.arm()
        assert watch.native_breaches() == []
        os.sched_setaffinity(sleeper.native_id, allowed)
        assert any("left the CPUs the judge pinned" in b for b in watch.native_breaches())
    finally:
        pin.release()
    assert pinned_cpus() is None and os.sched_getaffinity(sleeper.native_id) == allowed
