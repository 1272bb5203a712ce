"""The slowed-reference ratio accounts for the host's speed only in the host's share of the reference."""

from __future__ import annotations

import pytest

from kernelcraft.judge.slowdown import MAX_HOST_FACTOR, honest_speedup, overstatement, reference_slowdown
from kernelcraft.judge.verdict import Flag, Status, TimingStats, Verdict


def stats(ms: float, host_ms: float | None, probe_ms: float | None) -> TimingStats:
    return TimingStats.of([ms] * 5, host_ms, probe_ms)


def test_a_slow_host_excuses_a_host_bound_reference() -> None:
    # 80% of the reference alone is host time; the candidate's process runs pure Python 2x slower
    s = reference_slowdown(stats(90.0, 72.0, 0.04), stats(50.0, 40.0, 0.02))
    assert s.raw == pytest.approx(1.8) and s.host_factor == pytest.approx(1.8) and s.ratio == pytest.approx(1.0)


def test_a_slow_host_does_not_excuse_a_device_bound_reference() -> None:
    # 5% host time: a host 2x slower explains only 5% more
    s = reference_slowdown(stats(2.0, 0.1, 0.04), stats(1.0, 0.05, 0.02))
    assert s.host_factor == pytest.approx(1.05) and s.ratio == pytest.approx(2.0 / 1.05)


def test_a_faster_host_next_to_the_candidate_shows_a_slowed_reference() -> None:
    s = reference_slowdown(stats(50.0, 50.0, 0.01), stats(50.0, 50.0, 0.02))
    assert s.ratio == pytest.approx(2.0)


@pytest.mark.parametrize("near, alone", [
    (stats(90.0, 72.0, None), stats(50.0, 40.0, 0.02)),  # an old verdict without a probe
    (stats(90.0, 72.0, 0.04), stats(50.0, None, 0.02)),
])
def test_without_a_probe_the_raw_ratio_stands(near: TimingStats, alone: TimingStats) -> None:
    assert reference_slowdown(near, alone).ratio == pytest.approx(1.8)


def test_a_candidate_with_native_threads_gets_the_raw_ratio() -> None:
    s = reference_slowdown(stats(90.0, 72.0, 0.04), stats(50.0, 40.0, 0.02), account_host=False)
    assert s.host_factor == 1.0 and s.ratio == pytest.approx(1.8)


def _verdict(*flags: str) -> Verdict:
    # 3.6x next to a reference that took 90 ms there, 50 ms alone; a host 1.5x slower next to the candidate
    return Verdict(status=Status.CORRECT, task="t", device="cuda", speedup=3.6, significant=True,
                   reference=stats(90.0, 72.0, 0.03), candidate=stats(25.0, 20.0, 0.03),
                   trusted_reference=stats(50.0, 40.0, 0.02), flags=[Flag(f, "") for f in flags])


def test_the_honest_speedup_is_over_the_reference_alone_only_when_the_verdict_is_flagged() -> None:
    assert honest_speedup(_verdict()) == pytest.approx(3.6) and overstatement(_verdict()) == 1.0
    # raw 1.8, host factor 0.2 + 0.8 * 1.5 = 1.4: the kernel explains 1.8 / 1.4
    assert overstatement(_verdict("slowed_reference")) == pytest.approx(1.8 / 1.4)
    assert honest_speedup(_verdict("slowed_reference")) == pytest.approx(3.6 * 1.4 / 1.8)
    # a candidate with native threads could be what slows its process: no host accounting
    assert honest_speedup(_verdict("slowed_reference", "native_threads")) == pytest.approx(2.0)


def test_a_slow_host_excuses_a_bounded_slowdown_only() -> None:
    """On the CPU all of the reference's time is host time: a probe read 25x slower for a moment must not
    excuse a reference the candidate slowed 25x."""
    s = reference_slowdown(stats(25.0, 25.0, 0.5), stats(1.0, 1.0, 0.02))
    assert s.host_factor == MAX_HOST_FACTOR and s.ratio == pytest.approx(25.0 / MAX_HOST_FACTOR)
