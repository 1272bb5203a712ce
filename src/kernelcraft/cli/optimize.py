"""`kernelcraft optimize`: a run's configuration (run_config.py), its tasks, the pool and the optimizer, a live
progress line, then its table, summary and report."""

from __future__ import annotations

import json
import shlex
import sys
from functools import reduce
from pathlib import Path
from typing import Optional

import typer
from rich.console import Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from ..judge import check_device, open_executor
from ..llm import Spend, make_client
from ..report import RunReport, Summary, TaskReport, counted, load_run, not_judged_text, status_text, summarize_by_level, summary_table, write_report
from ..search import (STRATEGIES, BranchOptions, EvolveOptions, OptimizeConfig, Optimizer, RunResult, SearchConfig, SearchEvent, TaskResult,
                      TemplateOptions, tasks_of, unsuited)
from ..store import Store, fill_baselines
from .app import app
from .common import (DEFAULT_WORKSPACE, BaselinesOpt, BaseUrlOpt, LanguageOpt, PriceOpt, existing_workspace, FromModelOpt, GpusOpt, InitInputsOpt, InputsOpt, JsonOpt, RayOpt, RunInterrupted, SampleOpt, ShapesOpt, Terminated, UsageError, WorkspaceOpt, err,
                     option_bound, option_default, out, progress)
from .run_config import MODEL_SPEC, llm_flags, new_config, resumed_config

# What `optimize --resume` may be given; every other setting is the run's own (a TARGET has its own message).
_RESUME_OPTIONS = {"target", "resume", "budget_tokens", "budget_usd", "budget_judge_calls", "budget_wall_s", "out_dir", "workspace",
                   "as_json", "baselines", "gpus", "ray", "no_cache"}  # where it judges: this invocation's machine, not the run's
# The options that set a field of OptimizeConfig, by its dotted path; the model and endpoint ones go through llm_flags.
_PATHS = {"inputs": "inputs", "init_inputs": "init_inputs", "sample": "sample", "from_model": "from_model", "device": "device",
          "workers": "workers", "strategy": "search.strategy", "turns": "search.turns", "samples": "search.samples",
          "language": "search.language", "start": "search.start", "width": "search.branch.width", "impls": "search.branch.impls",
          "islands": "search.evolve.islands", "generations": "search.evolve.generations",
          "migrate_every": "search.evolve.migrate_every", "crossover": "search.evolve.crossover",
          "parallel": "search.evolve.parallel", "configs": "search.template.configs", "finalists": "search.template.finalists",
          "learn": "search.skills.learn", "concurrency": "llm.concurrency", "task_judge_calls": "search.task_judge_calls",
          "task_tokens": "search.task_tokens"}
_BUDGETS = {"budget_tokens": "llm.budget_tokens", "budget_usd": "llm.budget_usd",
            "budget_judge_calls": "search.budget_judge_calls", "budget_wall_s": "search.budget_wall_s"}
# Each setting's option, to name a bad value as the user gave it: "--budget-usd must be > 0".
_OPTIONS = {path: "--" + name.replace("_", "-") for name, path in {**_PATHS, **_BUDGETS}.items()}


def _default(model: type, field: str) -> str:
    """A flag's default and, where it has one, its upper bound, for its help."""
    bound = option_bound(model, field)
    return f" (default {option_default(model, field)}" + (f", at most {bound})" if bound is not None else ")")


