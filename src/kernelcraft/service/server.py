"""Run the judge service: the workspace's queue and pool behind the HTTP API, served by uvicorn."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Callable

import uvicorn

from ..judge import JudgeConfig
from ..store import Store
from .app import create_app
from .config import ServeConfig
from .queue import JobQueue


class CannotListen(Exception):
    """The address or port cannot be bound; the message is one line."""


def bind(config: ServeConfig) -> socket.socket:
    """The listening socket, bound before anything slow starts, so a port in use fails at once."""
    try:
        family = socket.getaddrinfo(config.host, config.port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as e:
        raise CannotListen(f"cannot listen on {config.host}:{config.port}: {e.strerror or e}") from None
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restarted service gets its port back at once
    try:
        sock.bind((config.host, config.port))
    except OSError as e:
        sock.close()
        raise CannotListen(f"cannot listen on {config.host}:{config.port}: {e.strerror or e}") from None
    return sock


def serve(workspace: Path, config: ServeConfig, judge_config: JudgeConfig, token: str,
          announce: Callable[[str], None] = print) -> None:
    """Serve until interrupted (SIGINT or SIGTERM): jobs in flight then go back to the queue."""
    # absolute: the judge's workers run in their own directories, where a relative cache path means nothing
    with bind(config) as sock, Store(workspace.resolve()) as store:
        queue = JobQueue(store, config.device, config=judge_config, workers=config.workers, gpus=config.gpus, ray=config.ray)
        host, port = sock.getsockname()[:2]
        announce(f"judge service on http://{host}:{port} ({queue.device.name}, {queue.workers} workers), "
                 f"workspace {store.workspace}")
        app = create_app(queue, token, config.task_roots)
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
        server.run(sockets=[sock])
