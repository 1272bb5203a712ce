"""The device lock: the judge's device work shares it, timing holds it alone, and a waiting timer
goes before new shared holders. Threads stand in for processes: each opens the lock files itself,
and file locks conflict between open files as they do between processes."""

from __future__ import annotations

import secrets
import stat
import threading
from typing import Iterator

import pytest

from kernelcraft.judge.locks import device_lock, machine_lock_dir

BLOCKED_S = 0.3  # how long a holder that must wait is watched to see that it does


@pytest.fixture
def index() -> Iterator[int]:
    """A device index no other test (or judge on this machine) uses: the locks are the machine's."""
    i = 10**6 + secrets.randbelow(10**9)
    yield i
    for path in machine_lock_dir().glob(f"cpu-{i}.*"):
        path.unlink()


class Holder:
    """A thread that takes the lock, says so, and holds it until released."""

    def __init__(self, index: int, shared: bool) -> None:
        self.inside, self.release = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._hold, args=(index, shared), daemon=True)
        self.thread.start()

    def _hold(self, index: int, shared: bool) -> None:
        with device_lock("cpu", index, shared=shared):
            self.inside.set()
            self.release.wait(30)

    def done(self) -> None:
        self.release.set()
        self.thread.join(30)
        assert not self.thread.is_alive()


def test_shared_holders_overlap_and_a_waiting_timer_goes_before_new_ones(index: int) -> None:
    check1, check2 = Holder(index, shared=True), Holder(index, shared=True)
    assert check1.inside.wait(10) and check2.inside.wait(10)  # correctness checks side by side
    timing = Holder(index, shared=False)
    assert not timing.inside.wait(BLOCKED_S)  # the measurement waits for them
    check3 = Holder(index, shared=True)
    assert not check3.inside.wait(BLOCKED_S)  # and a check that comes later waits behind it
    check1.done()
    assert not timing.inside.wait(BLOCKED_S)
    check2.done()
    assert timing.inside.wait(10)
    assert not check3.inside.wait(BLOCKED_S)  # nothing shares the device with the measurement
    timing.done()
    assert check3.inside.wait(10)
    check3.done()


def test_timers_take_turns(index: int) -> None:
    first = Holder(index, shared=False)
    assert first.inside.wait(10)
    second = Holder(index, shared=False)
    assert not second.inside.wait(BLOCKED_S)
    first.done()
    assert second.inside.wait(10)
    second.done()


def test_the_locks_are_the_machines_open_to_every_user(index: int) -> None:
    """Judges with workspaces of their own (two runs, two CI test processes) share one device: its lock
    lives in one directory of the machine's, which every user's judge can use."""
    with device_lock("cpu", index):
        root = machine_lock_dir()
        assert (root / f"cpu-{index}.lock").exists()
        mode = root.stat().st_mode
        assert mode & stat.S_ISVTX and mode & 0o777 == 0o777
