"""The skill library: skills as records with evidence, BM25 recall by task text, admission only by
the judge's verification (with vs without), versioned snapshots, files for import and export. The
selector and summarizer roles are in `agents`; the verification runs are driven by `search`."""

from .admission import AdmissionPolicy, Decision, decide
from .files import SEED_DIR, SkillFileError, parse_markdown, read_skill_file, seed_skills
from .library import SkillError, SkillLibrary, SnapshotDiff
from .model import Evidence, Skill
from .retrieve import recall, task_query

__all__ = [
    "SEED_DIR", "AdmissionPolicy", "Decision", "Evidence", "Skill", "SkillError", "SkillFileError", "SkillLibrary",
    "SnapshotDiff", "decide", "parse_markdown", "read_skill_file", "recall", "seed_skills", "task_query",
]
