"""The launch counter counts the candidate's own calls in the profiled call only; in the timed calls
its wrapper passes calls on without counting, so the candidate pays nothing the reference does not."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from kernelcraft.judge.worker.coverage import profile_call
from kernelcraft.judge.worker.launches import LaunchCounter


def test_an_extension_function_is_counted_in_the_profiled_call_only() -> None:
    counter = LaunchCounter()
    ext = SimpleNamespace(run=lambda x: x * 2)
    counter.instrument_extension(ext, "run")
    kept = ext.run  # what a candidate that keeps a reference to the function holds
    x = torch.ones(4)
    assert torch.equal(kept(x), x * 2) and counter.total == 0  # a timed call: passed on, not counted
    result = profile_call(lambda t: kept(t) + ext.run(t), [x], counter, torch.device("cpu"))
    assert result["calls"] == {"ext:run": 2} and result["custom_launches"] == 2
    assert result["coverage"] > 0
    kept(x)
    assert counter.total == 2  # counting stopped with the profile
