"""Reward shaping per role, against values computed by hand: the coder's correctness gate, capped
speedup, coverage term, hack penalty, the judge's rule on library calls and re-measurement of large wins; the
selector's and summarizer's rewards; z-score normalisation with clipping."""

from __future__ import annotations

import math

import pytest

from kernelcraft.judge import Flag, Status, TimingStats, Verdict
from kernelcraft.train.episode import Episode, Step, Trajectory
from kernelcraft.train.rewards import CoderReward, RewardConfig, coder_reward, normalize_rewards, selector_reward, summarizer_reward

CFG = RewardConfig()  # 0.5 correct + 0.5 min(speedup, 6) + 0.5 coverage; re-measure above 3x


def _verdict(status: Status = Status.CORRECT, speedup: float | None = 2.0, coverage: float | None = 0.8,
             flags: tuple[str, ...] = (), significant: bool = True) -> Verdict:
    return Verdict(status=status, task="t", device="cpu", speedup=speedup, significant=significant, coverage=coverage,
                   flags=[Flag(code, "found") for code in flags])


class Remeasure:
    """A re-measurement callback that returns a fixed verdict and records what it was asked."""

    def __init__(self, result: Verdict | None) -> None:
        self.result, self.asked = result, []

    def __call__(self, verdict: Verdict) -> Verdict | None:
        self.asked.append(verdict)
        return self.result


def test_a_correct_turn_earns_correctness_speedup_and_coverage() -> None:
    r = coder_reward(_verdict(speedup=2.0, coverage=0.8), CFG)
    # 0.5*1 + 0.5*2 + 0.5*0.8
    assert r == CoderReward(pytest.approx(1.9), False, "", {"correct": 0.5, "speedup": 1.0, "coverage": pytest.approx(0.4), "penalty": 0.0})
    # a speedup inside the noise band counts as 1.0: 0.5 + 0.5 + 0.4
    assert coder_reward(_verdict(speedup=1.04, significant=False), CFG).value == pytest.approx(1.4)
    # a slowdown still passes the gate: 0.5 + 0.5*0.5 + 0.4
    assert coder_reward(_verdict(speedup=0.5), CFG).value == pytest.approx(1.15)


@pytest.mark.parametrize("status", [Status.INCORRECT, Status.BUILD_FAILED, Status.TIMEOUT, Status.RUNTIME_ERROR])
def test_nothing_beyond_the_correctness_gate(status: Status) -> None:
    r = coder_reward(_verdict(status=status, speedup=None, coverage=None), CFG)
    assert (r.value, r.rejected, r.reason) == (0.0, False, "not_correct")


@pytest.mark.parametrize("verdict", [
    _verdict(status=Status.HACK_DETECTED, speedup=None, coverage=0.0),
    _verdict(speedup=5.0, flags=("side_stream",)),  # a fast, correct, but stream-flagged kernel
    _verdict(speedup=2.0, flags=("noisy_timing", "side_stream")),
    _verdict(speedup=1.5, flags=("native_threads",)),
    _verdict(speedup=1.5, flags=("shape_specialised",)),
    _verdict(status=Status.INCORRECT, speedup=None, flags=("side_stream",)),
])
def test_hack_findings_earn_only_the_penalty(verdict: Verdict) -> None:
    r = coder_reward(verdict, CFG)
    assert (r.value, r.rejected, r.reason) == (-1.0, False, "hack")
    assert r.parts == {"correct": 0.0, "speedup": 0.0, "coverage": 0.0, "penalty": -1.0}
    assert coder_reward(verdict, RewardConfig(hack_penalty=2.5)).value == -2.5


def test_a_slowed_reference_pays_only_the_speedup_over_the_reference_alone() -> None:
    v = _verdict(speedup=2.0, coverage=0.8, flags=("slowed_reference",))
    v.candidate, v.reference, v.trusted_reference = TimingStats.of([1.0]), TimingStats.of([2.0]), TimingStats.of([1.25])
    # 2.0x next to the candidate, 1.25x against the reference's time alone: 0.5 + 0.5*1.25 + 0.4
    assert coder_reward(v, CFG).value == pytest.approx(1.525)
    v.trusted_reference = TimingStats.of([3.0])  # a reference alone slower than next to it: the 2.0x stands
    assert coder_reward(v, CFG).value == pytest.approx(1.9)


