"""`kernelcraft bench`: a bench's arms and settings from the options (kernelcraft.bench does the rest), a live line
per arm, then its table, its page and, when it stopped, the command that continues it."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Optional

import typer
from rich.console import Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..bench import (KINDS, RESULTS_DIR, Arm, ArmError, BenchError, BenchResults, BenchRun, BenchSpec, check_arms,
                     gather, load_spec, load_state, parse_arm, restart_arm, run_bench, start_bench, write_page)
from ..bench.page import percent, short, times
from ..llm import Spend
from ..search import OptimizeConfig, SearchEvent, tasks_of
from .app import app
from .common import BaseUrlOpt, GpusOpt, JsonOpt, LanguageOpt, PriceOpt, RayOpt, UsageError, err, out
from .optimize import ProgressView
from .run_config import MODEL_SPEC, llm_flags, new_config

DEFAULT_BENCH = Path("kernelcraft-bench")
ARM_HELP = ("An arm (repeatable): [NAME=]STRATEGY[+skills][:KEY=VALUE,...], e.g. refine, branch:width=2,impls=2, "
            "refine+skills, long=refine:turns=8. KEY: the strategy's options (turns, samples, width, generations...), "
            "skills=on|off, skills.KEY (a skill option, e.g. skills.learn=false).")
# What `bench --resume` may be given; every other setting is the bench's own.
_RESUME_OPTIONS = {"resume", "workspace", "as_json", "baselines", "gpus", "ray", "restart_arms"}
# The options that set a field of OptimizeConfig, by its dotted path, to name a bad value as the user gave it.
_PATHS = {"device": "device", "workers": "workers", "language": "search.language", "concurrency": "llm.concurrency"}
_OPTIONS = {path: "--" + name for name, path in _PATHS.items()}


@app.command("bench")
def bench_cmd(
    ctx: typer.Context,
    target: Optional[str] = typer.Argument(None, help="The tasks: a KernelBench tree or level directory, a suite directory, "
                                                      "'examples', a task file."),
    arm_texts: list[str] = typer.Option([], "--arm", help=ARM_HELP),
    model: Optional[str] = typer.Option(None, "--model", "-m", help=f"{MODEL_SPEC} (a batch DIR inside the workspace moves "
                                                                    "with it)."),
    base_url: Optional[str] = BaseUrlOpt,
    task_judge_calls: int = typer.Option(5, "--task-judge-calls", help="Judge calls per task, the same for every arm."),
    task_tokens: Optional[int] = typer.Option(None, "--task-tokens", help="Model tokens per task, the same for every arm "
                                                                          "(checked before each call)."),
    prices: list[str] = PriceOpt,
    max_tokens: list[str] = typer.Option([], "--max-tokens", help="Longest reply: N, or MODEL=N per model (globs; repeatable)."),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", help="Model calls in flight per arm (default 8)."),
    language: Optional[str] = LanguageOpt,
    device: Optional[str] = typer.Option(None, "--device", "-d", help="cuda (the default) or cpu."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Concurrent judge evaluations (default: half the cores, at most 8)."),
    config_file: Optional[Path] = typer.Option(None, "--config", help="A run file (TOML, any field of OptimizeConfig): the judge's "
                                                                      "settings, the model's, search defaults the arms start from."),
    sets: list[str] = typer.Option([], "--set", help="KEY=VALUE: a setting by its dotted path (as optimize's --set), or a task's "
                                                     "size constant (repeatable)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the bench in -w with its own settings."),
    restart_arms: list[str] = typer.Option([], "--restart-arm", help="With --resume: start this arm over (its run and "
                                                                   "verdicts go; its batch replies stay), e.g. after "
                                                                   "fixing its strategy (repeatable)."),
    workspace: Path = typer.Option(DEFAULT_BENCH, "--workspace", "-w", help="The bench's own directory: its settings, every "
                                                                            "arm's workspace, the batch rounds, the page."),
    as_json: bool = JsonOpt, gpus: Optional[str] = GpusOpt, ray: Optional[str] = RayOpt,
    baselines: bool = typer.Option(True, "--baselines/--no-baselines", envvar="KERNELCRAFT_BASELINES",
                                   help="After the arms, time each task's baselines on this device once (eager strict and "
                                        "at PyTorch's defaults, torch.compile: seconds to minutes a task); "
                                        "KERNELCRAFT_BASELINES=0 skips it too."),
) -> None:
    """Run TARGET's tasks under several arms (a strategy with its options, skills on or off), each with the same budget
    per task, and compare them: per arm and level, correct tasks, fast_p and geomean against eager (strict), eager at
    PyTorch's defaults and torch.compile, fast_1 per judge call (plotted), tokens, dollars, wall time. Exit 0 when every
    arm finished, 3 when the bench stopped (batch replies pending, a judge failure): continue it with --resume."""
    try:
        if resume:
            given = ["TARGET"] * (target is not None) + [
                p.opts[0] for p in ctx.command.params if p.name not in _RESUME_OPTIONS | {"target"}
                and getattr(ctx.get_parameter_source(p.name), "name", "") == "COMMANDLINE"]
            if given:
                raise UsageError(f"a resumed bench keeps its own settings: drop {', '.join(given)}")
            for name in restart_arms:
                restart_arm(workspace, name)
        elif restart_arms:
            raise UsageError("--restart-arm goes with --resume -w DIR (a bench that exists)")
        elif target is None:
            raise UsageError("give a TARGET (a KernelBench tree, a suite directory, 'examples') and its --arm options, or "
                             "--resume -w DIR")
        else:
            flags = {"target": target, **{path: ctx.params[name] for name, path in _PATHS.items()},
                     **llm_flags(model, base_url, None, prices, max_tokens)}
            _start(workspace, target, arm_texts, task_judge_calls, task_tokens, new_config(config_file, flags, sets, _OPTIONS))
        run = _run(workspace, baselines, gpus, ray)
        results = gather(workspace, load_spec(workspace), load_state(workspace))
    except (ArmError, BenchError) as e:
        raise UsageError(str(e)) from None
    command = shlex.join(["kernelcraft", "bench", "--resume", "-w", str(workspace)])
    page = write_page(results, workspace / RESULTS_DIR, command)
    if as_json:
        print(json.dumps({**results.to_dict(), "stopped": run.stopped, "page": str(page), "resume": command}, indent=1,
                         default=str))
    else:
        out.print(results_table(results))
        out.print(f"page: {page}", highlight=False)
    if run.stopped:
        err.print(f"stopped: {run.stopped}. Everything so far is recorded; continue with: {command}", highlight=False,
                  soft_wrap=True)
        raise typer.Exit(3)


def _start(workspace: Path, target: str, arm_texts: list[str], judge_calls: int, tokens: Optional[int],
           base: OptimizeConfig) -> None:
    """A new bench saved in `workspace` (or the same one found there), every arm checked first."""
    if judge_calls < 1 or (tokens is not None and tokens < 1):
        raise UsageError("--task-judge-calls and --task-tokens must be at least 1")
    arms = [parse_arm(text) for text in arm_texts]
    tasks = tasks_of(base)
    check_arms(arms, tasks)
    start_bench(workspace, BenchSpec.of(target, base, arms, judge_calls, tokens, tasks, workspace))


def _run(workspace: Path, baselines: bool, gpus: Optional[str], ray: Optional[str]) -> BenchRun:
    """One invocation of the bench, a live line per arm (its tasks done, attempts, best, tokens) and per task under way."""
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                   TimeElapsedColumn())
    per_task = Progress(SpinnerColumn(), TextColumn("{task.description}"))

    def watch(arm: Arm, total: int, done: int, spend: Spend) -> Callable[[SearchEvent], None]:
        return ProgressView(bar, per_task, total, done, spend, label=f"arm {arm.name}")

    with Live(Group(bar, per_task), console=err, transient=True):
        return run_bench(workspace, baselines=baselines, gpus=gpus, ray=ray, watch=watch,
                         say=lambda line: err.print(line, highlight=False, soft_wrap=True))


def results_table(r: BenchResults) -> Table:
    """Per arm and level: correct, fast_1 and geomean against each baseline, what it spent."""
    t = Table(title=f"bench: {r.judge_calls} judge calls per task and arm on {r.device_name}", title_justify="left",
              caption_justify="left")
    for col in ("arm", "level", "correct", *(f"fast_1 {short(k)}" for k in KINDS), *(f"geomean {short(k)}" for k in KINDS),
                "judge calls", "tokens", "dollars", "wall s"):
        t.add_column(col, justify="left" if col in ("arm", "level") else "right")
    walls = {a.arm: a.wall_s for a in r.arms}
    for row in r.rows:
        cost = f"${row.cost_usd:.2f}" if row.cost_usd is not None else "n/a"
        t.add_row(row.arm, row.level, f"{row.summary.correct}/{row.summary.total}", *(percent(row.fast_1(k)) for k in KINDS),
                  *(times(row.geomean(k)) for k in KINDS), f"{row.judge_calls} (≤{row.most_judge_calls}/task)",
                  f"{row.tokens:,}", cost, f"{walls.get(row.arm, 0.0):.0f}" if row.level == r.overall else "")
    unstarted = [a.arm for a in r.arms if a.run_id is None]
    notes = [*(f"{kind}: {why}" for kind, why in r.missing.items()),
             *([f"not started: {', '.join(unstarted)}"] if unstarted else [])]
    t.caption = "\n".join(notes) or None
    return t
