"""One optimization run gathered from the store into plain dataclasses for the HTML report.

Nothing here measures: every number is a verdict, an attempt or a model call the store recorded."""

from __future__ import annotations

import shlex
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..judge import KernelProfile, Status, Verdict
from ..search import REPEATED, OptimizeConfig, best_attempt, repeat_note
from ..settings import to_toml
from ..store import AttemptRow, LLMCallRow, RunRow, SkillCandidateRow, Store
from .metrics import Summary, TaskOutcome, baseline_ratios, geomean, judge_error_cause, summarize_per_device
from .page import REPLY_INLINE_CHARS

CORRECT = "correct"
JUDGE_ERROR = Status.JUDGE_ERROR.value
REASON_CHARS = 160  # a failure reason fits one terminal line


@dataclass(frozen=True)
class CallTotals:
    """What a set of model calls used: tokens, money and time."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None  # the sum over priced calls; None when no call had a price
    unpriced_calls: int = 0  # calls that got a reply but whose model had no known price
    latency_s: float = 0.0

    @classmethod
    def of(cls, rows: list[LLMCallRow]) -> "CallTotals":
        priced = [r.cost_usd for r in rows if r.cost_usd is not None]
        return cls(calls=len(rows), prompt_tokens=sum(r.prompt_tokens for r in rows),
                   completion_tokens=sum(r.completion_tokens for r in rows),
                   cost_usd=sum(priced) if priced else None,
                   # a failed call has no reply and so no cost: it leaves the total exact
                   unpriced_calls=sum(1 for r in rows if r.cost_usd is None and r.error is None),
                   latency_s=sum(r.latency_s or 0.0 for r in rows))


@dataclass(frozen=True)
class AttemptReport:
    """One turn of one sample: its status, effective speedup, feedback, and the verdict (with any kernel profile) when
    the judge ran."""

    sample: int
    turn: int
    status: str  # a verdict status, or "parse_failed"
    speedup: float | None  # effective speedup of a correct candidate
    feedback: str
    verdict_id: int | None
    verdict: Verdict | None
    llm_call_id: int | None
    created_at: float
    meta: dict[str, Any] = field(default_factory=dict)  # the strategy's note on this attempt
    kernels: KernelProfile | None = None  # the verdict's kernel profile, when one was taken
    source: str | None = None  # the candidate judged (None: the reply held none)
    # The model's whole reply, where it is short enough for the page to show (page.REPLY_INLINE_CHARS); None for a
    # longer one (the page links `reply_file`), a source the strategy wrote, or a failed call.
    reply: str | None = None
    duplicate_of: tuple[int, int] | None = None  # (sample, turn) of the earlier attempt whose verdict this one reuses
    reply_file: Path | None = None  # the file the run recorded the reply in
    reply_bytes: int = 0

    @property
    def correct(self) -> bool:
        return self.status == CORRECT and self.speedup is not None

    @property
    def reason(self) -> str:
        """Why this attempt is no result, in one line: its status and the judge's message (or, for a reply that held
        no usable candidate, what was wrong with it)."""
        if self.correct:
            return CORRECT
        text = self.verdict.message if self.verdict is not None else self.meta.get("parse_error") or self.feedback
        line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
        return f"{self.status}: {line[:REASON_CHARS]}" if line else self.status

    @property
    def how(self) -> str:
        """How the strategy made this attempt, in a phrase: the idea, the evolutionary operator, the
        exemplars shown, the skill scheme, or the skill verification it belongs to."""
        m = self.meta
        parts = []
        if "verify" in m:
            parts.append("skill verification, " + ("without skills" if m["verify"] == "without" else f"with {m['verify']}"))
        if "idea" in m:
            parts.append(f"round {m.get('round', self.turn) + 1}: {m['idea']}")
        if "op" in m:
            parents = ", ".join(f"#{p}" for p in m.get("parents", []) if p is not None)
            parts.append(f"island {m.get('island', 0)}: {m['op']}" + (f" of {parents}" if parents else "")
                         + (" (from the archive)" if m.get("from") == "archive" else ""))
        if "stage" in m and "name" in m:
            parts.append(f"template {m['name']}, {m['stage']} timing")
        if "exemplars" in m:
            shown = " and ".join(f"{s:.2f}x" for _, s in m["exemplars"])
            parts.append(f"contrasting {shown}; answered {len(m.get('sections', []))} of 3 parts")
        if "scheme" in m:
            parts.append(f"skill scheme {m['scheme']}" if m["scheme"] else "no skills")
        return "; ".join(parts)


@dataclass(frozen=True)
class TaskReport:
    """One task of the run: every attempt, the best correct one (or None) and what the model calls cost."""

    key: str
    name: str
    level: int | None
    finished: bool
    attempts: list[AttemptReport]
    best: AttemptReport | None
    best_source: str | None
    reference_source: str
    usage: CallTotals
    baseline_ratios: dict[str, float]  # each baseline's recorded time / eager (strict)'s, on the best verdict's device
    schemes: list[dict[str, Any]] = field(default_factory=list)  # the skill schemes the selector chose
    # The causes of the run's judge_error verdicts on this task, oldest first: evaluations the judge failed on its own
    # side (the search parks such a step and records no attempt; --resume judges it again).
    judge_errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # samples that ended early, and why (search/repeats.py)

    @property
    def anchor(self) -> str:
        """An HTML id for this task's section."""
        return "task-" + "".join(c if c.isalnum() or c in "-_" else "-" for c in self.key)

    @property
    def correct_attempts(self) -> int:
        return sum(1 for a in self.attempts if a.correct)

    @property
    def last_failure(self) -> str | None:
        """The reason the latest attempt that was no result failed (None when every attempt was correct, or none was made)."""
        failed = [a for a in self.attempts if not a.correct]
        return max(failed, key=lambda a: a.created_at).reason if failed else None

    @property
    def not_judged(self) -> str | None:
        """The cause when the judge failed on its own side on this task and judged none of its candidates: the task
        is left out of the summary's denominators. One candidate judged (correct or not) makes it count."""
        judged = any(a.verdict is not None and a.status != JUDGE_ERROR for a in self.attempts)
        return self.judge_errors[0] if self.judge_errors and not judged else None

    def outcome(self) -> TaskOutcome:
        """The task in the run's summaries, under the device its best verdict was measured on."""
        device_name = str(self.best.verdict.env.get("device_name", "")) if self.best and self.best.verdict else ""
        return TaskOutcome(self.key, self.level, self.best is not None, self.best.speedup if self.best else None,
                           self.baseline_ratios, self.not_judged, device_name)


