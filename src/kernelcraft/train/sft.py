"""SFT export: the store's trajectories as chat-format records, one per role and turn, each the prompt
the role saw followed by the reply it gave, for a cold start on what worked.

Only successes count: a coder turn whose verdict is correct and carries no flag (a flag asks a person
to look); a selector's or planner's reply whose coder turns reached such a success; a summarizer's
reply of which the library admitted a skill. Of the successes, near-duplicate kernels of a task are
dropped (the fastest of each cluster stays), and a cap per task and role keeps the fastest. The
summary says why every record that was left out went."""

from __future__ import annotations

import json
import shutil
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import datasets

from ..agents import parse_choices
from ..judge import Verdict
from ..llm import RecordingError, read_call
from ..search import is_verification
from ..search.branch import FALLBACK_IDEA
from ..search.strategy import LLM_ERROR
from ..store import AttemptRow, LLMCallRow, Store
from .dedup import near_duplicates
from .sft_types import (EXPORT_ROLES, REASONS, DropReason, ExportRole, ExportSummary, RecordVerdict, RoleCounts, SFTExportConfig,
                        SFTExportError, SFTRecord, TaskCounts)

DATASET_DIR, JSONL_FILE, SUMMARY_FILE = "dataset", "sft.jsonl", "summary.json"


@dataclass
class Candidate:
    """One role's turn on its way to a record; `reason` says why it was left out (None: kept)."""

    role: ExportRole
    task: str
    run: str
    reason: DropReason | None = None
    record: SFTRecord | None = None
    source: str | None = None  # a coder turn's kernel, for the near-duplicate filter

    @property
    def speedup(self) -> float:
        return (self.record.verdict.speedup or 0.0) if self.record is not None else 0.0


@dataclass(frozen=True)
class CallText:
    """A recorded model call as files: the messages sent, the reply, and which sample of the request it was."""

    call: LLMCallRow
    messages: list[dict[str, str]]
    reply: str
    sample: int

    @property
    def task(self) -> str:
        return self.call.task_key

    def record(self, role: ExportRole, turn: int, sample: int, run: str, verdict: RecordVerdict) -> SFTRecord:
        return SFTRecord(messages=[*self.messages, {"role": "assistant", "content": self.reply}], task=self.call.task_key,
                         role=role, turn=turn, sample=sample, run=run, model=self.call.model, verdict=verdict)


class _Unreadable(Exception):
    def __init__(self, reason: DropReason) -> None:
        super().__init__(reason)
        self.reason: DropReason = reason


def call_text(store: Store, call: LLMCallRow | None) -> CallText:
    """A call's prompt and reply from its files (`llm.read_call`); raises _Unreadable with the reason when one is missing."""
    if call is None:
        raise _Unreadable("no_reply")
    files = store.call_files(call)
    if not files.answered:
        raise _Unreadable("no_reply")
    try:
        recorded = read_call(files)
    except RecordingError:
        raise _Unreadable("no_prompt") from None
    if recorded.reply is None:  # gone since it was found
        raise _Unreadable("no_reply")
    messages = [{"role": m.role, "content": m.content} for m in recorded.messages]
    return CallText(call, messages, recorded.reply, recorded.sample)


def _picked(reply: str, skills: list[str]) -> bool:
    """Whether a selector's reply picked exactly `skills`, read as the search read it (the first k known names)."""
    return [c.name for c in parse_choices(reply, set(skills), len(skills))] == skills


@dataclass(frozen=True)
class Judged:
    """Whether a coder turn is a success: its effective speedup if so, else why not."""

    attempt: AttemptRow
    reason: DropReason | None
    speedup: float | None = None


