"""The run report: one self-contained HTML file (inline CSS and SVG, no script, nothing fetched; links to the replies
too long to show, which the run recorded beside it)."""

from __future__ import annotations

import datetime as dt
import os
from functools import lru_cache
from pathlib import Path
from urllib.parse import quote

import jinja2
from markupsafe import Markup

from ..judge import SPEEDUP_CREDIT
from ..store import Store
from . import plots
from .metrics import FAST_P, not_judged_text
from .page import REPLY_INLINE_CHARS, ROWS_PER_TASK, TEXT_BUDGET_CHARS, listed, page_rows
from .run_data import CallTotals, RunReport, load_run

REPORT_NAME = "report.html"
DASH = "\u2013"


def speedup_text(x: float | None) -> str:
    return f"{x:.2f}x" if x is not None else DASH


def percent_text(x: float | None) -> str:
    return f"{x:.0%}" if x is not None else DASH


def ms_text(x: float | None) -> str:
    return f"{x:#.4g} ms" if x is not None else DASH


def counted(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def cost_text(usage: CallTotals) -> str:
    """Dollars, or "unknown" when no call had a price; calls without a price are counted beside a partial sum."""
    if usage.cost_usd is None:
        return "unknown" if usage.unpriced_calls else "$0"
    text = f"${usage.cost_usd:,.2f}" if usage.cost_usd >= 1 else f"${usage.cost_usd:.4g}"
    return text + (f" + {usage.unpriced_calls} unpriced calls" if usage.unpriced_calls else "")


def duration_text(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m {secs:02d}s" if hours else f"{minutes}m {secs:02d}s"


def time_text(timestamp: float) -> str:
    return dt.datetime.fromtimestamp(timestamp).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("kernelcraft.report", "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(x=speedup_text, pct=percent_text, ms=ms_text, cost=cost_text, duration=duration_text,
                       time=time_text, counted=counted, size=size_text)
    env.globals.update(DASH=DASH, SPEEDUP_CREDIT=SPEEDUP_CREDIT)
    return env


def size_text(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} KB" if n >= 1e3 else f"{n} bytes"


def file_link(target: Path, page: Path | None) -> str:
    """A link from the page to a file the run recorded: relative to the page's folder where the page is written (so
    the run's folder can move whole), else the file's absolute URI."""
    if page is None:
        return target.resolve().as_uri()
    return quote(Path(os.path.relpath(target.resolve(), page.resolve().parent)).as_posix())


def render_report(report: RunReport, page: Path | None = None) -> str:
    """The report as an HTML document: header, summary, the three plots, a table of tasks, and per task the best
    kernel's source, its verdict and the trajectory of attempts, as much of it as `page.py` lets the page hold
    (`page`: where the document will be written, for its links to the replies the run recorded)."""
    speedups = report.best_speedups
    figures = {
        "fast_p": Markup(plots.fast_p_curve(speedups, report.summary.judged)),
        "distribution": Markup(plots.speedup_histogram(speedups)),
        "turns": Markup(plots.turn_curve(report.turns, report.summary.judged)),
    }
    rows = page_rows([listed(t.attempts, t.best) for t in report.tasks])
    return _env().get_template("run_report.html.j2").render(r=report, s=report.summary, fast_p=FAST_P, figures=figures,
                                                            not_judged=not_judged_text, rows=rows, rows_per_task=ROWS_PER_TASK,
                                                            reply_chars=REPLY_INLINE_CHARS, text_budget=TEXT_BUDGET_CHARS,
                                                            link=lambda target: file_link(target, page))


def write_report(store: Store, run_id: str, out: Path | None = None, run: RunReport | None = None) -> Path:
    """Render run `run_id` (`run`, when the caller has loaded it already) to `out` (default
    `<workspace>/runs/<run_id>/report.html`) and return the path."""
    path = Path(out) if out is not None else store.workspace / "runs" / run_id / REPORT_NAME
    html = render_report(run if run is not None else load_run(store, run_id), path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html, encoding="utf-8")
    return path