@dataclass(frozen=True)
class TurnPoint:
    """The state of the run after turn `turn` on every task."""

    turn: int
    geomean: float | None  # geometric mean of each solved task's best speedup at turns <= turn
    solved: int  # tasks with a correct candidate at turns <= turn


@dataclass(frozen=True)
class RunReport:
    """Everything the HTML report shows about one run."""

    run: RunRow
    config: OptimizeConfig | None  # None for a run of another kind
    model: str
    tasks: list[TaskReport]
    summary: Summary  # of the device most tasks were judged on
    turns: list[TurnPoint]
    usage: CallTotals
    wall_s: float | None  # started to finished, or to the last attempt of an unfinished run
    skill_candidates: list[SkillCandidateRow] = field(default_factory=list)  # summarized skills and their admission
    other_devices: list[Summary] = field(default_factory=list)  # the run's other devices, summarized apart
    workspace: str = ""
    environment: dict[str, str] = field(default_factory=dict)  # what the verdicts ran with: torch, CUDA, compilers, device

    @property
    def resume_command(self) -> str:
        return shlex.join(["kernelcraft", "optimize", "--resume", self.run.id, "-w", self.workspace])

    @property
    def settings_changed(self) -> str:
        """The run's settings that differ from the defaults, as a run file's lines."""
        return to_toml(self.config.model_dump(mode="json", exclude_defaults=True)) if self.config else ""

    @property
    def settings_file(self) -> str:
        """Every setting of the run, as a run file: `kernelcraft optimize --config run.toml` runs it again."""
        return to_toml(self.config.model_dump(mode="json")) if self.config else ""

    @property
    def finished(self) -> bool:
        return self.run.finished_at is not None

    @property
    def strategy(self) -> str:
        return self.config.search.strategy if self.config else ""

    @property
    def skills_snapshot(self) -> int | None:
        """The library snapshot the run's selector used; None when the run did not use skills."""
        return self.config.search.skills.snapshot if self.config and self.config.search.skills.enabled else None

    @property
    def device(self) -> str:
        return self.config.device if self.config else ""

    @property
    def best_speedups(self) -> list[float]:
        """The best effective speedup of every task that has a correct candidate, in task order."""
        return [t.best.speedup for t in self.tasks if t.best is not None and t.best.speedup is not None]

    @property
    def evaluations_not_judged(self) -> dict[str, int]:
        """The run's judge_error verdicts by cause, on every task (those that count as judged too)."""
        return dict(Counter(cause for t in self.tasks for cause in t.judge_errors))


