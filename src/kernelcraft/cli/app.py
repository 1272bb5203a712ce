"""The `kernelcraft` command: parse, call, print. Logic lives in the packages; what the commands share is in
common.py, and `optimize` in optimize.py."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .. import __version__
from ..judge import (SCENARIOS, DeviceUnavailable, Job, Judge, RayUnavailable, TaskRunError, Verdict, baseline_kind,
                     judged_map, open_executor)
from ..judge.isolation import CacheClosed
from ..judge.sandbox import shutdown
from ..llm import EndpointError
from ..report import TaskOutcome, baseline_label, counted, status_text, summarize_by_level, summary_table, write_report
from ..settings import SettingsError
from ..skills import SkillError, SkillFileError
from ..store import SUMMARY_BASELINES, Store, StoreError, baselines_job, fill_baselines, record_baselines
from ..tasks import Task, TaskError, find_solution, resolve_task, sized_task
from .common import (USER_ERROR, AtolOpt, BaselinesOpt, ConfigOpt, DeviceOpt, FromModelOpt, GpusOpt, InitInputsOpt, InputsOpt, JsonOpt, RayOpt, RtolOpt,
                     RunInterrupted, SampleOpt, SeedsOpt, SetOpt, ShapesOpt, Terminated, UsageError, WorkspaceOpt, candidate_source,
                     err, judge_config, out, click_message, existing_workspace, fail, print_verdict, progress, read_text, stages,
                     target_tasks)

app = typer.Typer(add_completion=False, no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]},
                  help="LLM-written kernels for PyTorch, with a judge that proves every speedup.")
def _version(shown: bool) -> None:
    if shown:
        print(f"kernelcraft {__version__}")
        raise typer.Exit(0)


@app.callback()
def _options(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                          help="Print kernelcraft's version and exit.")) -> None:
    """LLM-written kernels for PyTorch, with a judge that proves every speedup."""


tasks_app = typer.Typer(no_args_is_help=True, help="List, show and vet tasks.")
app.add_typer(tasks_app, name="tasks")
TargetArg = typer.Argument(..., help="A task file, a directory, a KernelBench tree, 'examples' or 'hgemm'.")


# -- tasks --------------------------------------------------------------------------------
@tasks_app.command("list")
def tasks_list(path: str = TargetArg,
               sample: Optional[int] = SampleOpt, shapes: Optional[str] = ShapesOpt, from_model: Optional[str] = FromModelOpt,
               inputs: Optional[str] = InputsOpt, init_inputs: Optional[str] = InitInputsOpt, as_json: bool = JsonOpt) -> None:
    """List the tasks of a suite."""
    tasks = target_tasks(path, "cpu", [], sample, shapes, from_model, inputs, init_inputs)
    if as_json:
        print(json.dumps([t.to_dict() for t in tasks], indent=1))
        return
    table = Table(title=counted(len(tasks), "task"), title_justify="left")
    for col in ("key", "level", "id", "name", "dtype", "tags"):
        table.add_column(col, overflow="fold")
    for t in tasks:
        table.add_row(t.key, str(t.level or ""), str(t.problem_id or ""), t.name, t.meta.dtype, ",".join(t.meta.tags))
    out.print(table)


@tasks_app.command("show")
def tasks_show(task: str = typer.Argument(..., help="A task file or a bundled example name."), as_json: bool = JsonOpt) -> None:
    """Show a task's metadata and source."""
    t = resolve_task(task)
    if as_json:
        print(json.dumps({**t.to_dict(), "source": t.source}, indent=1))
        return
    out.print(f"[bold]{t.key}[/bold]  level={t.level} id={t.problem_id} dtype={t.meta.dtype} tags={','.join(t.meta.tags)}")
    if t.meta.description:
        out.print(t.meta.description)
    if t.meta.sizes:
        out.print(f"sizes: {t.meta.sizes}")
    out.print(t.source, highlight=False, markup=False)


