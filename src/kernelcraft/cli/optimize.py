"""`kernelcraft optimize`: a run's configuration (run_config.py), its tasks, the pool and the optimizer, a live
progress line, then its table, summary and report."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from ..judge import check_device, open_executor
from ..llm import Spend, make_client
from ..report import RunReport, Summary, load_run, not_judged_text, status_text, summarize_by_level, summary_table, write_report
from ..search import (BranchOptions, EvolveOptions, OptimizeConfig, Optimizer, RunResult, SearchConfig, SearchEvent, TemplateOptions,
                      unsuited)
from ..store import Store, fill_baselines
from ..tasks import Task, resolve_target
from .app import app
from .common import (BaselinesOpt, FromModelOpt, GpusOpt, InitInputsOpt, InputsOpt, JsonOpt, RayOpt, SampleOpt, ShapesOpt, UsageError, WorkspaceOpt, err,
                     option_default, out, progress)
from .run_config import MODEL_SPEC, llm_flags, new_config, resumed_config

# What `optimize --resume` may be given; every other setting is the run's own (a TARGET has its own message).
_RESUME_OPTIONS = {"target", "resume", "budget_tokens", "budget_usd", "budget_judge_calls", "budget_wall_s", "out_dir", "workspace",
                   "as_json", "baselines", "gpus", "ray"}  # where it judges: this invocation's machine, not the run's
# The options that set a field of OptimizeConfig, by its dotted path; the model and endpoint ones go through llm_flags.
_PATHS = {"inputs": "inputs", "init_inputs": "init_inputs", "sample": "sample", "from_model": "from_model", "device": "device",
          "workers": "workers", "strategy": "search.strategy", "turns": "search.turns", "samples": "search.samples",
          "language": "search.language", "start": "search.start", "width": "search.branch.width", "impls": "search.branch.impls",
          "islands": "search.evolve.islands", "generations": "search.evolve.generations",
          "migrate_every": "search.evolve.migrate_every", "crossover": "search.evolve.crossover",
          "parallel": "search.evolve.parallel", "configs": "search.template.configs", "finalists": "search.template.finalists",
          "learn": "search.skills.learn", "concurrency": "llm.concurrency"}
_BUDGETS = {"budget_tokens": "llm.budget_tokens", "budget_usd": "llm.budget_usd",
            "budget_judge_calls": "search.budget_judge_calls", "budget_wall_s": "search.budget_wall_s"}
# Each setting's option, to name a bad value as the user gave it: "--budget-usd must be > 0".
_OPTIONS = {path: "--" + name.replace("_", "-") for name, path in {**_PATHS, **_BUDGETS}.items()}


def _default(model: type, field: str) -> str:
    return f" (default {option_default(model, field)})"


def optimize_tasks(config: OptimizeConfig) -> list[Task]:
    """The tasks of a run's target, at its sizes."""
    return resolve_target(config.target, device=config.device, sets=config.sets, inputs=config.inputs,
                          init_inputs=config.init_inputs, sample=config.sample, shapes=config.shapes, from_model=config.from_model)


class _ProgressView:
    """The live line of an optimize run: tasks done, attempts, best speedup, tokens and cost."""

    def __init__(self, bar: Progress, total: int, done: int, spend: Spend) -> None:
        self.bar, self.spend = bar, spend
        self.id = bar.add_task("optimizing", total=total, completed=done, info="")
        self.attempts, self.correct, self.best = 0, 0, None

    def __call__(self, e: SearchEvent) -> None:
        if e.kind == "attempt":
            self.attempts += 1
            self.correct += e.status == "correct"
            if e.speedup is not None and (self.best is None or e.speedup > self.best):
                self.best = e.speedup
        elif e.kind == "task_done":
            self.bar.advance(self.id)
            if e.message:
                err.print(f"warning: {e.task_key}: {e.message}", highlight=False)
        s = self.spend
        cost = f"${s.cost_usd:.2f}" + ("+?" if s.unpriced_calls else "")
        best = f"{self.best:.2f}x" if self.best is not None else "-"
        self.bar.update(self.id, info=f"{self.attempts} attempts, {self.correct} correct, best {best}, "
                                      f"{s.tokens:,} tokens, {cost}")


def _run_summaries(run: RunReport) -> list[Summary]:
    """An optimize run's summaries, per level, as its HTML report counts them."""
    return summarize_by_level([t.outcome() for t in run.tasks])


