"""Verdict reuse: each normalized source is judged once per verdict context, and stored verdicts answer equal
candidates. Search (search/strategy.py), the RL environment (train/env.py) and the judge service
(service/queue.py) all judge through a `VerdictReuse`, which owns the rules:

- the key: a verdict depends on the candidate's normalized source (comments and layout removed) and on its
  context (`verdict_context`: the task as judged, the judge's settings and version, the device); verdicts of
  equal keys are interchangeable;
- one evaluation per key while it is in flight: callers of an equal source wait for it and share its outcome;
- the latest stored verdict of the key answers later callers, except timeouts (a busy machine causes them as
  well as the code) and judge errors (the judge's own failure): `NOT_REUSED`, judged again;
- `fresh`: a new evaluation, neither answered from the store nor shared with one in flight; it is stored, so
  later callers reuse it.

It sits in the judge over the `VerdictStore` protocol rather than in store/: the rules say when two verdicts are
interchangeable, which is the judge's business, and the package order lets the store import the judge, never
the reverse. The workspace's `Store` implements the protocol (its queries follow `NOT_REUSED`); `MemoryVerdicts`
keeps a session's verdicts where there is no workspace.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Protocol

from ..tasks import Task
from . import JudgeConfig, context_hash, normalized_hash
from .verdict import Status, Verdict

NOT_REUSED = frozenset({Status.TIMEOUT, Status.JUDGE_ERROR})


class VerdictStore(Protocol):
    """Where verdicts are kept: the workspace's Store, or MemoryVerdicts."""

    def record_verdict(self, task: Task, source: str, verdict: Verdict, *, run_id: str | None = None, origin: str = "",
                       norm_hash: str = "", context_hash: str = "") -> int: ...

    def reusable_verdict(self, context_hash: str, norm_hash: str, run_id: str | None = None) -> int | None: ...

    def verdict(self, verdict_id: int) -> Verdict: ...


def verdict_context(task: Task, config: JudgeConfig, device_name: str) -> str:
    """The context key of `task` judged with `config` on the device named `device_name`."""
    return context_hash(task.source, task.meta.to_dict(), config, device_name)


def remeasure_context(context: str) -> str:
    """The context of a second measurement of an outsized win (the RL reward's re-measurement): one of its own, so
    a candidate's first verdict and its re-measurement stay two measurements, each reused as what it is."""
    return hashlib.sha256(f"{context}/remeasure".encode()).hexdigest()


@dataclass(frozen=True)
class Judged:
    verdict: Verdict
    verdict_id: int
    reused: bool  # an earlier verdict (stored, or another caller's evaluation in flight), not this caller's


@dataclass(frozen=True)
class _Key:
    context: str
    norm: str
    only_run: str | None  # a request reusing only one run's verdicts shares no evaluation with one reusing any


@dataclass(eq=False)
class Claim:
    """One caller's request. `owner`: this caller evaluates the candidate and hands the verdict to
    `VerdictReuse.finish` (or its failure to `fail`); otherwise the answer comes from the store or from the
    evaluation in flight."""

    task: Task
    source: str
    key: _Key
    owner: bool
    future: Future[Judged]
    then: Callable[[Judged], None] | None = None

    def result(self) -> Judged:
        """The answer (waits for it); raises what the evaluation raised."""
        judged = self.future.result()
        return judged if self.owner else replace(judged, reused=True)

    def when_done(self, callback: Callable[[Claim], None]) -> None:
        """Call `callback(self)` once answered (at once if it is), in the thread that answers."""
        self.future.add_done_callback(lambda _: callback(self))