@tasks_app.command("vet")
def tasks_vet(path: str = TargetArg,
              device: str = DeviceOpt, workspace: Path = WorkspaceOpt, sets: list[str] = SetOpt,
              sample: Optional[int] = SampleOpt, shapes: Optional[str] = ShapesOpt, from_model: Optional[str] = FromModelOpt,
              inputs: Optional[str] = InputsOpt, init_inputs: Optional[str] = InitInputsOpt,
              seeds: int = typer.Option(3, "--seeds", min=1, help="Seeds per input distribution."),
              baseline: bool = typer.Option(True, "--baseline/--no-baseline", help="Also record eager (strict and at PyTorch's "
                                                                                     "defaults) and torch.compile times."),
              as_json: bool = JsonOpt, gpus: Optional[str] = GpusOpt, ray: Optional[str] = RayOpt) -> None:
    """Flag degenerate tasks (constant, zero or input-independent outputs, nondeterminism, failures)
    and record eager (strict and at PyTorch's defaults) and torch.compile baseline times in the store."""
    tasks = target_tasks(path, device, sets, sample, shapes, from_model, inputs, init_inputs)
    results = []
    with Store(workspace) as store, open_executor(device, cache_dir=store.cache_dir, gpus=gpus, ray=ray) as pool:
        vetted = [pool.submit(Job(t, "", kind="vet", vet_seeds=seeds)) for t in tasks]
        timed = {}
        for t, future in zip(tasks, progress(vetted, "vetting")):
            r = future.result()
            rep = r.vet if r.vet is not None else {
                "degenerate": True, "findings": [{"code": "reference_error", "distribution": "task", "message": r.error}]}
            store.put_task(t)
            store.record_vetting(t.key, device, rep["degenerate"], rep["findings"])
            results.append({"task": t.key, "degenerate": rep["degenerate"], "findings": rep["findings"]})
            if baseline and r.vet is not None:
                timed[t.key] = pool.submit(baselines_job(t))
        for row in results:
            if row["task"] in timed:
                row["baseline_ms"] = record_baselines(store, device, timed[row["task"]].result())
    if as_json:
        print(json.dumps(results, indent=1))
        return
    table = Table(title="task vetting", title_justify="left")
    for col in ("task", "verdict", "findings", *(f"{baseline_label(k)} ms" for k in SUMMARY_BASELINES)):
        table.add_column(col)
    for r in results:
        findings = "; ".join(f"{f['code']} ({f['distribution']}): {f['message']}" for f in r["findings"]) or "-"
        b = r.get("baseline_ms") or {}
        table.add_row(r["task"], status_text("DEGENERATE" if r["degenerate"] else "ok"), findings,
                      *(f"{b[k]:.4g}" if k in b else "-" for k in SUMMARY_BASELINES))
    out.print(table)


@app.command("baseline")
def baseline_cmd(suite: str = TargetArg,
                 device: str = DeviceOpt, workspace: Path = WorkspaceOpt, sets: list[str] = SetOpt,
                 sample: Optional[int] = SampleOpt, shapes: Optional[str] = ShapesOpt, from_model: Optional[str] = FromModelOpt,
                 inputs: Optional[str] = InputsOpt, init_inputs: Optional[str] = InitInputsOpt,
                 compiled: bool = typer.Option(True, "--compile/--no-compile", help="Also time torch.compile (at PyTorch's "
                                                                                     "defaults)."),
                 tunableop: bool = typer.Option(False, "--tunableop", help="Also time PyTorch's TunableOp (cuBLAS/cuBLASLt "
                                                                            "autotuned per shape; CUDA only)."),
                 scenario: str = typer.Option("offline", "--scenario", help="offline (back to back), server (random "
                                                                            "pauses between calls), sustained (back to "
                                                                            "back on a device heated until its clock "
                                                                            "settled), both (offline and server) or all."),
                 gpus: Optional[str] = GpusOpt, ray: Optional[str] = RayOpt) -> None:
    """Record the reference's baseline times on this device: eager (strict, and at PyTorch's defaults), torch.compile
    (at PyTorch's defaults), TunableOp."""
    scenarios = {"both": ("offline", "server"), "all": SCENARIOS}.get(scenario, (scenario,))
    if not set(scenarios) <= set(SCENARIOS):
        raise UsageError(f"--scenario {scenario!r}: use {', '.join(SCENARIOS)}, both or all")
    if tunableop and device != "cuda":
        raise UsageError("--tunableop needs --device cuda")
    tasks = target_tasks(suite, device, sets, sample, shapes, from_model, inputs, init_inputs)
    kinds = [baseline_kind(side, sc) for sc in scenarios for side in ("reference", "reference_default", "compiled", "tunableop")
             if (side != "compiled" or compiled) and (side != "tunableop" or tunableop)]
    table = Table(title="baselines (ms, median)", title_justify="left",
                  caption="strict: TF32 off everywhere (the judge's reference); PyTorch defaults: what users run",
                  caption_justify="left")
    table.add_column("task")
    for kind in kinds:
        table.add_column(baseline_label(kind), justify="right")
    with Store(workspace) as store, open_executor(device, cache_dir=store.cache_dir, gpus=gpus, ray=ray) as pool:
        futures = [pool.submit(baselines_job(t, compiled, tunableop, scenarios)) for t in tasks]
        for t, future in zip(tasks, progress(futures, "timing baselines")):
            store.put_task(t)
            b = record_baselines(store, device, future.result())
            table.add_row(t.key, *(f"{b[k]:.4g}" if k in b else "-" for k in kinds))
    out.print(table)


