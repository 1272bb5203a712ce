"""The `kernelcraft` command: parse, call, print. Logic lives in the packages."""

from __future__ import annotations

import ast
import json
import os
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .judge import DeviceUnavailable, Job, Judge, JudgeConfig, LocalPool, TaskRunError, Verdict
from .report import TaskOutcome, status_text, summarize_by_level, summary_table, verdict_lines, verdict_table
from .store import Store
from .tasks import Task, TaskError, find_solution, load_suite, resolve_task

app = typer.Typer(add_completion=False, no_args_is_help=True, help="LLM-written kernels for PyTorch, with a judge that proves every speedup.")
tasks_app = typer.Typer(no_args_is_help=True, help="List, show and vet tasks.")
app.add_typer(tasks_app, name="tasks")
# Wide enough that task keys and messages are not cut when output goes to a file or a pipe.
out = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True)


class UsageError(Exception):
    """A mistake in what the user asked for; printed as one line."""


WorkspaceOpt = typer.Option(Path(os.environ.get("KERNELCRAFT_WORKSPACE", "kernelcraft-workspace")), "--workspace", "-w",
                            help="Workspace directory (database, build cache, artifacts).")
DeviceOpt = typer.Option("cuda", "--device", "-d", help="cuda or cpu.")
JsonOpt = typer.Option(False, "--json", help="Print JSON for machines.")
SetOpt = typer.Option([], "--set", help="Override a task's module-level size constant, e.g. --set batch_size=16 (repeatable).")
ConfigOpt = typer.Option(None, "--config", help="Judge options from a TOML file (keys of JudgeConfig).")
SeedsOpt = typer.Option(None, "--seeds", help="Correctness seeds (default 5).")
AtolOpt = typer.Option(None, "--atol", help="Absolute tolerance (default per dtype: fp32 1e-4, fp16/bf16 1e-2).")
RtolOpt = typer.Option(None, "--rtol", help="Relative tolerance (default per dtype).")


