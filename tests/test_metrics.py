from __future__ import annotations

import math

import pytest

from kernelcraft.report import TaskOutcome, summarize, summarize_by_level


def test_fast_p_counts_all_tasks_and_missing_ones_fail() -> None:
    outcomes = [
        TaskOutcome("a", 1, True, 2.0), TaskOutcome("b", 1, True, 0.5), TaskOutcome("c", 1, True, 1.0),
        TaskOutcome("d", 1, False), TaskOutcome("e", 1, False),
    ]
    s = summarize("level 1", outcomes)
    assert s.correct == 3 and s.total == 5
    assert s.fast_p[0.0] == pytest.approx(3 / 5)
    assert s.fast_p[1.0] == pytest.approx(1 / 5)  # strictly faster than the reference
    assert s.fast_p[2.0] == 0.0
    assert s.geomean == pytest.approx(math.exp((math.log(2) + math.log(0.5) + 0) / 3))
    assert s.median == 1.0
    assert s.win_rate == pytest.approx(1 / 3)


def test_against_compile_uses_the_recorded_ratio() -> None:
    outcomes = [TaskOutcome("a", 1, True, 2.0, compile_ratio=0.5), TaskOutcome("b", 1, True, 3.0),
                TaskOutcome("c", 1, False, None, compile_ratio=0.8)]
    s = summarize("x", outcomes)
    assert outcomes[0].speedup_vs_compile == 1.0
    assert s.compile_tasks == 2
    assert s.fast_p_compile[0.5] == pytest.approx(1 / 2)
    assert s.fast_p_compile[1.0] == 0.0


def test_summaries_per_level_and_overall() -> None:
    out = summarize_by_level([TaskOutcome("a", 1, True, 2.0), TaskOutcome("b", 2, False)])
    assert [s.label for s in out] == ["level 1", "level 2", "all"]
