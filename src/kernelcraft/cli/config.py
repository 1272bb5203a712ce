"""`kernelcraft config show`: the defaults the config files give, and where each came from."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table

from ..user_config import config_files
from .app import app
from .common import USER, JsonOpt, out

config_app = typer.Typer(no_args_is_help=True, help="Your defaults: ~/.config/kernelcraft/config.toml, then ./kernelcraft.toml.")
app.add_typer(config_app, name="config")


@config_app.command("show")
def config_show(as_json: bool = JsonOpt) -> None:
    """The merged defaults (device, workspace, model, base_url, api_key_env) and where each came from: the project's
    ./kernelcraft.toml over your ~/.config/kernelcraft/config.toml over the built-in default ($KERNELCRAFT_WORKSPACE
    over all for the workspace). Flags and run files given to a command win over all of these."""
    files = [(str(p), p.is_file()) for p in config_files()]
    if as_json:
        print(json.dumps({"settings": {k: {"value": s.value, "source": s.source} for k, s in USER.items()},
                          "files": [{"path": p, "exists": e} for p, e in files]}, indent=1))
        return
    table = Table(title="kernelcraft defaults", title_justify="left")
    for col in ("setting", "value", "from"):
        table.add_column(col, overflow="fold")
    for key, s in USER.items():
        table.add_row(key, "-" if s.value is None else str(s.value), s.source)
    out.print(table)
    for path, exists in files:
        out.print(f"{'read' if exists else 'none'}: {Path(path)}", highlight=False)
