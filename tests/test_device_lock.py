"""The device lock: the judge's device work shares it, timing holds it alone, and a waiting timer
goes before new shared holders. Threads stand in for processes: each opens the lock files itself,
and file locks conflict between open files as they do between processes."""

from __future__ import annotations

import threading
from pathlib import Path

from kernelcraft.judge.locks import device_lock

BLOCKED_S = 0.3  # how long a holder that must wait is watched to see that it does


class Holder:
    """A thread that takes the lock, says so, and holds it until released."""

    def __init__(self, cache_dir: Path, shared: bool) -> None:
        self.inside, self.release = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._hold, args=(cache_dir, shared), daemon=True)
        self.thread.start()

    def _hold(self, cache_dir: Path, shared: bool) -> None:
        with device_lock(cache_dir, "cuda", 0, shared=shared):
            self.inside.set()
            self.release.wait(30)

    def done(self) -> None:
        self.release.set()
        self.thread.join(30)
        assert not self.thread.is_alive()


def test_shared_holders_overlap_and_a_waiting_timer_goes_before_new_ones(tmp_path: Path) -> None:
    check1, check2 = Holder(tmp_path, shared=True), Holder(tmp_path, shared=True)
    assert check1.inside.wait(10) and check2.inside.wait(10)  # correctness checks side by side
    timing = Holder(tmp_path, shared=False)
    assert not timing.inside.wait(BLOCKED_S)  # the measurement waits for them
    check3 = Holder(tmp_path, shared=True)
    assert not check3.inside.wait(BLOCKED_S)  # and a check that comes later waits behind it
    check1.done()
    assert not timing.inside.wait(BLOCKED_S)
    check2.done()
    assert timing.inside.wait(10)
    assert not check3.inside.wait(BLOCKED_S)  # nothing shares the device with the measurement
    timing.done()
    assert check3.inside.wait(10)
    check3.done()


def test_timers_take_turns(tmp_path: Path) -> None:
    first = Holder(tmp_path, shared=False)
    assert first.inside.wait(10)
    second = Holder(tmp_path, shared=False)
    assert not second.inside.wait(BLOCKED_S)
    first.done()
    assert second.inside.wait(10)
    second.done()
