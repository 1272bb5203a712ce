"""What the fake endpoints share: a JSON request handler and a real HTTP server on 127.0.0.1,
served from a daemon thread for the length of a `with` block."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class JSONHandler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: str, headers: dict[str, str] | None = None) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)


class LoopbackServer:
    def __init__(self, handler: type[BaseHTTPRequestHandler], port: int = 0) -> None:
        """`port` 0: any free port; a port a stopped server had: the same server again at the same address."""
        self.server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "LoopbackServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop serving and close the listening socket: from now on a connection is refused, as by a server that died."""
        self.server.shutdown()
        self.server.server_close()