class Collector:
    """Every role's turns of one run as candidates, the success filter applied."""

    def __init__(self, store: Store, roles: Iterable[ExportRole]) -> None:
        self.store = store
        self.roles = set(roles)
        self._verdicts: dict[int, Verdict] = {}  # attempts (of any run) that reused a verdict share it

    def collect(self, run_id: str) -> list[Candidate]:
        attempts = self.store.attempts(run_id)
        calls = self.store.llm_calls(run_id=run_id)
        by_id = {c.id: c for c in calls}
        judged = [self._judge(a) for a in attempts]
        # what a selection, plan or summary led to: the search's own coder turns, not a skill's verification
        wins = [j for j in judged if j.reason is None and not is_verification(j.attempt)]
        found = []
        if "coder" in self.roles:
            found += [self._coder(run_id, j, by_id) for j in judged]
        for role, link in (("selector", self._selectors), ("planner", self._planners), ("summarizer", self._summaries)):
            if role in self.roles:
                texts, dropped = self._latest_replies(run_id, role, [c for c in calls if c.purpose == role])
                found += dropped + link(run_id, texts, wins)
        return found

    def _judge(self, attempt: AttemptRow) -> Judged:
        if attempt.status == LLM_ERROR:
            return Judged(attempt, "no_reply")
        if attempt.llm_call_id is None:
            return Judged(attempt, "no_model_call")
        if attempt.verdict_id is None:
            return Judged(attempt, "failed")
        if attempt.verdict_id not in self._verdicts:
            self._verdicts[attempt.verdict_id] = self.store.verdict(attempt.verdict_id)
        verdict = self._verdicts[attempt.verdict_id]
        if not verdict.correct or verdict.effective_speedup is None:
            return Judged(attempt, "failed")
        if verdict.flags:
            return Judged(attempt, "flagged")
        return Judged(attempt, None, verdict.effective_speedup)

    def _coder(self, run_id: str, judged: Judged, calls: dict[int, LLMCallRow]) -> Candidate:
        a = judged.attempt
        found = Candidate("coder", a.task_key, run_id, judged.reason)
        if judged.reason is not None or a.llm_call_id is None:
            return found
        try:
            text = call_text(self.store, calls.get(a.llm_call_id))
        except _Unreadable as e:
            found.reason = e.reason
            return found
        assert a.verdict_id is not None  # a success has a verdict
        found.source = self.store.candidate_source(a.verdict_id)
        found.record = text.record("coder", a.turn, a.sample, run_id, RecordVerdict(status="correct", speedup=judged.speedup))
        return found

    def _latest_replies(self, run_id: str, role: ExportRole, calls: list[LLMCallRow]) -> tuple[list[CallText], list[Candidate]]:
        """A role's readable replies, the last of each (task, sample), by task and sample; and the others, dropped."""
        dropped, latest = [], {}
        for call in calls:  # in id order: a resumed run's repeat comes later
            try:
                text = call_text(self.store, call)
            except _Unreadable as e:
                dropped.append(Candidate(role, call.task_key, run_id, e.reason))
                continue
            if latest.pop((text.task, text.sample), None) is not None:
                dropped.append(Candidate(role, text.task, run_id, "repeated"))
            latest[(text.task, text.sample)] = text
        return sorted(latest.values(), key=lambda t: (t.task, t.sample)), dropped

    @staticmethod
    def _linked(role: ExportRole, run_id: str, text: CallText, turn: int, wins: Iterable[Judged]) -> Candidate:
        """A reply that counts when one of the coder turns it led to is a success; its verdict is the best of them."""
        best = max((w.speedup for w in wins if w.speedup is not None), default=None)
        if best is None:
            return Candidate(role, text.task, run_id, "trajectory_failed")
        return Candidate(role, text.task, run_id,
                         record=text.record(role, turn, text.sample, run_id, RecordVerdict(status="correct", speedup=best)))

    def _selectors(self, run_id: str, texts: list[CallText], wins: list[Judged]) -> list[Candidate]:
        """The saved schemes of a task hold, in sample order, exactly the selections that picked something
        (search.skill_use.skill_schemes): the i-th such selection is scheme i + 1 of the coder's turns."""
        found = []
        for task in dict.fromkeys(t.task for t in texts):
            schemes = self.store.state(run_id, task, "schemes") or []
            matched = 0
            for text in (t for t in texts if t.task == task):
                if matched >= len(schemes) or not _picked(text.reply, schemes[matched]["skills"]):
                    found.append(Candidate("selector", task, run_id, "unlinked"))
                    continue
                matched += 1
                found.append(self._linked("selector", run_id, text, 0, (w for w in wins if w.attempt.task_key == task
                                                                        and w.attempt.meta.get("scheme") == matched)))
        return found

    def _planners(self, run_id: str, texts: list[CallText], wins: list[Judged]) -> list[Candidate]:
        """The plan of round r (its sample) leads to the round's implementations of its ideas, not of the
        fallback idea used when a plan had none."""
        return [self._linked("planner", run_id, t, t.sample,
                             (w for w in wins if w.attempt.task_key == t.task and w.attempt.meta.get("round") == t.sample
                              and w.attempt.meta.get("idea") not in (None, FALLBACK_IDEA))) for t in texts]

    def _summaries(self, run_id: str, texts: list[CallText], wins: list[Judged]) -> list[Candidate]:
        """A summary counts when the library admitted one of the skills drafted from it (a task has one summary a run)."""
        admitted: dict[str, list[float]] = defaultdict(list)
        for c in self.store.skill_candidates(run_id=run_id, status="admitted"):
            admitted[c.task_key].append(float(c.evidence.get("speedup_with") or 0.0))
        found = []
        for t in texts:
            if not admitted[t.task]:
                found.append(Candidate("summarizer", t.task, run_id, "not_admitted"))
                continue
            verdict = RecordVerdict(status="admitted", speedup=max(admitted[t.task]))
            found.append(Candidate("summarizer", t.task, run_id, record=t.record("summarizer", 0, t.sample, run_id, verdict)))
        return found


