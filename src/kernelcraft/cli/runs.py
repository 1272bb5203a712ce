"""`kernelcraft runs list`: a workspace's runs."""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer
from rich.table import Table

from ..report import counted
from ..report.run_list import run_lines
from ..store import Store
from .app import app
from .common import JsonOpt, WorkspaceOpt, existing_workspace, out

runs_app = typer.Typer(no_args_is_help=True, help="A workspace's runs.")
app.add_typer(runs_app, name="runs")


@runs_app.command("list")
def runs_list(workspace: Path = WorkspaceOpt, as_json: bool = JsonOpt) -> None:
    """Every run of the workspace, oldest first: its kind, when it started, whether it finished, its tasks, target and
    model. A stopped optimize run goes on with `kernelcraft optimize --resume RUN`."""
    with Store(existing_workspace(workspace), read_only=True) as store:
        lines = run_lines(store)
    if as_json:
        print(json.dumps([line.to_dict() for line in lines], indent=1))
        return
    table = Table(title=f"{counted(len(lines), 'run')} in {workspace}", title_justify="left")
    for col in ("run", "kind", "started", "state", "tasks done", "target", "model", "strategy"):
        table.add_column(col, overflow="fold")
    for line in lines:
        table.add_row(line.id, line.kind, time.strftime("%Y-%m-%d %H:%M", time.localtime(line.started_at)),
                      "finished" if line.finished else "stopped", f"{line.tasks_done}/{line.tasks}", line.target,
                      line.model or "-", line.strategy or "-")
    out.print(table)