def turn_series(tasks: list[TaskReport]) -> list[TurnPoint]:
    """Best speedup so far by turn, over the tasks solved by then."""
    by_turn: dict[int, list[tuple[str, AttemptReport]]] = defaultdict(list)
    for t in tasks:
        for a in t.attempts:
            by_turn[a.turn].append((t.key, a))
    if not by_turn:
        return []
    best: dict[str, AttemptReport] = {}  # each task's best so far: the best of its earlier best and a turn's attempts
    points = []
    for turn in range(min(by_turn), max(by_turn) + 1):
        for key, a in by_turn.get(turn, []):
            found = best_attempt([*([best[key]] if key in best else []), a])
            if found is not None:
                best[key] = found
        bests = [b.speedup for b in best.values() if b.speedup is not None]
        points.append(TurnPoint(turn=turn, geomean=geomean(bests), solved=len(bests)))
    return points


def _reply(store: Store, call: LLMCallRow | None) -> tuple[str | None, Path | None, int]:
    """A call's reply as the page takes it: its text where short enough to show, its file, its size in bytes."""
    files = store.call_files(call) if call is not None else None
    if call is None or files is None or files.reply is None or not files.reply.is_file():
        return None, None, 0
    size = files.reply.stat().st_size
    return (store.llm_reply(call.id) if size <= REPLY_INLINE_CHARS else None), files.reply, size


def _attempts(store: Store, rows: list[AttemptRow], calls: dict[int, LLMCallRow]) -> list[AttemptReport]:
    """A task's attempts, each with its source and reply, and marked where it reuses an earlier attempt's verdict (an
    equal source, up to comments and whitespace, is judged once). A verdict many attempts reuse is read once."""
    first: dict[int, tuple[int, int]] = {}
    judged: dict[int, tuple[Verdict, KernelProfile | None, str]] = {}
    attempts = []
    for row in sorted(rows, key=lambda r: r.created_at):
        vid = row.verdict_id
        earlier = first.setdefault(vid, (row.sample, row.turn)) if vid is not None else None
        if vid is not None and vid not in judged:
            judged[vid] = (store.verdict(vid), store.kernel_profile(vid), store.candidate_source(vid))
        verdict, kernels, source = judged[vid] if vid is not None else (None, None, None)
        reply, reply_file, reply_bytes = _reply(store, calls.get(row.llm_call_id) if row.llm_call_id is not None else None)
        attempts.append(AttemptReport(
            sample=row.sample, turn=row.turn, status=row.status, speedup=row.speedup, feedback=row.feedback, verdict_id=vid,
            verdict=verdict, llm_call_id=row.llm_call_id, created_at=row.created_at, meta=row.meta, kernels=kernels,
            source=source, reply=reply, duplicate_of=earlier if earlier != (row.sample, row.turn) else None,
            reply_file=reply_file, reply_bytes=reply_bytes))
    by_slot = {(a.sample, a.turn): a for a in attempts}
    return [by_slot[(r.sample, r.turn)] for r in rows]


