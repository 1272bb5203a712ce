"""The workspace store: SQLite (WAL) holding tasks, candidates, runs, verdicts, baselines, vettings, model calls
search attempts and state, the judge service's jobs, and the skill library."""

from .skill_tables import SkillCandidateRow, SnapshotRow
from .baselines import SUMMARY_BASELINES, baselines_job, fill_baselines, record_baselines
from .calls import LLMCallRow
from .db import DB_NAME, AttemptRow, Baseline, RunRow, RunTaskRow, Store, StoreError, VerdictRow

__all__ = ["DB_NAME", "SUMMARY_BASELINES", "AttemptRow", "Baseline", "LLMCallRow", "RunRow", "RunTaskRow", "SkillCandidateRow",
           "SnapshotRow", "Store", "StoreError", "VerdictRow", "baselines_job", "fill_baselines", "record_baselines"]
