"""The judge service's job queue: the candidates submitted to it, claimed by its dispatchers one at a time."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class JobRow:
    """A candidate submitted to the judge service: queued, running, done (with its verdict) or failed."""

    id: int
    client_key: str | None
    status: str
    task_key: str
    task: dict[str, Any]  # the task as resolved at submission, source included
    source: str
    fresh: bool  # judge again even if an equal candidate has a verdict
    verdict_id: int | None
    reused: bool  # the verdict is an earlier one of an equal candidate
    error: str | None
    claims: int  # times a dispatcher took it (more than one after a restart)
    created_at: float
    started_at: float | None
    finished_at: float | None

    @classmethod
    def from_row(cls, r: sqlite3.Row) -> "JobRow":
        d = dict(r)
        task = json.loads(d.pop("task_json"))
        return cls(**{**d, "fresh": bool(d["fresh"]), "reused": bool(d["reused"])}, task=task)


class JobTables:
    """Mixed into Store, whose `_exec` and `_query` these methods use."""

    _exec: Callable[..., sqlite3.Cursor]
    _query: Callable[..., list[sqlite3.Row]]

    def add_job(self, task_key: str, task: dict[str, Any], source: str, *, client_key: str | None = None,
                fresh: bool = False) -> tuple[JobRow, bool]:
        """Queue a job; with a `client_key` already used, the job it named instead. Returns (job, created)."""
        cur = self._exec("INSERT INTO jobs (client_key, status, task_key, task_json, source, fresh, created_at) "
                         "VALUES (?,?,?,?,?,?,?) ON CONFLICT(client_key) DO NOTHING",
                         (client_key, "queued", task_key, json.dumps(task), source, int(fresh), time.time()))
        if cur.rowcount == 1:
            return self.job(int(cur.lastrowid)), True
        rows = self._query("SELECT * FROM jobs WHERE client_key=?", (client_key,))
        return JobRow.from_row(rows[0]), False

    def claim_job(self) -> JobRow | None:
        """Mark the oldest queued job running and return it; None when none is queued. The update is conditional
        on the job still being queued, so no two claimers (threads or processes) get the same job."""
        while True:
            rows = self._query("SELECT id FROM jobs WHERE status='queued' ORDER BY id LIMIT 1")
            if not rows:
                return None
            cur = self._exec("UPDATE jobs SET status='running', started_at=?, claims=claims+1 WHERE id=? AND status='queued'",
                             (time.time(), rows[0][0]))
            if cur.rowcount == 1:
                return self.job(rows[0][0])

    def finish_job(self, job_id: int, verdict_id: int, *, reused: bool = False) -> None:
        self._exec("UPDATE jobs SET status='done', verdict_id=?, reused=?, finished_at=? WHERE id=? AND status='running'",
                   (verdict_id, int(reused), time.time(), job_id))

    def fail_job(self, job_id: int, error: str) -> None:
        self._exec("UPDATE jobs SET status='failed', error=?, finished_at=? WHERE id=? AND status='running'",
                   (error, time.time(), job_id))

    def requeue_running_jobs(self) -> int:
        """Put jobs left running (by a service that stopped or was killed) back in the queue; how many."""
        return self._exec("UPDATE jobs SET status='queued', started_at=NULL WHERE status='running'").rowcount

    def job(self, job_id: int) -> JobRow:
        rows = self._query("SELECT * FROM jobs WHERE id=?", (job_id,))
        if not rows:
            raise KeyError(f"no job {job_id}")
        return JobRow.from_row(rows[0])

    def jobs(self, status: str | None = None) -> list[JobRow]:
        rows = self._query("SELECT * FROM jobs" + (" WHERE status=?" if status else "") + " ORDER BY id",
                           (status,) if status else ())
        return [JobRow.from_row(r) for r in rows]

    def job_counts(self) -> dict[str, int]:
        """Jobs by status."""
        return {r[0]: int(r[1]) for r in self._query("SELECT status, count(*) FROM jobs GROUP BY status")}

    def job_judge_errors(self) -> dict[str, int]:
        """Finished jobs whose verdict is a judge_error (the judge's own failure), by the verdict's message."""
        rows = self._query("SELECT v.verdict_json FROM jobs j JOIN verdicts v ON v.id = j.verdict_id "
                           "WHERE j.status='done' AND v.status='judge_error'")
        causes: dict[str, int] = {}
        for r in rows:
            message = json.loads(r[0]).get("message", "")
            causes[message] = causes.get(message, 0) + 1
        return causes
