"""The report's figures as inline SVG strings, and a bench's curve as a PNG (matplotlib, imported only when a figure
is drawn; a PNG through the Agg canvas).

Figures are drawn on `matplotlib.figure.Figure` directly rather than through pyplot, so no global backend or
figure registry is touched: drawing is safe from any thread and leaves a caller's own pyplot state alone."""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from .metrics import FAST_P
from .run_data import TurnPoint

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

FIGSIZE = (5.4, 3.5)  # inches; the page scales the SVG to its column
BINS_PER_DOUBLING = 4
MAX_TURN_TICKS = 20  # more turns than this get the axis's own integer ticks
BLUE, GREEN, ORANGE, GREY, INK = "#2563eb", "#16a34a", "#ea580c", "#94a3b8", "#1f2937"
_STYLE = {
    "font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9, "axes.edgecolor": GREY, "axes.labelcolor": INK,
    "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True, "grid.color": "#e5e7eb",
    "grid.linewidth": 0.8, "xtick.color": INK, "ytick.color": INK, "svg.fonttype": "path", "svg.hashsalt": "kernelcraft",
}
# matplotlib writes an XML prolog and namespace declarations for a standalone file; inline in HTML5 the parser puts
# <svg> in its namespace itself, and dropping them keeps every URL-looking string out of the page.
_PROLOG = re.compile(r"\A.*?(?=<svg)", re.DOTALL)
_XMLNS = re.compile(r'\s+xmlns(:\w+)?="[^"]*"')
_IDS = re.compile(r'(\bid="|href="#|url\(#)')


@contextmanager
def _figure() -> Iterator[tuple["Figure", "Axes"]]:
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context(_STYLE):
        fig = Figure(figsize=FIGSIZE, layout="constrained")
        yield fig, fig.add_subplot()


def _svg(fig: "Figure", prefix: str) -> str:
    """`fig` as an <svg> element for inline use; ids get `prefix` so several figures can share one page."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Creator": None, "Date": None, "Format": None, "Type": None})
    svg = _XMLNS.sub("", _PROLOG.sub("", buf.getvalue()))
    return _IDS.sub(lambda m: m.group(1) + prefix + "-", svg).strip()


def _say(ax: "Axes", text: str) -> None:
    """A figure with nothing to plot says why instead."""
    ax.set_axis_off()
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=12, color=ORANGE, transform=ax.transAxes)


def _times(x: float, _pos: object = None) -> str:
    return f"{x:g}x"


def fast_p_curve(speedups: list[float], total: int) -> str:
    """fast_p over p against eager (strict): the fraction of the `total` judged tasks whose best speedup is above p
    (tasks with no correct candidate are never fast), with the summary table's thresholds marked."""
    with _figure() as (fig, ax):
        if total == 0:
            _say(ax, "no tasks in this run")
            return _svg(fig, "fastp")
        top = max([*speedups, 2.0]) * 1.15

        def fast(p: float) -> float:
            return sum(1 for s in speedups if s > p) / total

        xs = [0.0, *sorted(speedups), top]
        ax.step(xs, [fast(x) for x in xs], where="post", color=BLUE, linewidth=2, label="fast_p")
        ax.plot(FAST_P, [fast(p) for p in FAST_P], "o", color=BLUE, markersize=4, label="table thresholds")
        ax.axvline(1.0, color=GREY, linestyle="--", linewidth=1)
        ax.set_xlim(0, top)
        ax.set_ylim(-0.02, 1.05)
        ax.set_xlabel("p (speedup threshold over eager PyTorch, strict)")
        ax.set_ylabel("fraction of judged tasks faster than p")
        ax.yaxis.set_major_formatter(lambda y, _pos: f"{y:.0%}")
        ax.xaxis.set_major_formatter(_times)
        if not speedups:
            ax.text(0.5, 0.55, "no correct candidate", ha="center", transform=ax.transAxes, color=ORANGE, fontsize=11,
                    bbox={"facecolor": "white", "edgecolor": "none"})
        ax.legend(loc="upper right", frameon=False)
        return _svg(fig, "fastp")