def _notes(store: Store, run_id: str, task_key: str) -> list[str]:
    """Why samples of a task ended before their last turn: each that repeated one answer (search/repeats.py)."""
    saved = store.states(run_id, task_key, REPEATED)
    return [repeat_note(sample, turns) for sample, turns in sorted((int(k.removeprefix(REPEATED)), v) for k, v in saved.items())]


def _baseline_ratios(store: Store, task_key: str, best: AttemptReport | None) -> dict[str, float]:
    """The baselines' ratios on the device the best verdict ran on, as `eval-suite` takes them; only a correct
    task needs them."""
    if best is None or best.verdict is None:
        return {}
    return baseline_ratios(store.baselines(task_key, str(best.verdict.env.get("device_name", ""))))


def _judge_errors(store: Store, run_id: str, task_key: str) -> list[str]:
    """The causes of the run's judge_error verdicts on a task."""
    return [judge_error_cause(store.verdict(row.id).message) for row in store.verdicts(run_id=run_id, task_key=task_key)
            if row.status == JUDGE_ERROR]


def _config(args: dict[str, Any]) -> OptimizeConfig | None:
    try:
        return OptimizeConfig.model_validate(args)
    except ValidationError:
        return None


def _model(config: OptimizeConfig | None, calls: list[LLMCallRow]) -> str:
    if config is not None:
        return config.llm.model
    return ", ".join(sorted({c.model for c in calls})) or "unknown"


def load_run(store: Store, run_id: str) -> RunReport:
    """Gather run `run_id` from `store`: its tasks in order, each with attempts, verdicts and best candidate, the
    suite metrics over all of them against each recorded baseline (a task with no correct candidate counts as not
    fast; one the judge never judged is left out), and the model usage.

    Raises KeyError when the store has no such run."""
    run = store.run(run_id)
    calls = store.llm_calls(run_id=run_id)
    by_id = {c.id: c for c in calls}
    tasks = []
    for row in store.run_tasks(run_id):
        attempts = _attempts(store, store.attempts(run_id, row.task_key), by_id)
        best = best_attempt(attempts)
        tasks.append(TaskReport(
            key=row.task_key, name=row.name, level=row.level, finished=row.finished_at is not None, attempts=attempts,
            best=best, best_source=store.candidate_source(best.verdict_id) if best and best.verdict_id else None,
            reference_source=store.task_source(row.task_key),
            usage=CallTotals.of([c for c in calls if c.task_key == row.task_key]),
            baseline_ratios=_baseline_ratios(store, row.task_key, best),
            schemes=store.state(run_id, row.task_key, "schemes") or [], judge_errors=_judge_errors(store, run_id, row.task_key),
            notes=_notes(store, run_id, row.task_key)))
    last = max((a.created_at for t in tasks for a in t.attempts), default=None)
    end = run.finished_at if run.finished_at is not None else last
    config = _config(run.args)
    summaries = summarize_per_device("run", [t.outcome() for t in tasks])
    return RunReport(run=run, config=config, model=_model(config, calls), tasks=tasks,
                     summary=summaries[0], other_devices=summaries[1:], turns=turn_series(tasks),
                     usage=CallTotals.of(calls), wall_s=end - run.started_at if end is not None else None,
                     skill_candidates=store.skill_candidates(run_id=run_id), workspace=str(store.workspace.resolve()),
                     environment=_environment(tasks))


_ENVIRONMENT = {"device_name": "device", "capability": "compute capability", "cuda": "CUDA", "torch": "torch",
                "triton": "triton", "python": "python", "threads": "CPU threads", "judge_version": "judge"}


def _environment(tasks: list[TaskReport]) -> dict[str, str]:
    """What the run's first verdict ran with (every verdict of a run on one device shares it): device, versions,
    compilers."""
    env = next((a.verdict.env for t in tasks for a in t.attempts if a.verdict is not None and a.verdict.env), {})
    shown = {label: str(env[key]) for key, label in _ENVIRONMENT.items() if env.get(key) not in (None, "")}
    shown.update({f"compiler {name}": version for name, version in (env.get("compilers") or {}).items()})
    return shown
