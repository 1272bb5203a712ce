"""Rendering verdicts and summaries for people (rich)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from ..judge import Verdict
from .metrics import FAST_P, Summary

_STYLE = {"correct": "green", "incorrect": "red", "hack_detected": "bold red", "static_rejected": "yellow",
          "build_failed": "yellow", "load_failed": "yellow", "runtime_error": "red", "timeout": "red"}


def status_text(status: str) -> Text:
    return Text(status, style=_STYLE.get(status, ""))


def verdict_table(v: Verdict) -> Table:
    t = Table(title=f"{v.task} on {v.device} ({v.env.get('device_name', '?')})", show_header=True, title_justify="left")
    t.add_column("stage")
    t.add_column("ok")
    t.add_column("seconds", justify="right")
    t.add_column("details")
    for s in v.stages:
        t.add_row(s.name, "yes" if s.ok else "NO", f"{s.seconds:.2f}", (s.message or "")[:160])
    return t


def verdict_lines(v: Verdict) -> list[str]:
    lines = [f"status: {v.status.value}", f"message: {v.message}"]
    if v.reference and v.candidate:
        lines.append(f"reference {v.reference.median_ms:.4g} ms [{v.reference.q1_ms:.4g}, {v.reference.q3_ms:.4g}]  "
                     f"candidate {v.candidate.median_ms:.4g} ms [{v.candidate.q1_ms:.4g}, {v.candidate.q3_ms:.4g}]  "
                     f"({len(v.candidate.samples_ms)} samples each, ABAB)")
    if v.speedup is not None and v.speedup_band:
        lines.append(f"speedup {v.speedup:.3f}x, noise band {v.speedup_band[0]:.3f}-{v.speedup_band[1]:.3f}"
                     + ("" if v.significant else " (within noise: reported as no speedup)"))
    if v.coverage is not None:
        lines.append(f"coverage {v.coverage:.0%} of forward time in the candidate's own kernels")
    if v.errors:
        lines.append("error: max abs {max_abs:.3g}, max rel {max_rel:.3g}, rel L2 {rel_l2:.3g}".format(**v.errors))
    lines += [f"flag {f.code}: {f.message}" for f in v.flags]
    return lines


def summary_table(summaries: list[Summary]) -> Table:
    t = Table(title="suite summary", title_justify="left")
    t.add_column("set")
    t.add_column("correct", justify="right")
    for p in FAST_P:
        t.add_column(f"fast_{p:g}", justify="right")
    t.add_column("geomean", justify="right")
    t.add_column("median", justify="right")
    t.add_column("win rate", justify="right")
    t.add_column("vs compile: fast_1 / geomean", justify="right")
    for s in summaries:
        comp = (f"{s.fast_p_compile.get(1.0, 0):.0%} / {s.geomean_compile:.2f}x ({s.compile_tasks} tasks)"
                if s.compile_tasks and s.geomean_compile else "not recorded")
        t.add_row(s.label, f"{s.correct}/{s.total}", *(f"{s.fast_p[p]:.0%}" for p in FAST_P),
                  f"{s.geomean:.2f}x" if s.geomean else "-", f"{s.median:.2f}x" if s.median else "-",
                  f"{s.win_rate:.0%}" if s.win_rate is not None else "-", comp)
    return t
