"""The workspace store: SQLite (WAL) holding tasks, candidates, runs, verdicts, baselines, vettings."""

from .db import DB_NAME, Baseline, LLMCallRow, Store, VerdictRow

__all__ = ["DB_NAME", "Baseline", "LLMCallRow", "Store", "VerdictRow"]
