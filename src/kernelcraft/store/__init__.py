"""The workspace store: SQLite (WAL) holding tasks, candidates, runs, verdicts, baselines, vettings, model calls
and search attempts."""

from .db import DB_NAME, AttemptRow, Baseline, LLMCallRow, RunRow, RunTaskRow, Store, VerdictRow

__all__ = ["DB_NAME", "AttemptRow", "Baseline", "LLMCallRow", "RunRow", "RunTaskRow", "Store", "VerdictRow"]
