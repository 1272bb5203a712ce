"""The RL core's advantage estimators, against values computed by hand in the comments: each
estimator on a small group, TRLOO's turn-level baselines, the self-inclusion bias that
leave-one-out removes, per-agent separation, and rejected turns."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from kernelcraft.train.advantages import AdvantageConfig, RoleConfig, assign_advantages, role_weight
from kernelcraft.train.episode import Episode, Role, Step, Trajectory


def _step(reward: float, rejected: bool = False) -> Step:
    return Step(prompt=[{"role": "user", "content": "write a kernel"}], reply="```python\n```", reward=reward, rejected=rejected)


def _episodes(group: str, samples: list[list[float]], role: Role = "coder",
              rejected: frozenset[tuple[int, int]] = frozenset()) -> list[Episode]:
    """One episode per sample, with one `role` trajectory of the given turn rewards; `rejected`
    holds (sample, turn) pairs."""
    return [Episode(task_key="t", group=group, sample=i,
                    trajectories=[Trajectory(role, [_step(r, (i, j) in rejected) for j, r in enumerate(rewards)])])
            for i, rewards in enumerate(samples)]


def _advantages(episodes: list[Episode], role: Role = "coder") -> list[list[float]]:
    return [[s.advantage for s in e.trajectory(role).steps] for e in episodes if e.trajectory(role)]


def _only(role: Role, estimator: str) -> AdvantageConfig:
    return AdvantageConfig(roles={role: RoleConfig(estimator=estimator, weight=1.0)})


S7 = math.sqrt(7)


# Group "t" has rewards [1, 2, 6] (mean 3); group "u" has [10, 10] (mean 10); the batch mean is 29/5 = 5.8.
@pytest.mark.parametrize("estimator, expected_t, expected_u", [
    # return minus the batch mean 5.8
    ("reinforce", [-4.8, -3.8, 0.2], [4.2, 4.2]),
    # 1 - (2+6)/2, 2 - (1+6)/2, 6 - (1+2)/2
    ("rloo", [-3.0, -1.5, 4.5], [0.0, 0.0]),
    # deviations -2, -1, 3; Bessel variance (4+1+9)/2 = 7
    ("grpo", [-2 / S7, -1 / S7, 3 / S7], [0.0, 0.0]),
    ("drgrpo", [-2.0, -1.0, 3.0], [0.0, 0.0]),
    # one turn: TRLOO is RLOO
    ("trloo", [-3.0, -1.5, 4.5], [0.0, 0.0]),
])
def test_each_estimator_on_a_small_group(estimator: str, expected_t: list[float], expected_u: list[float]) -> None:
    t, u = _episodes("t", [[1.0], [2.0], [6.0]]), _episodes("u", [[10.0], [10.0]])
    assign_advantages(t + u, _only("coder", estimator))
    assert [a for (a,) in _advantages(t)] == pytest.approx(expected_t)
    assert [a for (a,) in _advantages(u)] == pytest.approx(expected_u)


def test_trloo_baselines_each_turn_with_the_other_samples_same_turn() -> None:
    #            turn rewards      return-to-go
    # sample 0:  [0, 1, 2, 1]  ->  [4, 4, 3, 1]
    # sample 1:  [1, 0]        ->  [1, 0]
    # sample 2:  [.5, .5, .5]  ->  [1.5, 1, .5]
    episodes = _episodes("t", [[0.0, 1.0, 2.0, 1.0], [1.0, 0.0], [0.5, 0.5, 0.5]])
    assign_advantages(episodes, AdvantageConfig())  # the coder's default is trloo
    assert _advantages(episodes) == [
        # turn 0: 4-(1+1.5)/2, turn 1: 4-(0+1)/2, turn 2: 3-.5, turn 3: only sample 0 got there: 1-0
        pytest.approx([2.75, 3.5, 2.5, 1.0]),
        # turn 0: 1-(4+1.5)/2, turn 1: 0-(4+1)/2
        pytest.approx([-1.75, -2.5]),
        # turn 0: 1.5-(4+1)/2, turn 1: 1-(4+0)/2, turn 2: .5-3
        pytest.approx([-1.0, -1.0, -2.5]),
    ]


def test_other_estimators_give_every_turn_the_trajectory_advantage() -> None:
    # returns 4, 1, 1.5: RLOO 4-(1+1.5)/2, 1-(4+1.5)/2, 1.5-(4+1)/2
    episodes = _episodes("t", [[0.0, 1.0, 2.0, 1.0], [1.0, 0.0], [0.5, 0.5, 0.5]])
    assign_advantages(episodes, _only("coder", "rloo"))
    assert _advantages(episodes) == [pytest.approx([2.75] * 4), pytest.approx([-1.75] * 2), pytest.approx([-1.0] * 3)]


def test_leave_one_out_removes_the_self_inclusion_bias_of_the_group_mean() -> None:
    # Two samples [1, 4]: RLOO compares each with the other (-3, +3); the group mean 2.5 includes
    # the sample itself, so Dr.GRPO's advantage is exactly half of RLOO's, and GRPO divides that by
    # the Bessel std 3/sqrt(2).
    advantages = {}
    for estimator in ("rloo", "trloo", "drgrpo", "grpo"):
        episodes = _episodes("t", [[1.0], [4.0]])
        assign_advantages(episodes, _only("coder", estimator))
        advantages[estimator] = [a for (a,) in _advantages(episodes)]
    assert advantages["rloo"] == advantages["trloo"] == pytest.approx([-3.0, 3.0])
    assert advantages["drgrpo"] == pytest.approx([-1.5, 1.5])
    assert advantages["grpo"] == pytest.approx([-1 / math.sqrt(2), 1 / math.sqrt(2)])
    # With n samples the group mean shrinks every advantage by (n-1)/n: [0, 1, 2, 5] has mean 2,
    # Dr.GRPO -2, -1, 0, 3; RLOO 0-8/3, 1-7/3, 2-6/3, 5-3/3 = -8/3, -4/3, 0, 4; 3/4 of those is Dr.GRPO.
    rloo, drgrpo = _episodes("t", [[0.0], [1.0], [2.0], [5.0]]), _episodes("t", [[0.0], [1.0], [2.0], [5.0]])
    assign_advantages(rloo, _only("coder", "rloo"))
    assign_advantages(drgrpo, _only("coder", "drgrpo"))
    assert [a for (a,) in _advantages(rloo)] == pytest.approx([-8 / 3, -4 / 3, 0.0, 4.0])
    assert [a for (a,) in _advantages(drgrpo)] == pytest.approx([-2.0, -1.0, 0.0, 3.0])
    # The bias itself: raising sample 0's reward from 1 to 3 moves its own Dr.GRPO baseline (reward
    # minus advantage) from 2.5 to 3.5, while its RLOO baseline stays the other sample's 4.
    for r0, drgrpo_baseline in ((1.0, 2.5), (3.0, 3.5)):
        for estimator, baseline in (("drgrpo", drgrpo_baseline), ("rloo", 4.0)):
            episodes = _episodes("t", [[r0], [4.0]])
            assign_advantages(episodes, _only("coder", estimator))
            assert r0 - episodes[0].trajectory("coder").steps[0].advantage == pytest.approx(baseline)


def _two_roles(selector_scale: float) -> list[Episode]:
    """Three samples of one task, each with a selector turn and two coder turns."""
    coder = [[0.5, 1.5], [1.0, 0.0], [0.0, 2.5]]
    selector = [1.0, 0.5, 2.0]
    return [Episode(task_key="t", group="t", sample=i, trajectories=[
        Trajectory("selector", [_step(selector[i] * selector_scale)]),
        Trajectory("coder", [_step(r) for r in coder[i]])]) for i in range(3)]


@pytest.mark.parametrize("estimators", [("rloo", "trloo"), ("grpo", "drgrpo"), ("reinforce", "reinforce")])
def test_one_roles_reward_scale_never_moves_another_roles_advantages(estimators: tuple[str, str]) -> None:
    selector_estimator, coder_estimator = estimators
    cfg = AdvantageConfig(roles={"selector": RoleConfig(estimator=selector_estimator, weight=0.3),
                                 "coder": RoleConfig(estimator=coder_estimator, weight=1.0)})
    small, large = _two_roles(1.0), _two_roles(100.0)
    assign_advantages(small, cfg)
    assign_advantages(large, cfg)
    assert _advantages(large, "coder") == _advantages(small, "coder")
    assert any(a != 0 for (a,) in _advantages(small, "selector"))
    if selector_estimator != "grpo":  # the others are linear in the rewards; grpo is scale-free
        assert [a for (a,) in _advantages(large, "selector")] == pytest.approx([100 * a for (a,) in _advantages(small, "selector")])


def test_role_weights_and_estimators_default_to_davinci_kernels() -> None:
    cfg = AdvantageConfig()
    assert [role_weight(r, cfg) for r in ("selector", "coder", "summarizer")] == [0.3, 1.0, 0.5]
    assert [cfg.roles[r].estimator for r in ("selector", "coder", "summarizer")] == ["rloo", "trloo", "rloo"]
    # naming one role keeps the defaults of the others
    partial = AdvantageConfig.model_validate({"roles": {"coder": {"estimator": "grpo", "weight": 2.0}}})
    assert role_weight("coder", partial) == 2.0 and role_weight("summarizer", partial) == 0.5
    with pytest.raises(ValidationError):
        AdvantageConfig.model_validate({"roles": {"coder": {"estimator": "ppo", "weight": 1.0}}})


def test_rejected_turns_get_zero_and_stay_out_of_every_baseline() -> None:
    # Sample 2 (reward 100) is rejected: RLOO over [1, 3] alone gives -2, +2.
    episodes = _episodes("t", [[1.0], [3.0], [100.0]], rejected=frozenset({(2, 0)}))
    assign_advantages(episodes, _only("coder", "rloo"))
    assert _advantages(episodes) == [[-2.0], [2.0], [0.0]]
    # TRLOO, sample 0 [1, 2 rejected, 3] -> return-to-go [4, 3, 3]; sample 1 [2, 2, 2] -> [6, 4, 2].
    # turn 0: 4-6, 6-4; turn 1: sample 0 rejected (0), sample 1 alone 4-0; turn 2: 3-2, 2-3.
    episodes = _episodes("t", [[1.0, 2.0, 3.0], [2.0, 2.0, 2.0]], rejected=frozenset({(0, 1)}))
    for step in episodes[0].trajectory("coder").steps:
        step.advantage = 9.0  # stale values from an earlier batch are overwritten
    assign_advantages(episodes, AdvantageConfig())
    assert _advantages(episodes) == [[-2.0, 0.0, 1.0], [2.0, 4.0, -1.0]]


def test_a_trajectory_can_name_its_own_baseline_group() -> None:
    # The selector's schemes are samples of the task while each coder group is task+scheme: the two
    # selector turns (rewards 1 and 3) share the group "t", the coder turns do not.
    episodes = [Episode(task_key="t", group=f"t|scheme{i}", sample=0, trajectories=[
        Trajectory("selector", [_step(r)], group="t"), Trajectory("coder", [_step(r)])]) for i, r in enumerate((1.0, 3.0))]
    assign_advantages(episodes, AdvantageConfig())
    assert _advantages(episodes, "selector") == [[-2.0], [2.0]]
    assert _advantages(episodes, "coder") == [[1.0], [3.0]]  # alone in its group: baseline 0