def speedup_histogram(speedups: list[float]) -> str:
    """How the best speedups of the correct tasks spread, on a log axis (green: faster than eager)."""
    import numpy as np
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    with _figure() as (fig, ax):
        if not speedups:
            _say(ax, "no correct candidate: no speedups to show")
            return _svg(fig, "hist")
        # bins of a quarter of a doubling, with 1x on an edge: a bar is either all faster or all slower than eager
        quarters = np.log2(speedups) * BINS_PER_DOUBLING
        edges = 2.0 ** (np.arange(math.floor(quarters.min()) - 1, math.ceil(quarters.max()) + 2) / BINS_PER_DOUBLING)
        _, _, patches = ax.hist(speedups, bins=edges, color=GREEN, edgecolor="white")
        for patch, right in zip(patches, edges[1:]):
            if right <= 1.0:
                patch.set_facecolor(ORANGE)
        ax.axvline(1.0, color=GREY, linestyle="--", linewidth=1)
        ax.set_xscale("log")
        ax.set_xlim(min(edges[0], 0.8), max(edges[-1], 1.25))
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(_times))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.get_major_locator().set_params(integer=True)
        ax.set_xlabel("best effective speedup per task (log scale)")
        ax.set_ylabel("tasks")
        return _svg(fig, "hist")


def turn_curve(points: list[TurnPoint], total: int) -> str:
    """Best speedup so far by turn (geometric mean over the tasks solved by then), with the number solved."""
    with _figure() as (fig, ax):
        if not any(p.solved for p in points):
            _say(ax, "no correct candidate at any turn" if points else "no attempts recorded")
            return _svg(fig, "turns")
        turns = [p.turn + 1 for p in points]  # counted from 1, as the live line and the trajectories count them
        solved_ax = ax.twinx()
        solved_ax.bar(turns, [p.solved for p in points], width=0.5, color=GREY, alpha=0.35, label="tasks solved")
        solved_ax.set_ylim(0, max(total, 1) * 1.1)
        solved_ax.set_ylabel("tasks solved", color=GREY)
        solved_ax.grid(False)
        solved_ax.spines["right"].set_visible(True)
        solved_ax.yaxis.get_major_locator().set_params(integer=True)
        ax.set_zorder(solved_ax.get_zorder() + 1)  # the line above the bars
        ax.patch.set_visible(False)
        ax.plot(turns, [p.geomean if p.geomean is not None else float("nan") for p in points], "o-", color=BLUE,
                linewidth=2, label="geomean best speedup so far")
        ax.axhline(1.0, color=GREY, linestyle="--", linewidth=1)
        if len(turns) <= MAX_TURN_TICKS:
            ax.set_xticks(turns)
        else:  # a tick a turn would crowd the axis (and fill the page with labels)
            ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_xlabel("turn")
        ax.set_ylabel("best speedup so far (geomean)")
        ax.yaxis.set_major_formatter(_times)
        ax.set_ylim(bottom=min(0.9, *(p.geomean for p in points if p.geomean)) * 0.95)
        handles = ax.get_legend_handles_labels()[0] + solved_ax.get_legend_handles_labels()[0]
        ax.legend(handles=handles, loc="upper left", frameon=False)
        return _svg(fig, "turns")


def judge_call_curves_png(curves: dict[str, list[float | None]], path: Path, against: str) -> Path:
    """A PNG of fast_1 against judge calls spent per task, one line per name (a bench's arms): point k is the share
    of tasks whose best result after k judge calls is faster than `against` (None: not placeable, left out)."""
    with _figure() as (fig, ax):
        if not any(v is not None for points in curves.values() for v in points):
            _say(ax, f"nothing to plot: no task placed against {against}")
        else:
            colors = [BLUE, GREEN, ORANGE, "#9333ea", "#dc2626", "#0891b2", INK, GREY]
            styles, markers = ["-", "--", "-.", ":"], "osD^v<>p"
            for i, (name, points) in enumerate(curves.items()):
                calls = [k for k, v in enumerate(points, 1) if v is not None]
                # the first drawn widest: lines that coincide (arms equal at every k) stay visible, one inside another
                wide = len(curves) - 1 - i
                ax.plot(calls, [points[k - 1] for k in calls], linestyle=styles[i % len(styles)], marker=markers[i % len(markers)],
                        color=colors[i % len(colors)], linewidth=1.5 + 0.8 * wide, markersize=4 + 1.5 * wide, label=name)
            ax.set_xlim(0.5, max(len(points) for points in curves.values()) + 0.5)
            ax.set_ylim(-0.02, 1.05)
            ax.xaxis.get_major_locator().set_params(integer=True)
            ax.set_xlabel("judge calls spent per task")
            ax.set_ylabel(f"fast_1 against {against}")
            ax.yaxis.set_major_formatter(lambda y, _pos: f"{y:.0%}")
            ax.legend(loc="upper left", frameon=False)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format="png", dpi=150, metadata={"Software": None})
    return path