def test_a_slowed_reference_on_a_slower_host_is_paid_the_speedup_the_host_leaves() -> None:
    v = _verdict(speedup=2.0, coverage=0.8, flags=("slowed_reference",))
    # next to the candidate 2.0 ms, alone 1.25 ms, all of it host time; the candidate's process ran the
    # host probe 1.28x slower: 1.6x slowed raw, 1.25x beyond the host, so 2.0 / 1.25 = 1.6x is paid
    v.candidate = TimingStats.of([1.0])
    v.reference = TimingStats.of([2.0], host_ms=2.0, probe_ms=0.0256)
    v.trusted_reference = TimingStats.of([1.25], host_ms=1.25, probe_ms=0.02)
    assert coder_reward(v, CFG).value == pytest.approx(0.5 + 0.5 * 1.6 + 0.4)


@pytest.mark.parametrize("flag", ["below_flop_floor", "noisy_timing", "clock_drift"])
def test_flags_about_measurement_or_shortcuts_are_not_hacks(flag: str) -> None:
    assert coder_reward(_verdict(speedup=2.0, coverage=0.8, flags=(flag,)), CFG).value == pytest.approx(1.9)


def test_a_turn_the_judge_flags_low_coverage_earns_no_speedup_credit() -> None:
    """The judge's rule on library calls, not a threshold of the reward's own: the win counts as 1.0, a
    slowdown still counts, and the turn stays in the loss."""
    r = coder_reward(_verdict(speedup=2.0, coverage=0.3, flags=("low_coverage",)), CFG)
    # 0.5 + 0.5*1.0 + 0.5*0.3
    assert (r.value, r.rejected, r.reason) == (pytest.approx(1.15), False, "low_coverage")
    assert coder_reward(_verdict(speedup=0.6, coverage=0.3, flags=("low_coverage",)), CFG).value == pytest.approx(0.95)
    # unflagged, the same coverage is paid its whole speedup: 0.5 + 1.0 + 0.15
    assert coder_reward(_verdict(speedup=2.0, coverage=0.3), CFG).value == pytest.approx(1.65)


def test_large_wins_are_remeasured_and_the_lower_speedup_rewarded() -> None:
    original = _verdict(speedup=5.0, coverage=0.8)
    # re-measured at 4x: 0.5 + 0.5*4 + 0.4
    lower = Remeasure(_verdict(speedup=4.0))
    r = coder_reward(original, CFG, lower)
    assert (r.value, r.reason) == (pytest.approx(2.9), "remeasured") and lower.asked == [original]
    # re-measured higher (8x): the first 5x is kept: 0.5 + 2.5 + 0.4
    assert coder_reward(original, CFG, Remeasure(_verdict(speedup=8.0))).value == pytest.approx(3.4)
    # both above the cap: min(10, 12) capped at 6: 0.5 + 3 + 0.4; Dr.Kernel's cap of 3: 0.5 + 1.5 + 0.4
    assert coder_reward(_verdict(speedup=10.0), CFG, Remeasure(_verdict(speedup=12.0))).value == pytest.approx(3.9)
    dr_kernel = RewardConfig(speedup_cap=3.0)
    assert coder_reward(_verdict(speedup=10.0), dr_kernel, Remeasure(_verdict(speedup=12.0))).value == pytest.approx(2.4)
    # the re-measurement turned out a hack
    assert coder_reward(original, CFG, Remeasure(_verdict(speedup=5.0, flags=("side_stream",)))).reason == "hack"


