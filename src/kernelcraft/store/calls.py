"""The model calls a workspace recorded: a row each, their prompt and reply kept as files under the run's directory."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..llm import CallFiles, CallRecord, RecordedCall, read_reply, write_call


@dataclass(frozen=True)
class LLMCallRow:
    id: int
    run_id: str | None
    purpose: str
    task_key: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    latency_s: float | None
    cached: bool
    error: str | None
    prompt_path: str
    reply_path: str | None
    reasoning_tokens: int = 0  # of completion_tokens, where the provider says
    reasoning_path: str | None = None  # a reasoning model's thinking, apart from the reply


class CallTables:
    """Mixed into Store, whose `workspace`, `_exec` and `_query` these methods use."""

    workspace: Path
    _exec: Callable[..., sqlite3.Cursor]
    _query: Callable[..., list[sqlite3.Row]]

    def record_llm_call(self, record: CallRecord, run_id: str | None = None) -> int:
        """A model call with its prompt and reply written as files under the run's directory (`llm.write_call`)."""
        files = write_call(self.workspace / "runs" / (run_id or "no-run") / "llm", RecordedCall.of(record))
        req, reply = record.request, record.reply
        cur = self._exec(
            "INSERT INTO llm_calls (run_id, purpose, task_key, model, request_key, sample, prompt_tokens, completion_tokens, "
            "cost_usd, latency_s, attempts, cached, error, prompt_path, reply_path, reasoning_tokens, reasoning_path, created_at) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (run_id, req.purpose, req.task, reply.model if reply else req.model, req.key(), req.sample,
             reply.usage.prompt_tokens if reply else 0, reply.usage.completion_tokens if reply else 0,
             reply.cost_usd if reply else None, reply.latency_s if reply else None, reply.attempts if reply else 0,
             int(reply.cached) if reply else 0, record.error, self._relative(files.prompt), self._relative(files.reply),
             reply.usage.reasoning_tokens if reply else 0, self._relative(files.reasoning), record.started_at or time.time()))
        return int(cur.lastrowid)

    def _relative(self, path: Path | None) -> str | None:
        return str(path.relative_to(self.workspace)) if path is not None else None

    def call_files(self, call: LLMCallRow) -> CallFiles:
        """Where a recorded call's files are (read them with `llm.read_call`)."""
        return CallFiles(self.workspace / call.prompt_path, self.workspace / call.reply_path if call.reply_path else None,
                         self.workspace / call.reasoning_path if call.reasoning_path else None)

    def llm_calls(self, *, run_id: str | None = None) -> list[LLMCallRow]:
        rows = self._query("SELECT * FROM llm_calls" + (" WHERE run_id=?" if run_id else "") + " ORDER BY id",
                           (run_id,) if run_id else ())
        return [LLMCallRow(id=r["id"], run_id=r["run_id"], purpose=r["purpose"], task_key=r["task_key"], model=r["model"],
                           prompt_tokens=r["prompt_tokens"], completion_tokens=r["completion_tokens"], cost_usd=r["cost_usd"],
                           latency_s=r["latency_s"], cached=bool(r["cached"]), error=r["error"], prompt_path=r["prompt_path"],
                           reply_path=r["reply_path"], reasoning_tokens=r["reasoning_tokens"],
                           reasoning_path=r["reasoning_path"]) for r in rows]

    def llm_reply(self, call_id: int) -> str | None:
        """The text of a recorded model reply, or None when the call failed."""
        rows = self._query("SELECT prompt_path, reply_path FROM llm_calls WHERE id=?", (call_id,))
        if not rows or rows[0]["reply_path"] is None:
            return None
        return read_reply(CallFiles(self.workspace / rows[0]["prompt_path"], self.workspace / rows[0]["reply_path"]))
