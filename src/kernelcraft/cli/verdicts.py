"""`kernelcraft verdicts list` and `verdicts show N`: the verdicts a workspace holds, those `eval` recorded among
them, read without writing anything (a read-only workspace can be read)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from ..judge import Status
from ..report import status_text
from ..store import Store, VerdictRow
from .app import app
from .common import JsonOpt, UsageError, WorkspaceOpt, existing_workspace, out, print_verdict

verdicts_app = typer.Typer(no_args_is_help=True, help="A workspace's verdicts: those of eval, eval-suite and every run.")
app.add_typer(verdicts_app, name="verdicts")

_STATUSES = [s.value for s in Status]


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(at))


def _recorded_by(row: VerdictRow) -> str:
    return f"run {row.run_id}" if row.run_id else "eval"


@verdicts_app.command("list")
def verdicts_list(workspace: Path = WorkspaceOpt,
                  task: Optional[str] = typer.Option(None, "--task", help="Only this task's: its key or its name."),
                  run: Optional[str] = typer.Option(None, "--run", help="Only this run's (runs list names them)."),
                  status: Optional[str] = typer.Option(None, "--status", help="Only verdicts of this status: "
                                                       + ", ".join(_STATUSES) + "."),
                  last: int = typer.Option(50, "--last", min=0, help="The latest so many (0: all)."),
                  as_json: bool = JsonOpt) -> None:
    """The workspace's verdicts, oldest first: when, the task, the run that recorded it (eval: the eval command),
    the status, the speedup as counted, its flags and the candidate's file. `verdicts show N` gives one whole."""
    if status is not None and status not in _STATUSES:
        raise UsageError(f"--status {status!r}: use one of {', '.join(_STATUSES)}")
    with Store(existing_workspace(workspace), read_only=True) as store:
        if run is not None:
            try:
                store.run(run)
            except KeyError as e:
                raise UsageError(str(e.args[0])) from None
        rows = store.verdicts(run_id=run, task_key=task, status=status, last=last or None)
    if as_json:
        print(json.dumps([r.to_dict() for r in rows], indent=1))
        return
    shown = f"the last {len(rows)}" if last and len(rows) == last else str(len(rows))
    table = Table(title=f"{shown} verdict{'' if len(rows) == 1 else 's'} in {workspace}", title_justify="left")
    for col in ("id", "recorded", "task", "by", "device", "status", "speedup", "flags", "candidate"):
        table.add_column(col, overflow="fold")
    for r in rows:
        speedup = f"{r.effective_speedup:.2f}x" if r.effective_speedup is not None else "-"
        table.add_row(str(r.id), _when(r.created_at), r.task_key, _recorded_by(r), r.device_name or r.device,
                      status_text(r.status), speedup, r.flags.replace(",", ", ") or "-", r.origin or "-")
    out.print(table)


@verdicts_app.command("show")
def verdicts_show(verdict_id: int = typer.Argument(..., help="The verdict's id (eval prints it; verdicts list lists them)."),
                  workspace: Path = WorkspaceOpt,
                  source: bool = typer.Option(False, "--source", help="Also print the candidate's source."),
                  as_json: bool = JsonOpt) -> None:
    """One verdict whole, as eval printed it: every stage, the times, the speedup and its noise band, coverage,
    error, flags and roofline."""
    with Store(existing_workspace(workspace), read_only=True) as store:
        try:
            row = store.verdict_row(verdict_id)
        except KeyError as e:
            raise UsageError(str(e.args[0])) from None
        v = store.verdict(verdict_id)
        code = store.candidate_source(verdict_id) if source else None
    if as_json:
        print(json.dumps({"verdict_id": row.id, "run_id": row.run_id, "origin": row.origin, "recorded_at": row.created_at,
                          **v.to_dict(), **({"source": code} if code is not None else {})}, indent=1))
        return
    out.print(f"verdict {row.id}: {row.task_key}, recorded {_when(row.created_at)} by {_recorded_by(row)}"
              + (f" from {row.origin}" if row.origin else ""), highlight=False)
    print_verdict(v)
    if code is not None:
        out.print(code, highlight=False, markup=False)