def _parse_sets(items: list[str]) -> dict[str, Any]:
    sizes: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            raise UsageError(f"--set {item!r}: expected NAME=VALUE")
        try:
            sizes[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            raise UsageError(f"--set {item!r}: {value!r} is not a Python literal") from None
    return sizes


def _config(path: Optional[Path], seeds: Optional[int], atol: Optional[float], rtol: Optional[float]) -> JudgeConfig:
    data: dict[str, Any] = {}
    if path is not None:
        if not path.is_file():
            raise UsageError(f"{path}: no such config file")
        if sys.version_info >= (3, 11):
            import tomllib
        else:
            import tomli as tomllib
        try:
            data = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as e:
            raise UsageError(f"{path}: {e}") from None
    for key, value in (("seeds", seeds), ("atol", atol), ("rtol", rtol)):
        if value is not None:
            data[key] = value
    try:
        return JudgeConfig().with_overrides(data)
    except (TypeError, ValueError) as e:
        raise UsageError(f"judge config: {e}") from None


def _task(spec: str, device: str, sets: list[str]) -> Task:
    return resolve_task(spec).with_sizes(device, _parse_sets(sets))


def _suite(path: str, device: str, sets: list[str]) -> list[Task]:
    sizes = _parse_sets(sets)
    return [t.with_sizes(device, sizes) for t in load_suite(path)]


def _print_verdict(v: Verdict) -> None:
    out.print(verdict_table(v))
    for line in verdict_lines(v):
        out.print(line, highlight=False)


# -- tasks --------------------------------------------------------------------------------
@tasks_app.command("list")
def tasks_list(path: str = typer.Argument(..., help="A task file, a directory, a KernelBench tree, or 'examples'."),
               as_json: bool = JsonOpt) -> None:
    """List the tasks of a suite."""
    tasks = load_suite(path)
    if as_json:
        print(json.dumps([t.to_dict() for t in tasks], indent=1))
        return
    table = Table(title=f"{len(tasks)} tasks", title_justify="left")
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
def tasks_vet(path: str = typer.Argument(..., help="A task file, a directory, a KernelBench tree, or 'examples'."),
              device: str = DeviceOpt, workspace: Path = WorkspaceOpt, sets: list[str] = SetOpt,
              seeds: int = typer.Option(3, "--seeds", help="Seeds per input distribution."),
              baseline: bool = typer.Option(True, "--baseline/--no-baseline", help="Also record eager and torch.compile times."),
              as_json: bool = JsonOpt) -> None:
    """Flag degenerate tasks (constant, zero or input-independent outputs, nondeterminism, failures)
    and record eager / torch.compile baseline times in the store."""
    tasks = _suite(path, device, sets)
    results = []
    with Store(workspace) as store:
        judge = Judge(device, cache_dir=store.cache_dir)
        for t in _progress(tasks, "vetting"):
            try:
                rep = judge.vet(t, seeds=seeds)
            except TaskRunError as e:
                rep = {"degenerate": True, "findings": [{"code": "reference_error", "distribution": "task", "message": str(e)}]}
            store.put_task(t)
            store.record_vetting(t.key, device, rep["degenerate"], rep["findings"])
            row = {"task": t.key, "degenerate": rep["degenerate"], "findings": rep["findings"]}
            if baseline and not any(f["code"] == "reference_error" for f in rep["findings"]):
                row["baseline_ms"] = _record_baselines(judge, store, t, rep.get("env", {}))
            results.append(row)
    if as_json:
        print(json.dumps(results, indent=1))
        return
    table = Table(title="task vetting", title_justify="left")
    for col in ("task", "verdict", "findings", "eager ms", "compile ms"):
        table.add_column(col)
    for r in results:
        findings = "; ".join(f"{f['code']} ({f['distribution']}): {f['message']}" for f in r["findings"]) or "-"
        b = r.get("baseline_ms") or {}
        table.add_row(r["task"], status_text("DEGENERATE" if r["degenerate"] else "ok"), findings,
                      f"{b['eager']:.4g}" if "eager" in b else "-", f"{b['compile']:.4g}" if "compile" in b else "-")
    out.print(table)


def _record_baselines(judge: Judge, store: Store, t: Task, env: dict[str, Any], compiled: bool = True) -> dict[str, float]:
    try:
        stats = judge.baseline(t, compiled=compiled)
    except TaskRunError as e:
        print(f"warning: {t.key}: baseline failed: {e}", file=sys.stderr)
        if not compiled:
            return {}
        stats = judge.baseline(t, compiled=False)
    names = {"reference": "eager", "compiled": "compile"}
    for name, s in stats.items():
        store.record_baseline(t.key, judge.device, str(env.get("device_name", "")), names[name], s, str(env.get("torch", "")))
    return {names[n]: s.median_ms for n, s in stats.items()}


@app.command("baseline")
def baseline_cmd(suite: str = typer.Argument(..., help="A task file, a directory, a KernelBench tree, or 'examples'."),
                 device: str = DeviceOpt, workspace: Path = WorkspaceOpt, sets: list[str] = SetOpt,
                 compiled: bool = typer.Option(True, "--compile/--no-compile", help="Also time torch.compile.")) -> None:
    """Record eager and torch.compile times of each task's reference on this device."""
    tasks = _suite(suite, device, sets)
    table = Table(title="baselines (ms, median)", title_justify="left")
    for col in ("task", "eager", "compile"):
        table.add_column(col, justify="right" if col != "task" else "left")
    with Store(workspace) as store:
        judge = Judge(device, cache_dir=store.cache_dir)
        for t in _progress(tasks, "timing baselines"):
            store.put_task(t)
            env = judge.reference(t).env
            b = _record_baselines(judge, store, t, env, compiled)
            table.add_row(t.key, f"{b['eager']:.4g}" if "eager" in b else "-", f"{b['compile']:.4g}" if "compile" in b else "-")
    out.print(table)


def _progress(items: list[Any], what: str) -> Any:
    with Progress(TextColumn(f"{what}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                  transient=True) as bar:
        for item in bar.track(items):
            yield item


# -- eval ---------------------------------------------------------------------------------
@app.command("eval")
def eval_cmd(task: str = typer.Argument(..., help="A task file or a bundled example name."),
             candidate: Path = typer.Argument(..., help="The candidate's Python file (defines ModelNew)."),
             device: str = DeviceOpt, workspace: Path = WorkspaceOpt, as_json: bool = JsonOpt, sets: list[str] = SetOpt,
             config: Optional[Path] = ConfigOpt, seeds: Optional[int] = SeedsOpt, atol: Optional[float] = AtolOpt,
             rtol: Optional[float] = RtolOpt) -> None:
    """Evaluate one candidate against one task: one verdict. Exit 0 if correct, 1 otherwise."""
    t = _task(task, device, sets)
    if not candidate.is_file():
        raise UsageError(f"{candidate}: no such candidate file")
    source = candidate.read_text()
    cfg = _config(config, seeds, atol, rtol)
    with Store(workspace) as store:
        judge = Judge(device, cache_dir=store.cache_dir, config=cfg)
        v = judge.evaluate(t, source)
        vid = store.record_verdict(t, source, v, origin=str(candidate))
    if as_json:
        print(json.dumps({"verdict_id": vid, **v.to_dict()}, indent=1))
    else:
        _print_verdict(v)
        out.print(f"verdict {vid} recorded in {store.path}", highlight=False)
    raise typer.Exit(0 if v.correct else 1)


@app.command("eval-suite")
def eval_suite_cmd(suite: str = typer.Argument(..., help="A task directory, a KernelBench tree, or 'examples'."),
                   solutions: Path = typer.Argument(..., help="Directory of solutions named by problem."),
                   device: str = DeviceOpt, workspace: Path = WorkspaceOpt, as_json: bool = JsonOpt,
                   workers: Optional[int] = typer.Option(None, "--workers", help="Concurrent evaluations (default: half the cores, at most 8)."),
                   sets: list[str] = SetOpt, config: Optional[Path] = ConfigOpt, seeds: Optional[int] = SeedsOpt,
                   atol: Optional[float] = AtolOpt, rtol: Optional[float] = RtolOpt) -> None:
    """KernelBench-style batch evaluation: per level, correct count, fast_p, geomean and median speedup, win rate."""
    if not solutions.is_dir():
        raise UsageError(f"{solutions}: no such solutions directory")
    tasks = _suite(suite, device, sets)
    cfg = _config(config, seeds, atol, rtol)
    jobs, missing = [], []
    for t in tasks:
        p = find_solution(t, solutions)
        if p is None:
            missing.append(t)
        else:
            jobs.append(Job(t, p.read_text(), tag=str(p)))
    rows: list[dict[str, Any]] = [{"task": t.key, "level": t.level, "status": "missing"} for t in missing]
    outcomes = [TaskOutcome(t.key, t.level, False) for t in missing]
    with Store(workspace) as store:
        run_id = store.start_run("eval-suite", {"suite": suite, "solutions": str(solutions), "device": device})
        with LocalPool(device, cache_dir=store.cache_dir, config=cfg, workers=workers) as pool, \
                Progress(TextColumn("evaluating"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                         TimeElapsedColumn(), console=err, transient=True) as bar:
            progress = bar.add_task("eval", total=len(jobs), info="")
            correct = 0
            for r in pool.map(jobs):
                t = r.job.task
                if r.verdict is None:
                    rows.append({"task": t.key, "level": t.level, "status": "task_error", "message": r.error})
                    outcomes.append(TaskOutcome(t.key, t.level, False))
                else:
                    v = r.verdict
                    vid = store.record_verdict(t, r.job.source, v, run_id=run_id, origin=r.job.tag)
                    base = store.baselines(t.key, str(v.env.get("device_name", "")))
                    ratio = base["compile"].median_ms / base["eager"].median_ms if "compile" in base and "eager" in base else None
                    outcomes.append(TaskOutcome(t.key, t.level, v.correct, v.effective_speedup if v.correct else None, ratio))
                    correct += v.correct
                    rows.append({"task": t.key, "level": t.level, "status": v.status.value, "speedup": v.speedup,
                                 "effective_speedup": v.effective_speedup, "flags": [f.code for f in v.flags],
                                 "message": v.message, "verdict_id": vid})
                bar.update(progress, advance=1, info=f"{correct} correct")
        store.finish_run(run_id)
    summaries = summarize_by_level(outcomes)
    if as_json:
        print(json.dumps({"run_id": run_id, "results": rows, "summary": [s.__dict__ for s in summaries]}, indent=1, default=str))
        return
    table = Table(title=f"run {run_id}", title_justify="left")
    for col in ("task", "status", "speedup", "flags", "message"):
        table.add_column(col)
    for r in sorted(rows, key=lambda r: r["task"]):
        sp = f"{r['speedup']:.2f}x" if r.get("speedup") else "-"
        table.add_row(r["task"], status_text(r["status"]), sp, ",".join(r.get("flags", [])), (r.get("message") or "")[:90])
    out.print(table)
    out.print(summary_table(summaries))


def _interrupted() -> None:
    print("interrupted: every verdict finished so far is in the store", file=sys.stderr)
    sys.exit(130)


def main() -> None:
    """Entry point: every user mistake is one line on stderr and a non-zero exit, never a traceback."""
    debug = bool(os.environ.get("KERNELCRAFT_DEBUG"))
    try:
        rc = app(standalone_mode=False)  # click returns a command's typer.Exit code here
        if rc == 130:  # typer turns Ctrl-C into Exit(130)
            _interrupted()
        sys.exit(rc if isinstance(rc, int) else 0)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except (TaskError, TaskRunError, DeviceUnavailable, UsageError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        _interrupted()
    except Exception as e:  # noqa: BLE001 - last resort: one line, the traceback only on request
        import click
        if isinstance(e, click.ClickException):
            e.show()
            sys.exit(e.exit_code)
        if isinstance(e, click.exceptions.Abort):  # click's form of Ctrl-C
            _interrupted()
        if debug:
            raise
        print(f"internal error: {type(e).__name__}: {e} (set KERNELCRAFT_DEBUG=1 for the traceback)", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
