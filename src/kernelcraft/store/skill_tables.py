"""The skill library's tables: immutable skill versions, snapshots (sets of versions), and the
candidates the summarizer proposed with the admission decision on each."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SnapshotRow:
    id: int
    parent: int | None
    reason: str
    created_at: float


@dataclass(frozen=True)
class SkillCandidateRow:
    id: int
    run_id: str | None
    task_key: str
    skill: dict[str, Any]
    status: str  # "admitted", "rejected" or "pending"
    reason: str
    evidence: dict[str, Any]
    snapshot: int | None  # the snapshot that admitted it
    created_at: float


class SkillTables:
    """Mixed into Store, whose `_exec` and `_query` these methods use."""

    _exec: Callable[..., sqlite3.Cursor]
    _query: Callable[..., list[sqlite3.Row]]

    def put_skill_version(self, name: str, version: int, skill: dict[str, Any]) -> None:
        self._exec("INSERT OR IGNORE INTO skills (name, version, skill_json, created_at) VALUES (?,?,?,?)",
                   (name, version, json.dumps(skill), time.time()))

    def latest_skill_version(self, name: str) -> int:
        return int(self._query("SELECT coalesce(max(version), 0) FROM skills WHERE name=?", (name,))[0][0])

    def create_snapshot(self, parent: int | None, reason: str, members: dict[str, int]) -> int:
        """A new snapshot holding exactly `members` (name to version)."""
        cur = self._exec("INSERT INTO skill_snapshots (parent, reason, created_at) VALUES (?,?,?)", (parent, reason, time.time()))
        sid = int(cur.lastrowid)
        for name, version in members.items():
            self._exec("INSERT INTO skill_snapshot_members (snapshot, name, version) VALUES (?,?,?)", (sid, name, version))
        return sid

    def snapshots(self) -> list[SnapshotRow]:
        return [SnapshotRow(**dict(r)) for r in self._query("SELECT id, parent, reason, created_at FROM skill_snapshots ORDER BY id")]

    def snapshot_skills(self, snapshot: int) -> list[dict[str, Any]]:
        rows = self._query("SELECT s.skill_json FROM skill_snapshot_members m JOIN skills s ON s.name = m.name AND "
                           "s.version = m.version WHERE m.snapshot=? ORDER BY m.name", (snapshot,))
        return [json.loads(r[0]) for r in rows]

    def record_skill_candidate(self, skill: dict[str, Any], status: str, reason: str, *, run_id: str | None = None,
                               task_key: str = "", evidence: dict[str, Any] | None = None, snapshot: int | None = None) -> int:
        cur = self._exec("INSERT INTO skill_candidates (run_id, task_key, skill_json, status, reason, evidence_json, snapshot, "
                         "created_at) VALUES (?,?,?,?,?,?,?,?)", (run_id, task_key, json.dumps(skill), status, reason,
                                                                  json.dumps(evidence or {}), snapshot, time.time()))
        return int(cur.lastrowid)

    def decide_skill_candidate(self, candidate_id: int, status: str, reason: str, evidence: dict[str, Any],
                               snapshot: int | None) -> None:
        self._exec("UPDATE skill_candidates SET status=?, reason=?, evidence_json=?, snapshot=? WHERE id=?",
                   (status, reason, json.dumps(evidence), snapshot, candidate_id))

    def skill_candidates(self, *, run_id: str | None = None, status: str | None = None) -> list[SkillCandidateRow]:
        where, params = [], []
        for col, value in (("run_id", run_id), ("status", status)):
            if value is not None:
                where.append(f"{col}=?")
                params.append(value)
        sql = "SELECT * FROM skill_candidates" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id"
        return [SkillCandidateRow(id=r["id"], run_id=r["run_id"], task_key=r["task_key"], skill=json.loads(r["skill_json"]),
                                  status=r["status"], reason=r["reason"], evidence=json.loads(r["evidence_json"]),
                                  snapshot=r["snapshot"], created_at=r["created_at"]) for r in self._query(sql, tuple(params))]