# -- eval ---------------------------------------------------------------------------------
@app.command("eval")
def eval_cmd(task: str = typer.Argument(..., help="A task file or a bundled example name."),
             candidate: Path = typer.Argument(..., help="The candidate's Python file (defines ModelNew)."),
             device: str = DeviceOpt, workspace: Path = WorkspaceOpt, as_json: bool = JsonOpt, sets: list[str] = SetOpt,
             config: Optional[Path] = ConfigOpt, seeds: Optional[int] = SeedsOpt, atol: Optional[float] = AtolOpt,
             rtol: Optional[float] = RtolOpt) -> None:
    """Evaluate one candidate against one task: one verdict. Exit 0 if correct, 1 otherwise."""
    t = sized_task(task, device, sets)
    source = candidate_source(candidate)
    cfg = judge_config(config, seeds, atol, rtol)
    with Store(workspace) as store:
        judge = Judge(device, cache_dir=store.cache_dir, config=cfg)
        with stages(candidate.name) as on_stage:
            v = judge.evaluate(t, source, on_stage=on_stage)
        vid = store.record_verdict(t, source, v, origin=str(candidate))
    if as_json:
        print(json.dumps({"verdict_id": vid, **v.to_dict()}, indent=1))
    else:
        print_verdict(v)
        out.print(f"verdict {vid} recorded in {store.path}", highlight=False)
    raise typer.Exit(0 if v.correct else 1)


