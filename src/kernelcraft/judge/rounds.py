"""The judge's side of a candidate's timed rounds (worker side: worker/candidate_ops.py, op_time).

Nothing the candidate's process holds predicts a round, or tells it whether a call will be checked:
- "round" (i, iters), as round i starts: the judge draws its input set and roll (the seed of its shifts).
- "timed" (i), once the candidate's call of round i > 0 has returned: the judge draws whether to check
  it, each round with probability spot_checks / iters, so no round (the last ones included) is known
  to go unchecked.
- "spot_check" (i, tensors, values), for a round the judge checks: the call's outputs, shared as in
  correctness (worker/exchange.py). The task's trusted worker makes that round's inputs again from its own
  input set and compares the reference's outputs on them with the candidate's. The verdict stays
  here: the worker is told only to go on.
Requests (protocol.RoundStart, RoundTimed, RoundOutputs) are untrusted (the candidate can write one):
any out of order, or past the configured rounds, is a ProtocolError, and the command's answer must account for every round drawn.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any, Callable

from .protocol import Decided, Drawn, GoOn, Mismatch, ProtocolError, Reply, RoundOutputs, RoundStart, RoundTimed, decode_request


@dataclass
class Round:
    """One timed round as the judge drew it, and what became of its check."""

    set: int
    roll: int
    check: bool | None = None  # None until the candidate's call has returned
    answered: bool = False  # the trusted worker compared its outputs


# (input set, roll, the worker's request with the shared outputs) -> one Mismatch per output
Compare = Callable[[int, int, RoundOutputs], list[Mismatch]]


class TimedRounds:
    """The rounds of one timing command: call it with each request (WorkerProcess.call's on_request),
    then `finish` with the command's answer."""

    def __init__(self, sets: int, spot_checks: int, iters: tuple[int, int], compare: Compare) -> None:
        self.sets = sets
        self.spot_checks = spot_checks
        self.lowest, self.highest = iters  # the rounds the configuration allows
        self.compare = compare
        self.rng = secrets.SystemRandom()
        self.iters: int | None = None
        self.rounds: list[Round] = []
        self.failure: tuple[int, Mismatch] | None = None  # the first timed call found wrong

    @property
    def checked(self) -> int:
        return sum(r.answered for r in self.rounds)

    def __call__(self, line: dict[str, Any]) -> Reply:
        request = decode_request(line)
        if type(request.i) is not int:
            raise ProtocolError(f"a {type(request).KIND!r} request without a round number")
        if isinstance(request, RoundStart):
            return self._start(request.i, request.iters)
        if isinstance(request, RoundTimed):
            return self._decide(request.i)
        if isinstance(request, RoundOutputs):
            return self._check(request)
        raise ProtocolError(f"an unknown request {type(request).KIND!r} during timing")

    def _start(self, i: int, iters: Any) -> Drawn:
        if type(iters) is not int or not self.lowest <= iters <= self.highest or self.iters not in (None, iters):
            raise ProtocolError(f"round {i} of {iters!r}: the configuration allows {self.lowest} to {self.highest} rounds, "
                                f"and one number for all")
        if i != len(self.rounds) or i > iters or (self.rounds and not self._done(len(self.rounds) - 1)):
            raise ProtocolError(f"round {i} started out of order")
        self.iters = iters
        r = Round(self.rng.randrange(self.sets), self.rng.getrandbits(63))
        self.rounds.append(r)
        return Drawn(r.set, r.roll)

    def _decide(self, i: int) -> Decided:
        if i <= 0 or i != len(self.rounds) - 1 or self.rounds[i].check is not None:
            raise ProtocolError(f"timed call {i} reported out of order")
        r = self.rounds[i]
        r.check = self.rng.random() * self.iters < self.spot_checks
        return Decided(r.check)

    def _check(self, request: RoundOutputs) -> GoOn:
        i, tensors, values = request.i, request.tensors, request.values
        if i != len(self.rounds) - 1 or not self.rounds[i].check or self.rounds[i].answered:
            raise ProtocolError(f"outputs of timed call {i} sent unasked")
        if not (isinstance(tensors, list) and isinstance(values, list) and len(tensors) == len(values)
                and all(t is None or isinstance(t, dict) for t in tensors)):
            raise ProtocolError(f"the outputs of timed call {i} are not described as shared outputs are")
        r = self.rounds[i]
        found = self.compare(r.set, r.roll, request)
        r.answered = True
        bad = next((m for m in found if not m.ok), None)
        if bad is not None and self.failure is None:
            self.failure = (i, bad)
        return GoOn()

    def _done(self, i: int) -> bool:
        """Round i is over as far as the judge is concerned: decided (unless the discarded one) and, if checked, compared."""
        r = self.rounds[i]
        return i == 0 or r.check is False or r.answered

    def finish(self, samples: dict[str, list[float]]) -> None:
        """The command's answer accounts for every round: each drawn, decided and (if checked) compared,
        and as many samples per side as rounds kept. Raises ProtocolError."""
        n = self.iters
        if n is None or len(self.rounds) != n + 1 or not all(self._done(i) for i in range(n + 1)):
            raise ProtocolError(f"the timing ended with {len(self.rounds)} round(s) drawn of {n}, or a check unanswered")
        if any(len(xs) != n for xs in samples.values()):
            raise ProtocolError(f"the timing reported other than {n} samples a side")


__all__ = ["Compare", "Round", "TimedRounds"]
