"""Skills in a search: before a task, the schemes (BM25 recall, then the selector's picks, plus the
scheme without skills); after it, learning: a trajectory that improved enough is summarized into
candidate skills, and each candidate is verified by regenerating the task's kernel with and
without it. Only a candidate the judge's numbers favour is admitted to the library."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..agents import KernelExample, Selection, SkillSelector, SkillSummarizer
from ..llm import LLMError
from ..skills import Evidence, Skill, SkillLibrary, decide, recall, task_query
from ..store import AttemptRow
from .refine import converse
from .strategy import Outcome, SkillScheme, TaskContext, run_parallel

# Verification attempts are recorded beside the strategy's own, under sample numbers no strategy uses.
VERIFY_BASE = 1_000_000
VERIFY_STRIDE = 1_000


@dataclass(frozen=True)
class Verification:
    candidate_id: int
    skill: Skill
    admitted: bool
    reason: str
    evidence: Evidence
    snapshot: int | None  # the snapshot that admitted it


def skill_schemes(ctx: TaskContext, skills: list[Skill], selector: SkillSelector) -> list[SkillScheme]:
    """Scheme 0 without skills, then one per selector call that picked something (the calls go out
    together: with batch replies, one round). Saved, so a resumed task shows its samples the same skills."""
    by_name = {s.name: s for s in skills}
    saved = ctx.saved("schemes")
    if saved is None:
        options = ctx.config.skills
        recalled = recall(skills, task_query(ctx.task), options.recall)

        def select(i: int) -> Selection | None:
            try:
                return ctx.guarded(lambda: selector.select(ctx.task, recalled, options.k, sample=i))
            except LLMError:  # a failed selection is one scheme fewer, not a failed task
                return None

        selections = run_parallel([lambda i=i: select(i) for i in range(options.schemes if recalled else 0)], "select")
        saved = [{"skills": [c.name for c in sel.choices], "reasons": [c.reason for c in sel.choices]}
                 for sel in selections if sel is not None and sel.choices]
        ctx.save("schemes", saved)
    schemes = [SkillScheme(0)]
    for entry in saved:
        picked = tuple(by_name[n] for n in entry["skills"] if n in by_name)
        schemes.append(SkillScheme(len(schemes), picked, tuple(entry["reasons"])))
    return schemes


def is_verification(attempt: AttemptRow) -> bool:
    return "verify" in attempt.meta


def trajectories(attempts: list[AttemptRow], strategy: str) -> list[list[AttemptRow]]:
    """refine: each sample's turns; other strategies: the whole search, round by round."""
    own = [a for a in attempts if not is_verification(a)]
    if strategy == "refine":
        samples = sorted({a.sample for a in own})
        return [sorted((a for a in own if a.sample == s), key=lambda a: a.turn) for s in samples]
    return [sorted(own, key=lambda a: (a.turn, a.sample))]


def improvement(trajectory: list[AttemptRow]) -> tuple[AttemptRow, AttemptRow] | None:
    """The first correct attempt and the best one after it, when there are both."""
    correct = [a for a in trajectory if a.status == "correct" and a.speedup is not None]
    if not correct:
        return None
    first = correct[0]
    best = max(correct, key=lambda a: a.speedup)
    return (first, best) if best is not first else None