@app.command("eval-suite")
def eval_suite_cmd(suite: str = typer.Argument(..., help="A task directory, a KernelBench tree, 'examples' or 'hgemm'."),
                   solutions: Path = typer.Argument(..., help="Directory of solutions named by problem (hgemm: MxNxK.py)."),
                   device: str = DeviceOpt, workspace: Path = WorkspaceOpt, as_json: bool = JsonOpt,
                   sample: Optional[int] = SampleOpt, shapes: Optional[str] = ShapesOpt, from_model: Optional[str] = FromModelOpt,
                   inputs: Optional[str] = InputsOpt, init_inputs: Optional[str] = InitInputsOpt,
                   workers: Optional[int] = typer.Option(None, "--workers", min=1, help="Concurrent evaluations (default: half the cores, at most 8)."),
                   sets: list[str] = SetOpt, config: Optional[Path] = ConfigOpt, seeds: Optional[int] = SeedsOpt,
                   atol: Optional[float] = AtolOpt, rtol: Optional[float] = RtolOpt, baselines: bool = BaselinesOpt,
                   gpus: Optional[str] = GpusOpt, ray: Optional[str] = RayOpt) -> None:
    """KernelBench-style batch evaluation: per level, correct count, fast_p, geomean and median speedup, win rate, against
    eager (strict) and each baseline users compare with, each speedup counted as the judge counts it (docs/judge.md:
    Library calls and coverage); tasks the judge failed on (judge_error) reported apart."""
    if not solutions.is_dir():
        raise UsageError(f"{solutions}: no such solutions directory")
    tasks = target_tasks(suite, device, sets, sample, shapes, from_model, inputs, init_inputs)
    cfg = judge_config(config, seeds, atol, rtol)
    jobs, missing = [], []
    for t in tasks:
        p = find_solution(t, solutions)
        if p is None:
            missing.append(t)
        else:
            jobs.append(Job(t, read_text(p), tag=str(p)))
    if not jobs:
        example = f", e.g. {tasks[0].key}.py" if tasks else ""
        raise UsageError(f"{solutions}: no solution for any of the {len(tasks)} tasks (named by problem{example})")
    rows: list[dict[str, Any]] = [{"task": t.key, "level": t.level, "status": "missing"} for t in missing]
    outcomes = [TaskOutcome(t.key, t.level, False) for t in missing]
    judged: list[tuple[Task, Verdict]] = []
    with Store(workspace) as store:
        run_id = store.start_run("eval-suite", {"suite": suite, "solutions": str(solutions), "device": device})
        with open_executor(device, cache_dir=store.cache_dir, config=cfg, gpus=gpus, ray=ray, workers=workers) as pool:
            with Progress(TextColumn("evaluating"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                          TimeElapsedColumn(), console=err, transient=True) as bar:
                counter = bar.add_task("eval", total=len(jobs), info="")
                correct = 0
                for r in judged_map(pool, jobs):
                    t = r.job.task
                    if r.verdict is None:
                        rows.append({"task": t.key, "level": t.level, "status": "task_error", "message": r.error})
                        outcomes.append(TaskOutcome(t.key, t.level, False))
                    else:
                        v = r.verdict
                        vid = store.record_verdict(t, r.job.source, v, run_id=run_id, origin=r.job.tag)
                        judged.append((t, v))
                        correct += v.correct
                        rows.append({"task": t.key, "level": t.level, "status": v.status.value, "speedup": v.speedup,
                                     "effective_speedup": v.effective_speedup, "flags": [f.code for f in v.flags],
                                     "message": v.message, "verdict_id": vid})
                    bar.update(counter, advance=1, info=f"{correct} correct")
            store.finish_run(run_id)
            if baselines:  # once every verdict is in: nothing else runs while they are timed
                fill_baselines(store, pool, judged, track=lambda items: progress(items, "timing baselines"))
        outcomes += [TaskOutcome.of_verdict(t.key, t.level, v, store.baselines(t.key, str(v.env.get("device_name", ""))))
                     for t, v in judged]
    summaries = summarize_by_level(outcomes)
    if as_json:
        print(json.dumps({"run_id": run_id, "results": rows, "summary": [s.to_dict() for s in summaries]}, indent=1, default=str))
        return
    table = Table(title=f"run {run_id}", title_justify="left")
    for col in ("task", "status", "speedup", "flags", "message"):
        table.add_column(col)
    for r in sorted(rows, key=lambda r: r["task"]):
        sp = f"{r['speedup']:.2f}x" if r.get("speedup") else "-"
        if r.get("speedup") and r["effective_speedup"] != r["speedup"]:
            sp += f" (counted {r['effective_speedup']:.2f}x)"
        table.add_row(r["task"], status_text(r["status"]), sp, ",".join(r.get("flags", [])), (r.get("message") or "")[:90])
    out.print(table)
    out.print(summary_table(summaries))


# -- report and the entry point ---------------------------------------------------------------
@app.command("report")
def report_cmd(run_id: str = typer.Argument(..., help="The run's id (printed by optimize)."), workspace: Path = WorkspaceOpt,
               out_file: Optional[Path] = typer.Option(None, "--out", help="The HTML file (default: the run's folder).")) -> None:
    """Write a run's report: one self-contained HTML file with its summary, plots, kernels and trajectories."""
    existing_workspace(workspace)
    with Store(workspace) as store:
        try:
            store.run(run_id)
        except KeyError as e:
            raise UsageError(str(e.args[0])) from None
        path = write_report(store, run_id, out_file)
    out.print(f"report: {path}", highlight=False)


def _interrupted(message: str = "interrupted: every verdict finished so far is in the store", code: int = 130) -> None:
    shutdown()  # its workers and builders killed, their scratch removed: os._exit runs no atexit hook
    print(message, file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    # Every write is already committed; threads still waiting on a model's reply must not hold
    # the exit (a normal exit would join them).
    os._exit(code)


def _terminate(signum: int, frame: Any) -> None:
    raise Terminated  # a kill ends a run as Ctrl-C does: workers stopped, the run resumable


def main() -> None:
    """Entry point: every user mistake is one line (with --json, one JSON object: common.fail) and a non-zero exit,
    never a traceback."""
    debug = bool(os.environ.get("KERNELCRAFT_DEBUG"))
    signal.signal(signal.SIGTERM, _terminate)
    if USER_ERROR is not None:  # a config file that cannot be read: before any command takes its defaults
        fail(USER_ERROR)
    try:
        rc = app(standalone_mode=False)  # click returns a command's typer.Exit code here
        if rc == 130:  # typer turns Ctrl-C into Exit(130)
            _interrupted()
        sys.exit(rc if isinstance(rc, int) else 0)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except RunInterrupted as e:
        _interrupted(str(e), e.code)
    except (TaskError, TaskRunError, DeviceUnavailable, RayUnavailable, CacheClosed, UsageError, EndpointError, SkillError,
            SkillFileError, StoreError, SettingsError) as e:
        fail(str(e))
    except OSError as e:
        if e.filename is None:  # not about a path the user gave
            _internal(e, debug)
        fail(f"{e.filename}: {e.strerror}")
    except UnicodeDecodeError as e:
        fail(f"a file given is not UTF-8 text ({e.reason} at byte {e.start})")
    except KeyboardInterrupt:
        _interrupted()
    except Exception as e:  # noqa: BLE001 - last resort: one line, the traceback only on request
        # click's exceptions, by shape: typer ships its own copy of click in recent versions
        if type(e).__name__ == "NoArgsIsHelpError":  # a bare group: its help, already shown
            sys.exit(2)
        if callable(getattr(e, "format_message", None)) and isinstance(getattr(e, "exit_code", None), int):
            fail(click_message(e), e.exit_code)
        if type(e).__name__ == "Abort":  # click's form of Ctrl-C
            _interrupted()
        _internal(e, debug)


def _internal(e: Exception, debug: bool) -> None:
    if debug:
        raise e
    fail(f"{type(e).__name__}: {e} (set KERNELCRAFT_DEBUG=1 for the traceback)", 1, label="internal error")