def drop_near_duplicates(candidates: list[Candidate], config: SFTExportConfig) -> None:
    """Among a task's kept coder turns, mark each near-duplicate of a faster one (of equals, the earlier stays)."""
    by_task: dict[str, list[Candidate]] = defaultdict(list)
    for c in candidates:
        if c.role == "coder" and c.reason is None and c.source is not None:
            by_task[c.task].append(c)
    for group in by_task.values():
        ranked = sorted(group, key=lambda c: -c.speedup)  # stable: equals keep their order
        matches = near_duplicates([c.source or "" for c in ranked], config.similarity, shingle=config.shingle,
                                  num_perm=config.num_perm)
        for c, match in zip(ranked, matches):
            if match is not None:
                c.reason = "near_duplicate"


def cap_per_task(candidates: list[Candidate], limit: int | None) -> None:
    """Keep the `limit` fastest kept records of each task and role; mark the rest."""
    if limit is None:
        return
    groups: dict[tuple[str, str], list[Candidate]] = defaultdict(list)
    for c in candidates:
        if c.reason is None:
            groups[(c.task, c.role)].append(c)
    for group in groups.values():
        for c in sorted(group, key=lambda c: -c.speedup)[limit:]:
            c.reason = "over_cap"


def summarize(candidates: list[Candidate], successes: Counter[str], runs: list[str], out: Path,
              config: SFTExportConfig) -> ExportSummary:
    """Counts kept and dropped by reason, per role and per task (`successes`: a task's records that passed the
    success filter, before the near-duplicate filter and the cap)."""
    roles: dict[str, RoleCounts] = {}
    tasks: dict[str, TaskCounts] = {}
    for c in candidates:
        role = roles.setdefault(c.role, RoleCounts())
        task = tasks.setdefault(c.task, TaskCounts(successes=successes[c.task]))
        role.considered += 1
        task.before += 1
        if c.reason is None:
            role.kept += 1
            task.after += 1
        else:
            role.dropped[c.reason] = role.dropped.get(c.reason, 0) + 1
    dropped = Counter(c.reason for c in candidates if c.reason is not None)
    return ExportSummary(out=str(out), runs=runs, config=config, considered=len(candidates), kept=sum(r.kept for r in roles.values()),
                         dropped=dict(dropped.most_common()), reasons={r: REASONS[r] for r in dropped},
                         roles={r: roles[r] for r in EXPORT_ROLES if r in roles}, tasks=dict(sorted(tasks.items())))


def export_runs(store: Store, config: SFTExportConfig) -> list[str]:
    """The runs to export: those named, or every run of the workspace."""
    known = [r.id for r in store.runs()]
    missing = [r for r in config.runs if r not in known]
    if missing:
        raise SFTExportError(f"no run {', '.join(map(repr, missing))} in {store.path}")
    runs = config.runs or known
    if not runs:
        raise SFTExportError(f"no runs in {store.path}")
    return runs


def export_sft(store: Store, out: Path, config: SFTExportConfig) -> ExportSummary:
    """Write the runs' successful turns as `out/sft.jsonl`, a `datasets` dataset in `out/dataset`, and the
    summary as `out/summary.json`. Raises SFTExportError when a run is unknown or nothing is left."""
    runs = export_runs(store, config)
    collector = Collector(store, config.roles)
    candidates = [c for run in runs for c in collector.collect(run)]
    successes = Counter(c.task for c in candidates if c.reason is None)
    drop_near_duplicates(candidates, config)
    cap_per_task(candidates, config.max_per_task)
    summary = summarize(candidates, successes, runs, out, config)
    records = [c.record for c in candidates if c.reason is None and c.record is not None]
    if not records:
        why = ", ".join(f"{n} {reason}" for reason, n in summary.dropped.items()) or "no turns of the chosen roles"
        raise SFTExportError(f"nothing to export from {len(runs)} run(s): {why}")
    write_export(out, records, summary)
    return summary


def write_export(out: Path, records: list[SFTRecord], summary: ExportSummary) -> None:
    """The records as JSON lines and as a dataset `datasets.load_from_disk` reads; the summary beside them."""
    out.mkdir(parents=True, exist_ok=True)
    rows = [r.model_dump(mode="json") for r in records]
    (out / JSONL_FILE).write_text("".join(json.dumps(row) + "\n" for row in rows))
    if (out / DATASET_DIR).exists():  # an earlier export's shards must not outlive it
        shutil.rmtree(out / DATASET_DIR)
    quiet = datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()  # a bar for a write of a second is noise beside the summary
    try:
        datasets.Dataset.from_list(rows).save_to_disk(str(out / DATASET_DIR))
    finally:
        if not quiet:
            datasets.enable_progress_bars()
    (out / SUMMARY_FILE).write_text(summary.model_dump_json(indent=1))