def print_optimize(result: RunResult, report: Path, run: RunReport) -> None:
    """A finished (or stopped) run: its best kernel per task, its summary, its spend, where its files are."""
    table = Table(title=f"run {result.run_id}", title_justify="left")
    for col in ("task", "best", "attempts", "kernel"):
        table.add_column(col)
    not_judged = {t.key: t.not_judged for t in run.tasks}
    for t in result.tasks:
        if t.best is not None:
            best = Text(f"{t.best.speedup:.2f}x", style="green")
        elif not_judged.get(t.task.key):
            best = status_text("not judged") + Text(f" ({not_judged[t.task.key]})")
        else:
            best = status_text(t.error and "task error" or ("no correct candidate" if t.finished else "unfinished"))
        table.add_row(t.task.key, best, str(t.attempts), str(t.best_file or "-"))
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
    base_url: Optional[str] = typer.Option(None, "--base-url", help="The endpoint, e.g. http://localhost:8000/v1."),
    inputs: Optional[str] = InputsOpt, init_inputs: Optional[str] = InitInputsOpt,
    sample: Optional[int] = SampleOpt, shapes: Optional[str] = ShapesOpt, from_model: Optional[str] = FromModelOpt,
    strategy: Optional[str] = typer.Option(None, "--strategy", help=f"Search strategy{_default(SearchConfig, 'strategy')}."),
    turns: Optional[int] = typer.Option(None, "--turns", help=f"Refinement turns per sample{_default(SearchConfig, 'turns')}."),
    samples: Optional[int] = typer.Option(None, "--samples", help=f"Independent samples per task{_default(SearchConfig, 'samples')}."),
    language: Optional[str] = typer.Option(None, "--language", help="cuda (load_inline, the default) or triton."),
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
    budget_judge_calls: Optional[int] = typer.Option(None, "--budget-judge-calls", help="Stop the run after this many evaluations."),
    budget_wall_s: Optional[float] = typer.Option(None, "--budget-wall-s", help="Stop after this many seconds (of this invocation)."),
    prices: list[str] = typer.Option([], "--price", help="MODEL=IN,OUT dollars per million tokens (repeatable; globs)."),
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
) -> None:
    """Write faster kernels for every task of TARGET with a language model (or, with --strategy template, by searching
    Triton GEMM templates); every one is proved by the judge. Exit 0 when the run finished, 3 when it stopped early
    (budget, batch replies pending, evaluations the judge failed on its side): resume it with --resume."""
    if skills not in (None, "on", "off"):
        raise UsageError(f"--skills {skills!r}: use on or off")
    budgets = {path: ctx.params[name] for name, path in _BUDGETS.items()}
    with Store(workspace) as store:
        if resume is not None:
            # by the enum's name: typer ships its own copy of click
            given = [p.opts[0] for p in ctx.command.params if p.name not in _RESUME_OPTIONS
                     and getattr(ctx.get_parameter_source(p.name), "name", "") == "COMMANDLINE"]
            if given:
                raise UsageError(f"a resumed run keeps its own settings: drop {', '.join(given)} (it takes budgets and --out)")
            config = resumed_config(store, resume, target, budgets, out_dir, _OPTIONS)
        else:
            flags = {"target": target, "shapes": None if shapes is None else [shapes], "out": None if out_dir is None else str(out_dir),
                     "search.skills.enabled": None if skills is None else skills == "on",
                     **{path: ctx.params[name] for name, path in _PATHS.items()}, **budgets,
                     **llm_flags(model, base_url, None, prices, max_tokens)}
            config = new_config(config_file, flags, sets, _OPTIONS)
        if config.out is not None and Path(config.out).exists() and not Path(config.out).is_dir():
            raise UsageError(f"--out {config.out}: a file, not a directory")
        tasks = optimize_tasks(config)
        reason = unsuited(config.search.strategy, tasks)
        if reason is not None:
            raise UsageError(reason)
        check_device(config.device)
        client = make_client(config.llm, cache_dir=store.workspace / "llm-cache")
        client.check()  # an unreachable endpoint or a bad key fails here, before any task starts
        found = client.survey() if resume is not None else None
        if found is not None:  # what a resumed run finds first: replies matched, requests still pending and where
            err.print(f"resuming: {found}", highlight=False, soft_wrap=True)
        with open_executor(config.device, cache_dir=store.cache_dir, config=config.judge, gpus=gpus, ray=ray,
                           workers=config.workers) as pool:
            dev = pool.description
            optimizer = Optimizer(config, store, client, pool, dev)
            run_id = resume or optimizer.start(tasks)
            kernels = "kernel metrics by ncu" if optimizer.profiler else f"no kernel metrics ({optimizer.no_profile})"
            err.print(f"run {run_id}: {len(tasks)} tasks, {optimizer.config.search.describe()}, {config.llm.model} on {dev.name}, "
                      f"{kernels}", highlight=False)
            done = sum(1 for r in store.run_tasks(run_id) if r.finished_at is not None)
            with Progress(TextColumn("optimizing"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                          TimeElapsedColumn(), console=err, transient=True) as bar:
                optimizer.emit = _ProgressView(bar, len(tasks), done, client.spend)
                result = optimizer.run(run_id, tasks)
            if baselines:  # once the search is done: nothing else runs while they are timed
                fill_baselines(store, pool, [(t.task, store.verdict(t.best.verdict_id)) for t in result.tasks
                                             if t.best is not None and t.best.verdict_id is not None],
                               track=lambda items: progress(items, "timing baselines"))
        run = load_run(store, run_id)
        report = write_report(store, run_id, run=run)
    if as_json:
        print(json.dumps({"run_id": run_id, "stopped": result.stopped, "report": str(report), "tasks": [
            {"task": t.task.key, "speedup": t.best.speedup if t.best else None, "attempts": t.attempts,
             "finished": t.finished, "file": str(t.best_file) if t.best_file else None, "error": t.error}
            for t in result.tasks], "summary": [s.to_dict() for s in _run_summaries(run)],
            "spend": result.spend.__dict__}, indent=1))
    else:
        print_optimize(result, report, run)
    if result.stopped:
        print(f"stopped: {result.stopped}. Everything so far is recorded; continue with: "
              f"kernelcraft optimize --resume {run_id}", file=sys.stderr)
        raise typer.Exit(3)
