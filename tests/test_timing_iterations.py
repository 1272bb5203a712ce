"""How many timed iterations a measurement takes: the timing target over a typical call, whatever
the first call cost."""

from __future__ import annotations

import time
from typing import Any

import torch

from kernelcraft.judge.config import TimingConfig
from kernelcraft.judge.worker.timing import Clock, local_rounds, run_interleaved


def _sleeper(first_s: float, then_s: float) -> Any:
    calls = []

    def fn(x: torch.Tensor) -> torch.Tensor:
        time.sleep(first_s if not calls else then_s)
        calls.append(1)
        return x
    return fn


def test_a_slow_first_call_does_not_cut_the_iterations() -> None:
    # A side whose first call takes 300 ms (a module loaded, a large output allocated) and 1 ms after:
    # the warm-up's mean call would be ~60 ms and leave the minimum of 5 iterations; its median, 1 ms.
    cfg = TimingConfig(warmup_ms=5.0, warmup_calls=3, min_iters=5, max_iters=300, target_ms=60.0, spot_checks=0,
                       cpu_flush_bytes=1 << 16, fast_cpu=False)
    sides = [("reference", _sleeper(0.001, 0.001)), ("candidate", _sleeper(0.3, 0.001))]
    samples = run_interleaved(sides, [[torch.zeros(4)]], Clock(torch.device("cpu"), cfg), cfg, local_rounds(1),
                              lambda *_: None)
    assert 20 <= len(samples["candidate"]) <= 60, len(samples["candidate"])
    assert len(samples["reference"]) == len(samples["candidate"])
