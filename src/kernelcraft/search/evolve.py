"""Strategy `evolve` (program evolution in the manner of AlphaEvolve's open descendants): islands of
kernels, each child made by a mutation prompt (edit one parent) or a crossover prompt (combine
two), parents chosen with weight by fitness (speedup), a diversity archive keeping the best kernel
of every cell of (language, techniques used, speedup band), and periodic migration of each
island's best to the next island. Children are made asynchronously: `parallel` of them are in
flight at once, each choosing its parents from the population as it stands. A resumed run
rebuilds the islands and the archive from the recorded children and goes on."""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from typing import Any

from ..llm import Message
from .features import archive_cell
from .strategy import Outcome, TaskContext, register, run_parallel


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


@register("evolve")
class Evolve:
    def run(self, ctx: TaskContext) -> None:
        options = ctx.config.evolve
        population = Population([[] for _ in range(options.islands)])
        recorded = sorted((a for a in ctx.prior if "verify" not in a.meta), key=lambda a: a.sample)
        for a in recorded:
            population.add(Member(a.sample, int(a.meta.get("island", 0)) % options.islands, ctx.outcome_of(a)),
                           options.migrate_every)
        lock = threading.Lock()
        state = {"next": max((a.sample for a in recorded), default=-1) + 1, "left": options.generations - len(recorded)}

        def worker() -> None:
            while True:
                with lock:
                    if state["left"] <= 0 or ctx.stop.is_set():
                        return
                    state["left"] -= 1
                    generation = state["next"]
                    state["next"] += 1
                    island = generation % options.islands
                    messages, meta = self._child_prompt(ctx, population, generation, island)
                outcome = ctx.attempt(generation, 0, messages, meta)
                with lock:
                    population.add(Member(generation, island, outcome), options.migrate_every)

        run_parallel([worker] * min(options.parallel, max(1, state["left"])), "evolve")

    def _child_prompt(self, ctx: TaskContext, population: Population, generation: int,
                      island: int) -> tuple[list[Message], dict[str, Any]]:
        options = ctx.config.evolve
        rng = random.Random(f"{ctx.config.seed}/{ctx.task.key}/{generation}")
        opening = ctx.opening(generation)
        members = population.islands[island]
        correct = [m for m in members if m.outcome.correct]
        meta: dict[str, Any] = {"island": island}
        if correct and population.archive and rng.random() < options.archive_pick:
            parent = rng.choice(list(population.archive.values()))  # diversity: any cell, uniformly
            return (ctx.coder.directed(opening, "mutation", parent=parent.outcome.example()),
                    {**meta, "op": "mutation", "from": "archive", "parents": [parent.outcome.verdict_id]})
        if len(correct) >= 2 and rng.random() < options.crossover:
            a = weighted_pick(correct, rng)
            b = weighted_pick(correct, rng, exclude=a)
            if a.outcome.source != b.outcome.source:
                return (ctx.coder.directed(opening, "crossover", first=a.outcome.example(), second=b.outcome.example()),
                        {**meta, "op": "crossover", "parents": [a.outcome.verdict_id, b.outcome.verdict_id]})
        if correct:
            parent = weighted_pick(correct, rng)
            return (ctx.coder.directed(opening, "mutation", parent=parent.outcome.example()),
                    {**meta, "op": "mutation", "parents": [parent.outcome.verdict_id]})
        failed = [m for m in members if m.outcome.source is not None]
        if failed:  # nothing correct yet on this island: repair the latest attempt, with the judge's words
            parent = failed[-1]
            return (ctx.coder.directed(opening, "mutation", parent=parent.outcome.example()),
                    {**meta, "op": "repair", "parents": [parent.outcome.verdict_id]})
        return opening, {**meta, "op": "fresh"}
