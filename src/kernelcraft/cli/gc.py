"""`kernelcraft gc`: what a workspace holds on disk, by kind, and freeing what is safe to free (store/usage.py)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.filesize import decimal
from rich.table import Table

from ..store.usage import KINDS, free, holdings
from .app import app
from .common import JsonOpt, WorkspaceOpt, existing_workspace, out


@app.command("gc")
def gc_cmd(workspace: Path = WorkspaceOpt,
           dry_run: bool = typer.Option(False, "--dry-run", help="Report only: free nothing."),
           shared_pch: bool = typer.Option(False, "--shared-pch", help="Also free the precompiled headers your workspaces "
                                                                       "share (~/.cache/kernelcraft/pch) that no build "
                                                                       "used within the hour."),
           as_json: bool = JsonOpt) -> None:
    """What the workspace holds, kind by kind, and free what no judge uses: scratch that no live judge works in
    (a killed or crashed judge's), precompiled headers no build used within the hour. The store, runs, recorded
    model calls, builds and cached replies are reported, never freed."""
    found = holdings(existing_workspace(workspace), shared_pch)
    freed = 0 if dry_run else free(found)
    freeable = sum(h.freeable_bytes for h in found)
    if as_json:
        print(json.dumps({"workspace": str(workspace), "holdings": [h.to_dict() for h in found],
                          "freeable_bytes": freeable, "freed_bytes": freed, "dry_run": dry_run}, indent=1))
        return
    table = Table(title=f"{workspace}: {decimal(sum(h.bytes for h in found))}", title_justify="left")
    for col, justify in (("kind", "left"), ("size", "right"), ("safe to free", "right"), ("what", "left"), ("where", "left")):
        table.add_column(col, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for h in found:
        table.add_row(h.kind, decimal(h.bytes), decimal(h.freeable_bytes) if h.freeable else "-",
                      KINDS[h.kind], str(h.path))
    out.print(table)
    if dry_run:
        out.print(f"would free {decimal(freeable)} (gc without --dry-run frees it)", highlight=False)
    else:
        out.print(f"freed {decimal(freed)}", highlight=False)
