"""`kernelcraft serve-judge`: the judge behind an HTTP API, for rollout workers on other machines."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import typer
from pydantic import ValidationError

from ..judge import DeviceUnavailable, RayUnavailable
from ..judge.isolation import CacheClosed, isolation
from ..service.config import ServeConfig
from ..settings import one_line
from .app import app
from .common import ConfigOpt, GpusOpt, RayOpt, UsageError, WorkspaceOpt, judge_config, option_default

TOKEN_ENV = "KERNELCRAFT_JUDGE_TOKEN"


def _token(token_file: Optional[Path]) -> str:
    if token_file is not None:
        if not token_file.is_file():
            raise UsageError(f"{token_file}: no such token file")
        if not token_file.read_text().strip():
            raise UsageError(f"{token_file}: the token file is empty")
        return token_file.read_text().strip()
    token = os.environ.get(TOKEN_ENV, "").strip()
    if not token:
        raise UsageError(f"serve-judge needs a token, which clients send as a bearer token: --token-file FILE or {TOKEN_ENV}")
    return token


@app.command("serve-judge")
def serve_judge_cmd(
    workspace: Path = WorkspaceOpt,
    host: str = typer.Option(option_default(ServeConfig, "host"), "--host", help="Address to listen on (0.0.0.0: every "
                                                                           "interface; the token travels in clear, so "
                                                                           "only on a trusted network)."),
    port: int = typer.Option(option_default(ServeConfig, "port"), "--port", help="Port (0: any free one; the bound one is printed)."),
    device: str = typer.Option(option_default(ServeConfig, "device"), "--device", "-d", help="cuda or cpu."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Concurrent evaluations per GPU (default: half the cores "
                                                                  "over the GPUs, at most 8)."),
    gpus: Optional[str] = GpusOpt, ray: Optional[str] = RayOpt,
    task_roots: list[Path] = typer.Option([], "--task-root", help="A directory whose .py files (and its subdirectories') "
                                                                   "clients may name as tasks, by a path relative to it or "
                                                                   "absolute (repeatable; default none: the bundled tasks, "
                                                                   "hgemm/MxNxK and task source only)."),
    token_file: Optional[Path] = typer.Option(None, "--token-file", help=f"File holding the clients' token (default: ${TOKEN_ENV})."),
    config_file: Optional[Path] = ConfigOpt,
    insecure: bool = typer.Option(False, "--insecure", help="Serve even where candidates cannot be fully isolated "
                                                              "(docs/security.md): only for code you trust."),
) -> None:
    """Serve the judge over HTTP: rollout workers (kernelcraft.service.JudgeClient) submit candidates and read
    verdicts. Jobs are kept in the workspace's store: a restarted service finishes what was queued."""
    iso = isolation()
    if not iso.complete and not insecure:
        raise UsageError("serve-judge runs other people's code, and candidates cannot be fully isolated here: "
                         f"{'; '.join(iso.problems)} (--insecure serves anyway)")
    token = _token(token_file)
    judge = judge_config(config_file)
    for root in task_roots:
        if not root.is_dir():
            raise UsageError(f"--task-root {root}: no such directory")
    try:
        config = ServeConfig(host=host, port=port, device=device, workers=workers, gpus=gpus, ray=ray,
                             task_roots=tuple(task_roots))
    except ValidationError as e:  # name the flag, in one line
        raise UsageError(f"--{one_line(e)}") from None
    try:
        from ..service.queue import WorkspaceBusy
        from ..service.server import CannotListen, serve
    except ImportError as e:  # fastapi and uvicorn come with the train extra
        raise UsageError(f"serve-judge needs the train extra ({e.name} is missing): pip install 'kernelcraft[train]'") from None
    try:
        serve(workspace, config, judge, token, announce=lambda line: print(line, file=sys.stderr, flush=True))
    except (CannotListen, WorkspaceBusy, DeviceUnavailable, RayUnavailable, CacheClosed) as e:
        raise UsageError(str(e)) from None
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (uvicorn passes it on once it has shut down): a service's normal end
        print("judge service stopped; unfinished jobs are queued for its next start", file=sys.stderr)