class SkillLearner:
    def __init__(self, library: SkillLibrary, summarizer: SkillSummarizer) -> None:
        self.library = library
        self.summarizer = summarizer

    def learn(self, ctx: TaskContext) -> list[Verification]:
        """Summarize the task's best improving trajectory (if it improved enough) and verify the drafts.
        Done once per task: a resumed run verifies the drafts it saved and does not summarize again."""
        options = ctx.config.skills
        drafts = ctx.saved("drafts")
        if drafts is None:
            drafts = self._summarize(ctx)
            if drafts is None:
                return []
            ctx.save("drafts", drafts)
        decided = {c.id: c for c in ctx.store.skill_candidates(run_id=ctx.run_id) if c.status != "pending"}
        results = []
        without: list[Outcome] | None = None  # one arm without skills serves every candidate of the task
        for i, entry in enumerate(drafts):
            skill = Skill.model_validate(entry["skill"])
            if (row := decided.get(entry["candidate_id"])) is not None:  # decided before a stop: not again
                results.append(Verification(row.id, skill, row.status == "admitted", row.reason,
                                            Evidence.model_validate(row.evidence), row.snapshot))
                continue
            if without is None:
                without = self.arm(ctx, VERIFY_BASE, (), "without", options.verify_samples, options.verify_turns)
            results.append(self.verify(ctx, skill, i, entry["candidate_id"], options.verify_samples, options.verify_turns,
                                       without))
        return results

    def _summarize(self, ctx: TaskContext) -> list[dict[str, Any]] | None:
        options = ctx.config.skills
        attempts = ctx.store.attempts(ctx.run_id, ctx.task.key)
        gains = [g for t in trajectories(attempts, ctx.config.strategy) if (g := improvement(t)) is not None
                 and options.policy.improved(g[0].speedup, g[1].speedup)]
        if not gains:
            return []
        first, best = max(gains, key=lambda g: g[1].speedup / g[0].speedup)
        examples = [KernelExample(ctx.store.candidate_source(a.verdict_id), a.speedup, a.feedback) for a in (first, best)]
        try:
            summary = ctx.guarded(lambda: self.summarizer.summarize(ctx.task, examples[0], examples[1], options.max_new))
        except LLMError:  # nothing learned from this task; the search's results stand
            return None
        drafts = []
        for d in summary.drafts:
            skill = Skill(name=d.name, description=d.description, scope=d.scope, tags=d.tags, content=d.content,
                          origin="summarized")
            cid = ctx.store.record_skill_candidate(skill.model_dump(mode="json"), "pending", "awaiting verification",
                                                   run_id=ctx.run_id, task_key=ctx.task.key,
                                                   evidence={"first": [first.verdict_id, first.speedup],
                                                             "best": [best.verdict_id, best.speedup]})
            drafts.append({"skill": skill.model_dump(mode="json"), "candidate_id": cid})
        return drafts

    @staticmethod
    def arm(ctx: TaskContext, base: int, skills: tuple[Skill, ...], label: str, samples: int, turns: int) -> list[Outcome]:
        """`samples` regenerations of the task's kernel with exactly `skills` in the prompt."""
        opening = ctx.coder.opening(ctx.task, ctx.rules, skills)
        runs = run_parallel([lambda s=s: converse(ctx, base + s, opening, turns, {"verify": label})
                             for s in range(samples)], "verify")
        return [o for r in runs for o in r]

    def verify(self, ctx: TaskContext, skill: Skill, index: int, candidate_id: int, samples: int, turns: int,
               without: list[Outcome] | None = None) -> Verification:
        """Regenerate the task's kernel with the skill (and, unless given, without any skill), compare the
        best correct speedups, admit or reject with the numbers."""
        if without is None:
            without = self.arm(ctx, VERIFY_BASE, (), "without", samples, turns)
        with_ = self.arm(ctx, VERIFY_BASE + VERIFY_STRIDE * (index + 1), (skill,), skill.name, samples, turns)
        best_with, best_without = _best(with_), _best(without)
        evidence = Evidence(task=ctx.task.key, device=ctx.coder.device.name, run_id=ctx.run_id,
                            speedup_with=best_with.speedup if best_with else None,
                            speedup_without=best_without.speedup if best_without else None,
                            verdict_with=best_with.verdict_id if best_with else None,
                            verdict_without=best_without.verdict_id if best_without else None)
        decision = decide(ctx.config.skills.policy, evidence)
        snapshot = None
        if decision.admitted:
            snapshot = self.library.put([skill.model_copy(update={"evidence": [*skill.evidence, evidence]})],
                                        f"admitted {skill.name} (run {ctx.run_id}, task {ctx.task.key}): {decision.reason}")
        ctx.store.decide_skill_candidate(candidate_id, "admitted" if decision.admitted else "rejected", decision.reason,
                                         evidence.model_dump(mode="json"), snapshot)
        return Verification(candidate_id, skill, decision.admitted, decision.reason, evidence, snapshot)


def _best(outcomes: list[Outcome]) -> Outcome | None:
    return max((o for o in outcomes if o.correct), key=lambda o: o.speedup, default=None)
