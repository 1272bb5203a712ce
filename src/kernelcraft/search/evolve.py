"""Strategy `evolve` (program evolution in the manner of AlphaEvolve's open descendants): islands of
kernels, each child made by a mutation prompt (edit one parent) or a crossover prompt (combine
two), parents chosen with weight by fitness (speedup), a diversity archive keeping the best kernel
of every cell of (language, techniques used, speedup band), and periodic migration of each
island's best to the next island. Children are made asynchronously: `parallel` of them are in
flight at once, each choosing its parents from the population as it stands; each child's plan
(island, operator, parents) is saved before it is asked. A resumed run rebuilds the islands and
the archive from the recorded children, asks the planned children again with the same prompts, and
goes on. With batch replies, a child that waits parks its worker, so a batch round holds
`parallel` children."""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from typing import Any

from ..llm import Message
from .errors import Parked
from .features import archive_cell
from .registry import register
from .strategy import STOPPING, Outcome, TaskContext, run_parallel


@dataclass(frozen=True)
class Member:
    generation: int
    island: int
    outcome: Outcome

    @property
    def fitness(self) -> float:
        return self.outcome.speedup if self.outcome.correct else 0.0


@dataclass
class Population:
    islands: list[list[Member]]
    archive: dict[tuple[Any, ...], Member] = field(default_factory=dict)
    children: int = 0  # recorded children, for the migration schedule

    def add(self, member: Member, migrate_every: int) -> None:
        self.islands[member.island].append(member)
        o = member.outcome
        if o.source is not None and o.correct:
            cell = archive_cell(o.source, o.speedup)
            if cell not in self.archive or member.fitness > self.archive[cell].fitness:
                self.archive[cell] = member
        self.children += 1
        if self.children % migrate_every == 0:
            self.migrate()

    def migrate(self) -> None:
        """Each island's best correct kernel joins the next island (a ring)."""
        bests = [max((m for m in isl if m.outcome.correct), key=lambda m: m.fitness, default=None) for isl in self.islands]
        for i, best in enumerate(bests):
            target = self.islands[(i + 1) % len(self.islands)]
            if best is not None and len(self.islands) > 1 and all(m.outcome.source != best.outcome.source for m in target):
                target.append(Member(best.generation, (i + 1) % len(self.islands), best.outcome))


def weighted_pick(members: list[Member], rng: random.Random, exclude: Member | None = None) -> Member:
    """A parent chosen with probability proportional to its fitness."""
    pool = [m for m in members if m is not exclude] or members
    return rng.choices(pool, [m.fitness for m in pool])[0]


@register("evolve", reads=("evolve",))
class Evolve:
    def run(self, ctx: TaskContext) -> None:
        options = ctx.config.evolve
        population = Population([[] for _ in range(options.islands)])
        recorded = sorted((a for a in ctx.prior if "verify" not in a.meta), key=lambda a: a.sample)
        for a in recorded:
            population.add(Member(a.sample, int(a.meta.get("island", 0)) % options.islands, ctx.outcome_of(a)),
                           options.migrate_every)
        done = {a.sample for a in recorded}
        # Children planned before a stop and not recorded (a batch reply not in, a judge error): asked
        # first, with the prompt their saved plan gives, so a reply that came in answers it.
        planned = {g: plan for g in range(options.generations)
                   if g not in done and (plan := ctx.saved(_plan_key(g))) is not None}
        queue = sorted(planned)
        lock = threading.Lock()
        state = {"next": max(done | set(planned), default=-1) + 1, "left": options.generations - len(recorded) - len(planned)}

        def worker() -> None:
            while True:
                with lock:
                    if ctx.stop.is_set() and (queue or state["left"] > 0):  # unfinished: not a finished task
                        raise Parked(STOPPING)
                    if queue:
                        generation = queue.pop(0)
                        plan = planned[generation]
                    elif state["left"] > 0:
                        state["left"] -= 1
                        generation = state["next"]
                        state["next"] += 1
                        plan = self._plan(ctx, population, generation)
                        ctx.save(_plan_key(generation), plan)
                    else:
                        return
                    messages = self._prompt(ctx, population, generation, plan)
                outcome = ctx.attempt(generation, 0, messages, plan)
                with lock:
                    population.add(Member(generation, plan["island"], outcome), options.migrate_every)

        run_parallel([worker] * min(options.parallel, max(1, len(queue) + state["left"])), "evolve")

    @staticmethod
    def _plan(ctx: TaskContext, population: Population, generation: int) -> dict[str, Any]:
        """How a child is made, from the population as it stands: its island, the operator, the parents'
        verdict ids (and, for a parent from the archive, `from`). Saved, and recorded as the attempt's note."""
        options = ctx.config.evolve
        rng = random.Random(f"{ctx.config.seed}/{ctx.task.key}/{generation}")
        island = generation % options.islands
        members = population.islands[island]
        correct = [m for m in members if m.outcome.correct]
        plan: dict[str, Any] = {"island": island}
        if correct and population.archive and rng.random() < options.archive_pick:
            parent = rng.choice(list(population.archive.values()))  # diversity: any cell, uniformly
            return {**plan, "op": "mutation", "from": "archive", "parents": [parent.outcome.verdict_id]}
        if len(correct) >= 2 and rng.random() < options.crossover:
            a = weighted_pick(correct, rng)
            b = weighted_pick(correct, rng, exclude=a)
            if a.outcome.source != b.outcome.source:
                return {**plan, "op": "crossover", "parents": [a.outcome.verdict_id, b.outcome.verdict_id]}
        if correct:
            return {**plan, "op": "mutation", "parents": [weighted_pick(correct, rng).outcome.verdict_id]}
        failed = [m for m in members if m.outcome.source is not None]
        if failed:  # nothing correct yet on this island: repair the latest attempt, with the judge's words
            return {**plan, "op": "repair", "parents": [failed[-1].outcome.verdict_id]}
        return {**plan, "op": "fresh"}

    @staticmethod
    def _prompt(ctx: TaskContext, population: Population, generation: int, plan: dict[str, Any]) -> list[Message]:
        """A child's messages from its plan; its parents are members of the population."""
        outcomes = {m.outcome.verdict_id: m.outcome for island in population.islands for m in island}
        parents = [outcomes[vid].example() for vid in plan.get("parents", [])]
        opening = ctx.opening(generation)
        if plan["op"] == "fresh":
            return opening
        if plan["op"] == "crossover":
            return ctx.coder.directed(opening, "crossover", first=parents[0], second=parents[1])
        return ctx.coder.directed(opening, "mutation", parent=parents[0])


def _plan_key(generation: int) -> str:
    return f"child/{generation}"
