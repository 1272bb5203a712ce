"""A bench's page: `results/bench.md` (the setup, each arm's state, the table per arm and level, fast_p against each
baseline, fast_1 per judge call), the plot beside it (`fast1-per-judge-call.png`, one line per arm) and every number
as JSON (`bench.json`). docs/bench.md says what each column means."""

from __future__ import annotations

import json
from pathlib import Path

from ..report import FAST_P, baseline_label
from ..report.plots import judge_call_curves_png
from .results import COMPILED, DEFAULTS, KINDS, BenchResults

PAGE = "bench.md"
PLOT = "fast1-per-judge-call.png"
DATA = "bench.json"
_SHORT = {KINDS[0]: "eager", DEFAULTS: "eager-defaults", COMPILED: "compile"}


def percent(x: float | None) -> str:
    return f"{x:.0%}" if x is not None else "n/a"


def times(x: float | None) -> str:
    return f"{x:.2f}x" if x is not None else "-"


def short(kind: str) -> str:
    """A baseline's name in a column heading."""
    return _SHORT.get(kind, baseline_label(kind))


def write_page(results: BenchResults, directory: Path, command: str) -> Path:
    """The page, its plot and its JSON in `directory`; the page's path. `command`: what continues or reruns the
    bench, shown on the page."""
    directory.mkdir(parents=True, exist_ok=True)
    plotted = results.plotted
    judge_call_curves_png({a.arm: c.fast_1 for a in results.arms if (c := results.curve(a.arm, plotted)) is not None},
                          directory / PLOT, baseline_label(plotted))
    (directory / DATA).write_text(json.dumps(results.to_dict(), indent=1, default=str))
    path = directory / PAGE
    path.write_text("\n".join(_page(results, command, plotted)) + "\n")
    return path


def _page(r: BenchResults, command: str, plotted: str) -> list[str]:
    tokens = f", at most {r.tokens:,} model tokens" if r.tokens else ""
    prices = ", ".join(f"{name}: ${p['input']:g} in, ${p['output']:g} out per million tokens" for name, p in r.prices.items())
    lines = [f"# kernelcraft bench: {len(r.arms)} arms on {r.target}", "",
             f"- device: {r.device_name or 'not yet known'}",
             f"- model: {r.model}",
             f"- budget per task, the same for every arm: {r.judge_calls} judge calls{tokens}",
             f"- price: {prices or 'none given (--price): dollars are n/a'}",
             f"- state: {'finished' if r.finished else 'not finished: resume it'}; command: `{command}`", "",
             "## Arms", "", "| arm | search | run | state | wall time |", "|---|---|---|---|---|"]
    lines += [f"| {a.arm} | {a.shape} | {a.run_id or '-'} | {'finished' if a.finished else 'unfinished'} | {a.wall_s:.0f} s |"
              for a in r.arms]
    heads = ["arm", "level", "correct", *(f"fast_1 {short(k)}" for k in KINDS), *(f"geomean {short(k)}" for k in KINDS),
             "judge calls (most per task)", "tokens", "dollars", "judge s", "model s"]
    lines += ["", "## Results", "", "| " + " | ".join(heads) + " |", "|---" * len(heads) + "|"]
    for row in r.rows:
        cost = f"${row.cost_usd:.2f}" + (f" (+{row.unpriced_calls} unpriced calls)" if row.unpriced_calls else "") \
            if row.cost_usd is not None else "n/a"
        cells = [row.arm, row.level, f"{row.summary.correct}/{row.summary.total}", *(percent(row.fast_1(k)) for k in KINDS),
                 *(times(row.geomean(k)) for k in KINDS), f"{row.judge_calls} ({row.most_judge_calls})", f"{row.tokens:,}",
                 cost, f"{row.judge_s:.0f}", f"{row.model_s:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## fast_p against each baseline", "",
              "| arm | level | against | placed / tasks | " + " | ".join(f"fast_{p:g}" for p in FAST_P) + " |",
              "|---" * (4 + len(FAST_P)) + "|"]
    for row in r.rows:
        for b in row.summary.baselines:
            lines.append(f"| {row.arm} | {row.level} | {b.label} | {b.correct}/{b.tasks} | "
                         + " | ".join(f"{b.fast_p[p]:.0%}" for p in FAST_P) + " |")
    calls = range(1, r.judge_calls + 1)
    lines += ["", f"## fast_1 against {baseline_label(plotted)} per judge call", "", f"![fast_1 per judge call]({PLOT})", "",
              f"After k judge calls of a task, its best result so far; the share of tasks ({r.overall}) faster than "
              f"{baseline_label(plotted)}.", "",
              "| arm | " + " | ".join(f"k={k}" for k in calls) + " |", "|---" * (1 + len(calls)) + "|"]
    for a in r.arms:
        curve = r.curve(a.arm, plotted)
        lines.append(f"| {a.arm} | " + " | ".join(percent(v) for v in (curve.fast_1 if curve else [None] * len(calls))) + " |")
    notes = [f"{baseline_label(kind)}: {why}" for kind, why in r.missing.items()]
    if plotted != COMPILED:
        notes.append(f"the plot is against {baseline_label(plotted)}: no task has torch.compile's time")
    lines += ["", "## Notes", "", *(f"- {n}" for n in notes),
              "- columns: docs/bench.md; every verdict, model call and kernel is in the arms' workspaces (arms/ARM)"]
    return lines


__all__ = ["DATA", "PAGE", "PLOT", "percent", "short", "times", "write_page"]
