"""The judge's side of a candidate's timed rounds (judge/rounds.py, its requests typed in judge/protocol.py): it draws every round's inputs and
decides every check after the call, out of the candidate's reach, keeps the verdict, and refuses
requests out of order; a candidate wrong on half the rounds is caught at least 99 times in 100."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from kernelcraft.judge.config import TimingConfig
from kernelcraft.judge.protocol import Decided, GoOn, Mismatch, ProtocolError, RoundOutputs
from kernelcraft.judge.rounds import TimedRounds
from kernelcraft.judge.worker.timing import fresh_inputs, local_rounds

SHARED = {"tensors": [None], "values": [1.0]}


def rounds(wrong: set[int] = frozenset(), spot_checks: int = 10, iters: tuple[int, int] = (5, 300)) -> TimedRounds:
    """Rounds whose trusted comparison fails on the rounds in `wrong` (by round number, as the
    worker's requests come)."""
    def compare(k: int, roll: int, shared: RoundOutputs) -> list[Mismatch]:
        assert (shared.tensors, shared.values) == (SHARED["tensors"], SHARED["values"])
        i = len(r.rounds) - 1
        return [Mismatch(i not in wrong, reason=f"round {i}")]
    r = TimedRounds(3, spot_checks, iters, compare)
    return r


def measure(r: TimedRounds, iters: int) -> None:
    """The requests an honest worker sends for `iters` timed rounds."""
    for i in range(iters + 1):
        drawn = r({"request": "round", "i": i, "iters": iters})
        assert 0 <= drawn.set < 3 and 0 <= drawn.roll < 2**63
        if i > 0 and r({"request": "timed", "i": i}).check:
            assert r({"request": "spot_check", "i": i, **SHARED}) == GoOn()
    r.finish({"candidate": [1.0] * iters, "reference": [1.0] * iters})


def test_every_round_is_drawn_and_checked_by_the_judge() -> None:
    r = rounds()
    measure(r, 40)
    assert len({x.roll for x in r.rounds}) == 41  # no roll repeats, none comes from the worker
    assert r.checked == sum(bool(x.check) for x in r.rounds) and r.failure is None


def test_a_wrong_checked_call_is_kept_by_the_judge_and_the_worker_is_told_to_go_on() -> None:
    r = rounds(wrong=set(range(1, 21)), spot_checks=1000)  # every round checked
    measure(r, 20)
    i, bad = r.failure
    assert i == 1 and not bad.ok and r.checked == 20


def test_checks_average_spot_checks_and_miss_a_half_wrong_candidate_under_1_in_100() -> None:
    iters, runs = 60, 1500
    checks, missed = 0, 0
    for _ in range(runs):
        r = rounds(wrong=set(range(2, iters + 1, 2)))  # wrong on every other round
        measure(r, iters)
        checks += r.checked
        missed += r.failure is None
    assert 8.5 < checks / runs < 11.5
    assert missed / runs < 0.02  # expected (1 - 10/60)**30 = 0.4%
    # The bound, at every number of rounds a measurement may take: under 1% whatever the length.
    cfg = TimingConfig()
    assert cfg.spot_checks == 10
    for n in range(cfg.spot_checks + 1, cfg.max_iters + 1):
        assert (1 - cfg.spot_checks / n) ** (n / 2) < math.exp(-cfg.spot_checks / 2) < 0.01


@pytest.mark.parametrize("requests", [
    [{"request": "timed", "i": 1}],  # before its round
    [{"request": "round", "i": 1, "iters": 10}],  # a round skipped
    [{"request": "round", "i": 0, "iters": 400}],  # more rounds than configured
    [{"request": "round", "i": 0, "iters": 10}, {"request": "round", "i": 1, "iters": 20}],  # the count changed
    [{"request": "round", "i": 0, "iters": 10}, {"request": "round", "i": 1, "iters": 10}, {"request": "round", "i": 2, "iters": 10}],
    [{"request": "round", "i": 0, "iters": 10}, {"request": "round", "i": 1, "iters": 10}, {"request": "spot_check", "i": 1, **SHARED}],
    [{"request": "round", "i": 0, "iters": 10}, {"request": "timed", "i": 0}],  # the discarded round
    [{"request": "round", "i": 0, "iters": 10}, {"request": "build", "i": 0}],
    [{"request": "round", "i": "0", "iters": 10}],
])
def test_requests_out_of_order_are_refused(requests: list[dict[str, Any]]) -> None:
    r = rounds()
    with pytest.raises(ProtocolError):
        for q in requests:
            r(q)


def test_a_check_asked_twice_or_unanswered_is_refused() -> None:
    r = rounds(spot_checks=1000)
    r({"request": "round", "i": 0, "iters": 10})
    r({"request": "round", "i": 1, "iters": 10})
    assert r({"request": "timed", "i": 1}).check
    with pytest.raises(ProtocolError):  # the candidate asking first, to learn whether it is checked
        r({"request": "timed", "i": 1})
    with pytest.raises(ProtocolError):  # the next round before the check was answered
        r({"request": "round", "i": 2, "iters": 10})
    with pytest.raises(ProtocolError):
        r.finish({"candidate": [1.0], "reference": [1.0]})


def test_an_answer_that_does_not_account_for_every_round_is_refused() -> None:
    r = rounds(spot_checks=0)
    for i in range(11):
        r({"request": "round", "i": i, "iters": 10})
        if i:
            assert r({"request": "timed", "i": i}) == Decided(False)
    with pytest.raises(ProtocolError):
        r.finish({"candidate": [1.0] * 9, "reference": [1.0] * 10})
    r.finish({"candidate": [1.0] * 10, "reference": [1.0] * 10})


def test_a_rounds_inputs_are_made_again_from_its_set_and_roll_alone() -> None:
    base = [torch.arange(100.0).reshape(10, 10), torch.arange(7), 3]
    a, b = fresh_inputs(base, 12345, True), fresh_inputs(base, 12345, True)
    assert all(torch.equal(x, y) for x, y in zip(a[:2], b[:2])) and a[2] == 3
    assert not torch.equal(a[0], base[0]) and sorted(a[0].reshape(-1).tolist()) == base[0].reshape(-1).tolist()
    assert not torch.equal(fresh_inputs(base, 54321, True)[0], a[0])
    assert torch.equal(fresh_inputs(base, 12345, False)[0], base[0])


def test_local_rounds_take_the_sets_in_turn_with_rolls_no_seed_predicts() -> None:
    one, two = local_rounds(3), local_rounds(3)
    drawn = [one(i, 0) for i in range(6)]
    assert [k for k, _ in drawn] == [0, 1, 2, 0, 1, 2]
    assert len({roll for _, roll in drawn} | {two(0, 0)[1]}) == 7