class ProgressView:
    """The live lines of an optimize run: tasks done, attempts, best speedup, tokens and cost; and a line per task
    under way with its latest turn, its attempts and its best so far (gone once the task is done)."""

    def __init__(self, bar: Progress, tasks: Progress, total: int, done: int, spend: Spend, label: str = "optimizing") -> None:
        self.bar, self.tasks, self.spend = bar, tasks, spend
        self.id = bar.add_task(label, total=total, completed=done, info="")
        self.attempts, self.correct, self.best = 0, 0, None
        self.lines: dict[str, TaskID] = {}
        self.per_task: dict[str, tuple[int, int, float | None]] = {}  # task: its latest turn, attempts, best

    def __call__(self, e: SearchEvent) -> None:
        if e.kind == "attempt":
            self.attempts += 1
            self.correct += e.status == "correct"
            self.best = _better(self.best, e.speedup)
            turn, attempts, best = self.per_task.get(e.task_key, (0, 0, None))
            self.per_task[e.task_key] = max(turn, e.turn + 1), attempts + 1, _better(best, e.speedup)
            line = self.lines.get(e.task_key)
            if line is None:
                line = self.lines[e.task_key] = self.tasks.add_task(e.task_key, total=None)
            self.tasks.update(line, description=self.task_line(e.task_key))
        elif e.kind == "sample_stopped":
            err.print(f"note: {e.task_key}: {e.message}", highlight=False, soft_wrap=True)
        elif e.kind == "task_done":
            self.bar.advance(self.id)
            line = self.lines.pop(e.task_key, None)
            if line is not None:
                self.tasks.remove_task(line)
            if e.message:
                err.print(f"warning: {e.task_key}: {e.message}", highlight=False)
        s = self.spend
        cost = f"${s.cost_usd:.2f}" + ("+?" if s.unpriced_calls else "")
        best = f"{self.best:.2f}x" if self.best is not None else "-"
        self.bar.update(self.id, info=f"{counted(self.attempts, 'attempt')}, {self.correct} correct, best {best}, "
                                      f"{s.tokens:,} tokens, {cost}")

    def task_line(self, key: str) -> str:
        turn, attempts, best = self.per_task[key]
        return (f"{key}: turn {turn}, {attempts} attempt{'s' if attempts != 1 else ''}, "
                f"best {f'{best:.2f}x' if best is not None else 'none yet'}")


def _better(best: float | None, speedup: float | None) -> float | None:
    return speedup if speedup is not None and (best is None or speedup > best) else best


def _run_summaries(run: RunReport) -> list[Summary]:
    """An optimize run's summaries, per level, as its HTML report counts them."""
    return summarize_by_level([t.outcome() for t in run.tasks])


def _failure(result: TaskResult, report: TaskReport | None) -> str | None:
    """Why a task has no result, in one line: its own error or its last failed attempt (a task the judge never judged
    says why in its result)."""
    if result.error:
        return result.error
    return None if report is None or report.not_judged else report.last_failure


def print_optimize(result: RunResult, report: Path, run: RunReport) -> None:
    """A finished (or stopped) run: its best kernel per task, its summary, its spend, where its files are."""
    table = Table(title=f"run {result.run_id}", title_justify="left")
    reports = {t.key: t for t in run.tasks}
    failures = {t.task.key: _failure(t, reports.get(t.task.key)) for t in result.tasks if t.best is None}
    for col in ("task", "best", "attempts", "kernel", *(["why"] if any(failures.values()) else [])):
        table.add_column(col, overflow="fold" if col == "why" else "ellipsis")
    for t in result.tasks:
        task_report = reports.get(t.task.key)
        if t.best is not None:
            best = Text(f"{t.best.speedup:.2f}x", style="green")
        elif task_report is not None and task_report.not_judged:
            best = status_text("not judged") + Text(f" ({task_report.not_judged})")
        else:
            best = status_text(t.error and "task error" or ("no correct candidate" if t.finished else "unfinished"))
        why = [failures.get(t.task.key) or ""] if any(failures.values()) else []
        table.add_row(t.task.key, best, str(t.attempts), str(t.best_file or "-"), *why)
    out.print(table)
    out.print(summary_table(_run_summaries(run)))
    if run.evaluations_not_judged:
        out.print(status_text(not_judged_text(run.evaluations_not_judged, "evaluations not judged")))
    s = result.spend
    cost = f"${s.cost_usd:.4f}" + (f" (+{s.unpriced_calls} calls without a price)" if s.unpriced_calls else "")
    out.print(f"{s.calls} model calls ({s.cached_calls} cached), {s.prompt_tokens:,} prompt + {s.completion_tokens:,} "
              f"completion tokens, {cost}", highlight=False)
    best = f"best kernels: {result.out_dir}" if result.out_dir.is_dir() else "best kernels: none (no correct kernel yet)"
    out.print(f"{best}\nreport: {report}", highlight=False)