class VerdictReuse:
    """Judges candidates through a VerdictStore; verdicts it measures are recorded there under `origin` and
    `run_id`. Thread-safe."""

    def __init__(self, store: VerdictStore, *, origin: str, run_id: str | None = None) -> None:
        self.store = store
        self.origin = origin
        self.run_id = run_id
        self._inflight: dict[_Key, Future[Judged]] = {}
        self._lock = threading.Lock()

    def judge(self, task: Task, source: str, context: str, evaluate: Callable[[], Verdict], *, fresh: bool = False,
              only_run: str | None = None, then: Callable[[Judged], None] | None = None) -> Judged:
        """The verdict of `source` on `task` in `context`: reused, or `evaluate()`d here and recorded. `only_run`:
        reuse only the verdicts that run measured. `then` runs on the answer before callers waiting for the same
        evaluation get it. Raises what `evaluate` or `then` raised (equal callers in flight raise it too)."""
        claim = self.claim(task, source, context, fresh=fresh, only_run=only_run, then=then)
        if claim.owner:
            try:
                verdict = evaluate()
            except BaseException as e:
                self.fail(claim, e)
                raise
            self.finish(claim, verdict)
        return claim.result()

    def claim(self, task: Task, source: str, context: str, *, fresh: bool = False, only_run: str | None = None,
              then: Callable[[Judged], None] | None = None) -> Claim:
        """`judge` for callers that evaluate elsewhere (a pool's future): the claim says whether this caller must
        evaluate (`owner`), or is answered from the store or by the evaluation in flight."""
        key = _Key(context, normalized_hash(source), only_run)
        with self._lock:
            shared = None if fresh else self._inflight.get(key)
            if shared is None:
                future: Future[Judged] = Future()
                if not fresh:
                    self._inflight[key] = future
        if shared is not None:
            return Claim(task, source, key, False, shared)
        claim = Claim(task, source, key, True, future, then)
        if fresh:
            return claim
        try:
            earlier = self.store.reusable_verdict(context, key.norm, only_run)
            if earlier is None:
                return claim
            judged = Judged(self.store.verdict(earlier), earlier, reused=True)
        except BaseException as e:
            self.fail(claim, e)
            raise
        self._answer(claim, judged)
        return replace(claim, owner=False)

    def finish(self, claim: Claim, verdict: Verdict) -> None:
        """Record the owner's verdict, then answer every caller waiting for it."""
        try:
            vid = self.store.record_verdict(claim.task, claim.source, verdict, run_id=self.run_id, origin=self.origin,
                                            norm_hash=claim.key.norm, context_hash=claim.key.context)
        except BaseException as e:
            self.fail(claim, e)
            raise
        self._answer(claim, Judged(verdict, vid, reused=False))

    def fail(self, claim: Claim, error: BaseException) -> None:
        """The owner's evaluation failed: its waiters get `error`; the next equal caller evaluates again."""
        self._release(claim)
        claim.future.set_exception(error)

    def _answer(self, claim: Claim, judged: Judged) -> None:
        try:
            if claim.then is not None:
                claim.then(judged)
        except BaseException as e:
            self.fail(claim, e)
            return
        # after the verdict is stored: a caller that no longer finds the evaluation in flight finds its verdict
        self._release(claim)
        claim.future.set_result(judged)

    def _release(self, claim: Claim) -> None:
        with self._lock:
            if self._inflight.get(claim.key) is claim.future:
                del self._inflight[claim.key]


class MemoryVerdicts:
    """A VerdictStore for one session, in memory: for RL over an evaluator elsewhere (the judge service, which
    reuses from its own workspace) and for tests. Thread-safe."""

    def __init__(self) -> None:
        self._rows: dict[int, tuple[str, str, str | None, Verdict]] = {}  # id: context, norm, run, verdict
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def record_verdict(self, task: Task, source: str, verdict: Verdict, *, run_id: str | None = None, origin: str = "",
                       norm_hash: str = "", context_hash: str = "") -> int:
        with self._lock:
            vid = next(self._ids)
            self._rows[vid] = (context_hash, norm_hash, run_id, verdict)
        return vid

    def reusable_verdict(self, context_hash: str, norm_hash: str, run_id: str | None = None) -> int | None:
        with self._lock:
            return next((vid for vid, (c, n, r, v) in reversed(self._rows.items())
                         if (c, n) == (context_hash, norm_hash) and v.status not in NOT_REUSED
                         and (run_id is None or r == run_id)), None)

    def verdict(self, verdict_id: int) -> Verdict:
        with self._lock:
            return self._rows[verdict_id][3]