def test_a_judge_error_earns_nothing_and_leaves_the_loss() -> None:
    """The judge's own failure is no verdict on the candidate: rejected (out of the loss and every baseline), so a
    trainer skips the turn instead of learning from a 0; never re-measured, never a hack's penalty."""
    remeasure = Remeasure(_verdict(speedup=5.0))
    for v in (_verdict(status=Status.JUDGE_ERROR, speedup=None, coverage=None),
              _verdict(status=Status.JUDGE_ERROR, speedup=None, coverage=None, flags=("side_stream",))):
        r = coder_reward(v, CFG, remeasure)
        assert (r.value, r.rejected, r.reason) == (0.0, True, "judge_error") and set(r.parts.values()) == {0.0}
    assert remeasure.asked == []


@pytest.mark.parametrize("remeasure", [None, Remeasure(None), Remeasure(_verdict(status=Status.INCORRECT, speedup=None)),
                                       Remeasure(_verdict(status=Status.JUDGE_ERROR, speedup=None))])
def test_a_large_win_not_confirmed_is_rewarded_only_up_to_the_threshold(remeasure: Remeasure | None) -> None:
    # 5x counts as 3x: 0.5 + 1.5 + 0.4
    r = coder_reward(_verdict(speedup=5.0, coverage=0.8), CFG, remeasure)
    assert (r.value, r.rejected, r.reason) == (pytest.approx(2.4), False, "not_remeasured")


def test_wins_up_to_the_threshold_are_not_remeasured() -> None:
    remeasure = Remeasure(_verdict(status=Status.INCORRECT, speedup=None))
    assert coder_reward(_verdict(speedup=3.0, coverage=0.8), CFG, remeasure).value == pytest.approx(2.4)
    assert remeasure.asked == []


def test_selector_and_summarizer_rewards() -> None:
    assert selector_reward([1.9, 0.0, 2.9]) == pytest.approx(1.6)
    assert selector_reward([]) == 0.0
    # admitted: 0.5 + 0.5 * gain (capped at 6)
    assert summarizer_reward(True, 1.5, CFG) == pytest.approx(1.25)
    assert summarizer_reward(True, 10.0, CFG) == pytest.approx(3.5)
    assert summarizer_reward(True, None, CFG) == pytest.approx(0.5)
    assert summarizer_reward(False, 1.1, CFG) == 0.0


def _step(reward: float, rejected: bool = False) -> Step:
    return Step(prompt=[{"role": "user", "content": "p"}], reply="r", reward=reward, rejected=rejected)


def test_normalisation_is_a_clipped_zscore_per_group_and_role() -> None:
    # coder rewards [0, 0, 0, 0, 10]: mean 2, Bessel variance (4*4 + 64)/4 = 20, so -2/sqrt(20) and
    # 8/sqrt(20) = 1.79, clipped to 1.5; the rejected 50 is left out and untouched. The selector's
    # [1, 3] is normalised on its own: -/+ 1/sqrt(2).
    coder = [0.0, 0.0, 0.0, 0.0, 10.0]
    episodes = [Episode(task_key="t", group="t", sample=i, trajectories=[Trajectory("coder", [_step(r)])]) for i, r in enumerate(coder)]
    episodes[0].trajectories[0].steps.append(_step(50.0, rejected=True))
    episodes[0].trajectories.append(Trajectory("selector", [_step(1.0)]))
    episodes[1].trajectories.append(Trajectory("selector", [_step(3.0)]))
    normalize_rewards(episodes, CFG)  # normalize is off by default: nothing changes
    assert [e.trajectories[0].steps[0].reward for e in episodes] == coder
    normalize_rewards(episodes, RewardConfig(normalize=True))
    z = -2 / math.sqrt(20)
    assert [e.trajectories[0].steps[0].reward for e in episodes] == pytest.approx([z, z, z, z, 1.5])
    assert episodes[4].trajectories[0].steps[0].info["raw_reward"] == 10.0
    assert episodes[0].trajectories[0].steps[1].reward == 50.0
    assert [e.trajectory("selector").steps[0].reward for e in episodes[:2]] == pytest.approx([-1 / math.sqrt(2), 1 / math.sqrt(2)])