@app.command("optimize")
def optimize_cmd(
    ctx: typer.Context,
    target: Optional[str] = typer.Argument(None, help="A task file, a suite directory or KernelBench tree, 'examples', "
                                                      "'hgemm', or your own module as path/model.py:ClassName (with --inputs)."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help=f"{MODEL_SPEC}."),
    base_url: Optional[str] = BaseUrlOpt,
    inputs: Optional[str] = InputsOpt, init_inputs: Optional[str] = InitInputsOpt,
    sample: Optional[int] = SampleOpt, shapes: Optional[str] = ShapesOpt, from_model: Optional[str] = FromModelOpt,
    strategy: Optional[str] = typer.Option(None, "--strategy", help=f"Search strategy: {', '.join(STRATEGIES)}"
                                                                    f"{_default(SearchConfig, 'strategy')}."),
    turns: Optional[int] = typer.Option(None, "--turns", help="refine: turns per sample; branch, contrastive: rounds"
                                                              f"{_default(SearchConfig, 'turns')}."),
    samples: Optional[int] = typer.Option(None, "--samples", help="refine: independent samples per task; contrastive: prompts "
                                                                  f"per round{_default(SearchConfig, 'samples')}."),
    language: Optional[str] = LanguageOpt,
    width: Optional[int] = typer.Option(None, "--width", help=f"branch: ideas per round{_default(BranchOptions, 'width')}."),
    impls: Optional[int] = typer.Option(None, "--impls", help=f"branch: implementations per idea{_default(BranchOptions, 'impls')}."),
    islands: Optional[int] = typer.Option(None, "--islands", help=f"evolve: islands{_default(EvolveOptions, 'islands')}."),
    generations: Optional[int] = typer.Option(None, "--generations", help="evolve: children per task"
                                                                          f"{_default(EvolveOptions, 'generations')}."),
    migrate_every: Optional[int] = typer.Option(None, "--migrate-every", help="evolve: children between migrations"
                                                                              f"{_default(EvolveOptions, 'migrate_every')}."),
    crossover: Optional[float] = typer.Option(None, "--crossover", help="evolve: chance of a crossover"
                                                                        f"{_default(EvolveOptions, 'crossover')}."),
    parallel: Optional[int] = typer.Option(None, "--parallel", help=f"evolve: children in flight{_default(EvolveOptions, 'parallel')}."),
    start: Optional[str] = typer.Option(None, "--start", help="refine, branch: scratch (the default), or best (start from the "
                                                              "best kernel the workspace has for the task)."),
    configs: Optional[int] = typer.Option(None, "--configs", help="template: configurations judged per task (coarse stage)"
                                                                  f"{_default(TemplateOptions, 'configs')}."),
    finalists: Optional[int] = typer.Option(None, "--finalists", help="template: the fastest configurations judged again in full"
                                                                      f"{_default(TemplateOptions, 'finalists')}."),
    skills: Optional[str] = typer.Option(None, "--skills", help="on: show each task's samples skills the selector picked from "
                                                                "the library (a no-skill scheme is always tried too); off (the default)."),
    learn: Optional[bool] = typer.Option(None, "--learn/--no-learn", help="With --skills on: summarize improving trajectories "
                                                                          "into candidate skills and verify them (the default)."),
    budget_tokens: Optional[int] = typer.Option(None, "--budget-tokens", help="Stop the run after this many tokens."),
    budget_usd: Optional[float] = typer.Option(None, "--budget-usd", help="Stop the run after this many dollars."),
    budget_judge_calls: Optional[int] = typer.Option(None, "--budget-judge-calls", help="Stop the run after this many judge "
                                                                                         "calls (a verdict reused for a repeated "
                                                                                         "kernel counts as one)."),
    budget_wall_s: Optional[float] = typer.Option(None, "--budget-wall-s", help="Stop after this many seconds (of this invocation)."),
    task_judge_calls: Optional[int] = typer.Option(None, "--task-judge-calls", help="Each task's own budget of evaluations: a "
                                                                                    "task that spent it is finished."),
    task_tokens: Optional[int] = typer.Option(None, "--task-tokens", help="Each task's own budget of model tokens (checked "
                                                                          "before each call): a task that spent it is finished."),
    prices: list[str] = PriceOpt,
    concurrency: Optional[int] = typer.Option(None, "--concurrency", help="Model calls in flight (default 8)."),
    workers: Optional[int] = typer.Option(None, "--workers", min=1, help="Concurrent judge evaluations (default: half the cores, at most 8)."),
    max_tokens: list[str] = typer.Option([], "--max-tokens", help="Longest reply: N, or MODEL=N per model (globs; "
                                                                  "repeatable). Default: the model's documented maximum, "
                                                                  "else 32768."),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Where to write the best kernels (default: the run's folder)."),
    resume: Optional[str] = typer.Option(None, "--resume", help="Continue a stopped run; finished work is not repeated."),
    config_file: Optional[Path] = typer.Option(None, "--config", help="The run's settings from a TOML file: any field of "
                                                                      "OptimizeConfig (tables search, llm, judge...); flags "
                                                                      "and --set override it."),
    sets: list[str] = typer.Option([], "--set", help="KEY=VALUE: a setting by its dotted path, e.g. search.turns=4, "
                                                     "judge.seeds=3, llm.temperature=0.2 (a TOML value); a name that is no "
                                                     "field of OptimizeConfig is a task's size constant, e.g. batch_size=16 "
                                                     "(repeatable)."),
    device: Optional[str] = typer.Option(None, "--device", "-d", help="cuda (the default) or cpu."), workspace: Path = WorkspaceOpt,
    as_json: bool = JsonOpt, baselines: bool = BaselinesOpt, gpus: Optional[str] = GpusOpt, ray: Optional[str] = RayOpt,
    no_cache: bool = typer.Option(False, "--no-cache", help="Ask the model every request again rather than take the "
                                                             "workspace's cached reply to an identical one (new replies "
                                                             "replace the cached ones)."),
) -> None:
    """Write faster kernels for every task of TARGET with a language model (or, with --strategy template, by searching
    Triton GEMM templates); every one is proved by the judge. Exit 0 when the run finished, 3 when it stopped early
    (budget, batch replies pending, evaluations the judge failed on its side, a kill; 130 for Ctrl-C): every stop
    prints the command that continues it (--resume)."""
    if skills not in (None, "on", "off"):
        raise UsageError(f"--skills {skills!r}: use on or off")
    budgets = {path: ctx.params[name] for name, path in _BUDGETS.items()}
    if resume is None:  # checked before the workspace is opened: a mistake leaves no workspace behind
        flags = {"target": target, "shapes": None if shapes is None else [shapes], "out": None if out_dir is None else str(out_dir),
                 "search.skills.enabled": None if skills is None else skills == "on",
                 **{path: ctx.params[name] for name, path in _PATHS.items()}, **budgets,
                 **llm_flags(model, base_url, None, prices, max_tokens)}
        config = new_config(config_file, flags, sets, _OPTIONS)
    else:
        # by the enum's name: typer ships its own copy of click
        given = [p.opts[0] for p in ctx.command.params if p.name not in _RESUME_OPTIONS
                 and getattr(ctx.get_parameter_source(p.name), "name", "") == "COMMANDLINE"]
        if given:
            raise UsageError(f"a resumed run keeps its own settings: drop {', '.join(given)} (it takes budgets and --out)")
        existing_workspace(workspace)
    with Store(workspace) as store:
        if resume is not None:
            config = resumed_config(store, resume, target, budgets, out_dir, _OPTIONS)
        if config.out is not None and Path(config.out).exists() and not Path(config.out).is_dir():
            raise UsageError(f"--out {config.out}: a file, not a directory")
        tasks = tasks_of(config)
        reason = unsuited(config.search.strategy, tasks)
        if reason is not None:
            raise UsageError(reason)
        check_device(config.device)
        client = make_client(config.llm, cache_dir=store.workspace / "llm-cache", refresh_cache=no_cache)
        client.check()  # an unreachable endpoint or a bad key fails here, before any task starts
        found = client.survey() if resume is not None else None
        if found is not None:  # what a resumed run finds first: replies matched, requests still pending and where
            err.print(f"resuming: {found}", highlight=False, soft_wrap=True)
        run_id = resume
        try:
            with open_executor(config.device, cache_dir=store.cache_dir, config=config.judge, gpus=gpus, ray=ray,
                               workers=config.workers) as pool:
                dev = pool.description
                optimizer = Optimizer(config, store, client, pool, dev)
                run_id = resume or optimizer.start(tasks)
                kernels = "kernel metrics by ncu" if optimizer.profiler else f"no kernel metrics ({optimizer.no_profile})"
                err.print(f"run {run_id}: {counted(len(tasks), 'task')}, {optimizer.config.search.describe()}, {config.llm.model} on "
                          f"{dev.name}, {kernels}", highlight=False, soft_wrap=True)
                done = sum(1 for r in store.run_tasks(run_id) if r.finished_at is not None)
                bar = Progress(TextColumn("optimizing"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                               TimeElapsedColumn())
                per_task = Progress(SpinnerColumn(), TextColumn("{task.description}"))
                with Live(Group(bar, per_task), console=err, transient=True):
                    optimizer.emit = ProgressView(bar, per_task, len(tasks), done, client.spend)
                    result = optimizer.run(run_id, tasks)
                if baselines:  # once the search is done: nothing else runs while they are timed
                    fill_baselines(store, pool, [(t.task, store.verdict(t.best.verdict_id)) for t in result.tasks
                                                 if t.best is not None and t.best.verdict_id is not None],
                                   track=lambda items: progress(items, "timing baselines"))
        except KeyboardInterrupt as e:  # Ctrl-C, or a kill (Terminated): once the run exists, it can be continued
            if run_id is None:
                raise
            killed = isinstance(e, Terminated)
            raise RunInterrupted(continue_line("terminated (SIGTERM)" if killed else "interrupted (Ctrl-C)",
                                               resume_command(run_id, workspace, (), config)), 3 if killed else 130) from None
        run = load_run(store, run_id)
        report = write_report(store, run_id, run=run)
    command = resume_command(run_id, workspace, result.spent, config) if result.stopped else None
    if as_json:
        print(json.dumps({"run_id": run_id, "stopped": result.stopped, "resume": command, "report": str(report), "tasks": [
            {"task": t.task.key, "speedup": t.best.speedup if t.best else None, "attempts": t.attempts,
             "finished": t.finished, "file": str(t.best_file) if t.best_file else None, "error": t.error}
            for t in result.tasks], "summary": [s.to_dict() for s in _run_summaries(run)],
            "spend": result.spend.__dict__}, indent=1))
    else:
        print_optimize(result, report, run)
    if command is not None:
        print(continue_line(f"stopped: {result.stopped}", command), file=sys.stderr)
        raise typer.Exit(3)


def continue_line(why: str, command: str) -> str:
    """What every stop of a run prints last: why it stopped, and the command that continues it."""
    return f"{why}. Everything so far is recorded; continue with: {command}"


def resume_command(run_id: str, workspace: Path, spent: tuple[str, ...], config: OptimizeConfig) -> str:
    """The command that continues a stopped run: its workspace when not the default one, and a larger
    value for each spent budget (a budget covers the whole run, so resuming under the same one stops at once)."""
    words = ["kernelcraft", "optimize", "--resume", run_id]
    if workspace != DEFAULT_WORKSPACE:
        words += ["-w", str(workspace)]
    raises = [(f"--{name.replace('_', '-')}", reduce(getattr, path.split("."), config)) for name, path in _BUDGETS.items()
              if path in spent]
    command = shlex.join(words + [word for flag, _ in raises for word in (flag, "N")])
    if raises:
        limits = ", ".join(f"{flag} above {value:g}" for flag, value in raises)
        command += f" (N: {limits}; the run spent {'that budget' if len(raises) == 1 else 'those budgets'})"
    return command
