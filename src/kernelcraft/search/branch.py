"""Strategy `branch` (test-time search with natural-language ideas): each round the planner writes
several distinct optimization ideas, conditioned on the ideas already tried and what they reached;
each idea is implemented several times, starting from the bank of the best kernels so far; the
round's best join the bank and seed the next round. A round's ideas are saved before they are
implemented, so a resumed run implements the same ideas."""

from __future__ import annotations

from collections import Counter

from ..agents import TriedIdea
from ..llm import LLMError
from .registry import register
from .strategy import Outcome, TaskContext, run_parallel

# What the coder is asked when the planner gave no usable idea: the round still spends its budget.
FALLBACK_IDEA = "Write the fastest correct kernel you can: fuse the operations and make every memory access count."


def bank_of(outcomes: list[Outcome], size: int) -> list[Outcome]:
    """The `size` fastest correct kernels, each source once, fastest first."""
    best: dict[str, Outcome] = {}
    for o in outcomes:
        if o.correct and o.source is not None and (o.source not in best or o.speedup > best[o.source].speedup):
            best[o.source] = o
    return sorted(best.values(), key=lambda o: -o.speedup)[:size]


def tried_idea(idea: str, outcomes: list[Outcome]) -> TriedIdea:
    correct = [o.speedup for o in outcomes if o.correct]
    if correct:
        return TriedIdea(idea, max(correct))
    failures = Counter(o.status for o in outcomes)
    return TriedIdea(idea, None, failures.most_common(1)[0][0] if failures else "")


@register("branch", reads=("turns", "start", "branch"))
class Branch:
    def run(self, ctx: TaskContext) -> None:
        options = ctx.config.branch
        tried: list[TriedIdea] = []
        start = ctx.start_kernel()
        everything: list[Outcome] = [start] if start is not None else []  # the bank's first kernel, with start "best"
        for rnd in range(ctx.config.turns):
            bank = bank_of(everything, options.bank)
            ideas = self._ideas(ctx, rnd, tried, bank)
            slots = [(i, j) for i in range(len(ideas)) for j in range(options.impls)]
            outcomes = run_parallel([lambda i=i, j=j: self._implement(ctx, rnd, i, j, ideas[i], bank) for i, j in slots], "branch")
            for i, idea in enumerate(ideas):
                tried.append(tried_idea(idea, [o for (k, _), o in zip(slots, outcomes) if k == i]))
            everything += outcomes

    def _ideas(self, ctx: TaskContext, rnd: int, tried: list[TriedIdea], bank: list[Outcome]) -> list[str]:
        saved = ctx.saved(f"ideas/{rnd}")
        if saved is not None:
            return saved
        options = ctx.config.branch
        try:
            plan = ctx.guarded(lambda: ctx.planner.plan(ctx.task, width=options.width, tried=tried,
                                                        seeds=[o.example() for o in bank], rules=ctx.rules,
                                                        sample=rnd))
        except LLMError:  # the planner failed for good: implement the fallback, and ask again on resume
            return [FALLBACK_IDEA]
        ideas = plan.ideas or [FALLBACK_IDEA]
        ctx.save(f"ideas/{rnd}", ideas)
        return ideas

    def _implement(self, ctx: TaskContext, rnd: int, i: int, j: int, idea: str, bank: list[Outcome]) -> Outcome:
        sample = i * ctx.config.branch.impls + j
        seed = bank[j % len(bank)].example() if bank else None  # implementations start from different good kernels
        messages = ctx.coder.directed(ctx.opening(sample), "idea", idea=idea, seed=seed)
        return ctx.attempt(sample, rnd, messages, {"round": rnd, "idea": idea, "seed_speedup": seed.speedup if seed else None})
