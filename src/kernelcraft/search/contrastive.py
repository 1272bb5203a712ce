"""Strategy `contrastive` (CUDA-L1's prompt): the coder sees the reference and two earlier correct
kernels with their measured speedups, drawn from two different score buckets (a softmax with
temperature over the buckets' mean scores picks the buckets, then one kernel uniformly from each),
and answers in three parts: why the faster one is faster, a design that beats both, the code.
The exemplar database holds this task's correct kernels from this run and from earlier runs in
the same judging context. Until it holds two, prompts are plain (each round a new draw). Each round's samples are asked
together, so with batch replies a round is one batch round."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

from ..agents import contrastive_sections
from .registry import register
from .strategy import Outcome, TaskContext, run_parallel

SECTIONS = ("performance analysis", "algorithm design", "code")


def score_buckets(kernels: Sequence[Outcome], buckets: int) -> list[list[Outcome]]:
    """Correct kernels split by speedup into at most `buckets` groups of nearly equal size, slowest first."""
    ranked = sorted(kernels, key=lambda o: o.speedup)
    n = min(buckets, len(ranked))
    return [list(ranked[len(ranked) * b // n: len(ranked) * (b + 1) // n]) for b in range(n)]


def pick_exemplars(kernels: Sequence[Outcome], buckets: int, temperature: float,
                   rng: random.Random) -> tuple[Outcome, Outcome] | None:
    """Two kernels from two distinct buckets, slower first; None with fewer than two kernels."""
    groups = [g for g in score_buckets(kernels, buckets) if g]
    if len(groups) < 2:
        return None
    means = [sum(math.log(o.speedup) for o in g) / len(g) for g in groups]  # log: 2x over 1x weighs like 4x over 2x
    top = max(means)
    weights = [math.exp((m - top) / temperature) for m in means]
    first = rng.choices(range(len(groups)), weights)[0]
    rest = [i for i in range(len(groups)) if i != first]
    second = rng.choices(rest, [weights[i] for i in rest])[0]
    a, b = rng.choice(groups[first]), rng.choice(groups[second])
    return (a, b) if a.speedup <= b.speedup else (b, a)


def sections_note(reply: str) -> dict[str, Any]:
    """Whether the answer kept the three-part form (recorded; the judge decides on the code alone)."""
    found = contrastive_sections(reply)
    return {"sections": [s for s in SECTIONS if found.get(s)]}


@register("contrastive", reads=("turns", "samples", "contrastive"))
class Contrastive:
    def run(self, ctx: TaskContext) -> None:
        # Earlier runs' kernels, then this run's as its rounds add them (replayed on resume): each round's
        # database, and so its prompts, come out the same in every invocation.
        earlier = ctx.store.correct_kernels(ctx.context, other_than_run=ctx.run_id)
        database = [Outcome("correct", speedup, "", source, vid) for vid, source, speedup in earlier]
        known = {o.verdict_id for o in database}
        for rnd in range(ctx.config.turns):
            outcomes = run_parallel([lambda k=k: self._sample(ctx, rnd, k, list(database)) for k in range(ctx.config.samples)],
                                    "contrastive")
            for o in outcomes:
                if o.correct and o.verdict_id not in known:
                    database.append(o)
                    known.add(o.verdict_id)

    def _sample(self, ctx: TaskContext, rnd: int, k: int, database: list[Outcome]) -> Outcome:
        options = ctx.config.contrastive
        rng = random.Random(f"{ctx.config.seed}/{ctx.task.key}/{rnd}/{k}")  # the same choice again on resume
        pair = pick_exemplars(database, options.buckets, options.temperature, rng)
        meta: dict[str, Any] = {"round": rnd}
        # The plain prompt is asked again each round until two kernels are correct: each round draws anew (as an
        # endpoint at this temperature would), not the first round's reply judged again.
        draw = rnd * ctx.config.samples + k
        if pair is None:
            return ctx.attempt(k, rnd, ctx.opening(k), meta, draw=draw)
        first, second = pair
        meta["exemplars"] = [[first.verdict_id, first.speedup], [second.verdict_id, second.speedup]]
        messages = ctx.coder.directed(ctx.opening(k), "contrastive", first=first.example(), second=second.example())
        return ctx.attempt(k, rnd, messages, meta, reply_meta=sections_note, draw=draw)
