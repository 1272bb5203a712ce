"""`kernelcraft self-check`: the judge judges each task's own reference as the candidate."""

from __future__ import annotations

import json
import time
from concurrent.futures import FIRST_COMPLETED, Future, wait
from pathlib import Path
from typing import Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..judge import JUDGE_VERSION, Job, Result, open_executor, self_check_source
from ..report import status_text
from ..report.selfcheck import SELF_CHECK_RUN, SelfCheckRow, self_checked, summarize_self_check
from ..store import Store
from .app import app
from .common import ConfigOpt, DeviceOpt, GpusOpt, JsonOpt, RayOpt, SetOpt, UsageError, WorkspaceOpt, err, judge_config, out, target_tasks


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f}"


def _tables(rows: list[SelfCheckRow], title: str) -> tuple[Table, Table]:
    tasks = Table(title=title, title_justify="left")
    for col in ("task", "status", "speedup", "band +-", "truth", "wall s", "disk GB", "host GB", "device GB", "message"):
        tasks.add_column(col, overflow="fold")
    for r in sorted(rows, key=lambda r: (r.level or 0, r.task)):
        flag = "" if r.within_noise or r.status != "correct" else " (outside)"
        tasks.add_row(r.task, status_text(r.status), f"{r.speedup:.3f}x{flag}" if r.speedup else "-",
                      f"{r.noise:.1%}" if r.noise is not None else "-", "float64" if r.truth == "float64" else "reference",
                      f"{r.wall_s:.1f}", _gb(r.disk_peak_bytes), _gb(r.host_peak_bytes), _gb(r.device_peak_bytes),
                      "" if r.status == "correct" else r.message[:120])
    levels = Table(title="self-check per level", title_justify="left")
    for col in ("set", "tasks", "correct", "incorrect", "judge_error", "other", "within noise", "band median", "band max",
                "float64 truth", "wall s", "disk GB max", "host GB max", "device GB max"):
        levels.add_column(col)
    for s in summarize_self_check(rows):
        levels.add_row(s.label, str(s.total), str(s.correct), str(s.incorrect), str(s.judge_error), str(s.other), str(s.within_noise),
                       f"{s.noise_median:.1%}" if s.noise_median is not None else "-",
                       f"{s.noise_max:.1%}" if s.noise_max is not None else "-", str(s.truth), f"{s.wall_s:.0f}",
                       _gb(s.disk_peak_bytes), _gb(s.host_peak_bytes), _gb(s.device_peak_bytes))
    return tasks, levels


@app.command("self-check")
def self_check_cmd(suite: str = typer.Argument(..., help="A task file, a directory, a KernelBench tree or 'examples'."),
                   device: str = DeviceOpt, workspace: Path = WorkspaceOpt,
                   levels: list[int] = typer.Option([], "--level", help="Only tasks of this level (repeatable)."),
                   workers: Optional[int] = typer.Option(None, "--workers", min=1, help="Concurrent evaluations (default: half the cores, at most 8)."),
                   budget_wall_s: Optional[float] = typer.Option(None, "--budget-wall-s", min=1,
                                                                 help="Start no task after this many seconds; run again to go on."),
                   again: bool = typer.Option(False, "--again", help="Judge tasks that already have a self-check verdict again."),
                   redo_failed: bool = typer.Option(False, "--redo-failed", help="Judge again the tasks whose last self-check "
                                                                                 "was not correct (after a fix)."),
                   report_only: bool = typer.Option(False, "--report-only", help="Judge nothing: show what the workspace holds."),
                   out_file: Optional[Path] = typer.Option(None, "--out", help="Also write every row and the summary as JSON here."),
                   sets: list[str] = SetOpt, config: Optional[Path] = ConfigOpt, as_json: bool = JsonOpt,
                   gpus: Optional[str] = GpusOpt, ray: Optional[str] = RayOpt) -> None:
    """Judge each task's own reference as its candidate: each must come out correct at 1.00x within
    the noise band, with no judge_error. Per task, the wall time, the peak disk, host and device memory
    and the noise band. Resumable: tasks already checked under this judge version on this device are
    skipped (exit 3 while some are left, 0 when all are done and correct, 1 otherwise)."""
    tasks = [t for t in target_tasks(suite, device, sets) if not levels or t.level in levels]
    if not tasks:
        raise UsageError(f"{suite}: no task" + (f" of level {', '.join(map(str, levels))}" if levels else ""))
    cfg = judge_config(config)
    by_key = {t.key: t for t in tasks}
    with Store(workspace) as store, open_executor(device, cache_dir=store.cache_dir, config=cfg, gpus=gpus, ray=ray,
                                                  workers=workers) as pool:
        device_name = pool.description.name
        known = self_checked(store, device_name, {t.key: t.level for t in tasks})
        # A judge_error is always judged again; with --redo-failed, every verdict but a correct one.
        kept = {"correct"} if redo_failed else {r.status for r in known.values()} - {"judge_error"}
        todo = [] if report_only else [t for t in tasks if again or t.key not in known or known[t.key].status not in kept]
        run_id = store.start_run(SELF_CHECK_RUN, {"suite": suite, "device": device, "levels": levels, "judge_version": JUDGE_VERSION})
        started = time.monotonic()
        left = list(todo)
        with Progress(TextColumn("self-check"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                         TimeElapsedColumn(), console=err, transient=True) as bar:
            progress = bar.add_task("check", total=len(todo), info="")
            running: set[Future[Result]] = set()
            while left or running:
                in_budget = budget_wall_s is None or time.monotonic() - started < budget_wall_s
                while left and in_budget and len(running) < pool.workers:
                    running.add(pool.submit(Job(left.pop(0), "", kind="self_check")))
                if not running:
                    break
                done, running = wait(running, return_when=FIRST_COMPLETED)
                for f in done:
                    r = f.result()
                    t = r.job.task
                    store.put_task(t)
                    if r.verdict is None:
                        err.print(f"{t.key}: the task failed to run: {r.error}", highlight=False)
                    else:
                        vid = store.record_verdict(t, self_check_source(t), r.verdict, run_id=run_id, origin="self-check")
                        known[t.key] = SelfCheckRow.of(t.level, r.verdict, vid)
                    bar.update(progress, advance=1, info=t.key)
        store.finish_run(run_id)
    rows = [known[k] for k in by_key if k in known]
    summary = summarize_self_check(rows)
    unchecked = [k for k in by_key if k not in known]
    if out_file is not None:
        out_file.write_text(json.dumps({"run_id": run_id, "device_name": device_name, "judge_version": JUDGE_VERSION,
                                          "rows": [r.to_dict() for r in rows], "summary": [s.to_dict() for s in summary],
                                          "unchecked": unchecked}, indent=1))
    if as_json:
        print(json.dumps({"run_id": run_id, "rows": [r.to_dict() for r in rows], "summary": [s.to_dict() for s in summary],
                          "unchecked": unchecked}, indent=1))
    else:
        tasks_table, levels_table = _tables(rows, f"self-check on {device_name} (judge v{JUDGE_VERSION}; this run {run_id})")
        out.print(tasks_table)
        out.print(levels_table)
        if unchecked:
            out.print(f"{len(unchecked)} task(s) not checked yet: run the same command again to go on", highlight=False)
    if unchecked:
        raise typer.Exit(3)
    raise typer.Exit(0 if all(r.status == "correct" for r in rows) else 1)
