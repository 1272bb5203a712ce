"""Reports over verdicts: suite metrics (fast_p, speedup statistics)."""

from .console import status_text, summary_table, verdict_lines, verdict_table
from .metrics import FAST_P, Summary, TaskOutcome, summarize, summarize_by_level

__all__ = [
    "status_text", "summary_table", "verdict_lines", "verdict_table","FAST_P", "Summary", "TaskOutcome", "summarize", "summarize_by_level"]
