"""Reports over verdicts: suite metrics (fast_p, speedup statistics), console tables, and the HTML run report."""

from .console import kernel_table, roofline_table, status_text, summary_table, verdict_lines, verdict_table
from .html import counted, render_report, write_report
from .metrics import (BASELINES, EAGER, FAST_P, BaselineSummary, Summary, TaskOutcome, against, baseline_label, baseline_ratios, geomean,
                      judge_error_cause, not_judged_text, summarize, summarize_by_level,
                      summarize_per_device)
from .run_data import RunReport, TaskReport, load_run

__all__ = [
    "counted", "kernel_table", "roofline_table", "status_text", "summary_table", "verdict_lines", "verdict_table", "BASELINES", "EAGER", "FAST_P", "BaselineSummary", "Summary",
    "TaskOutcome", "against", "baseline_label", "baseline_ratios", "geomean", "judge_error_cause", "not_judged_text", "summarize",
    "summarize_by_level", "summarize_per_device", "render_report", "write_report", "RunReport", "TaskReport", "load_run"]
