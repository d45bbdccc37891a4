"""``tolokaforge view``: serve one report on 127.0.0.1 until interrupted (stdlib HTTP server)."""

from __future__ import annotations

from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

__all__ = ["serve_report"]


def _handler(report: Path) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] not in ("/", "/report.html"):
                self.send_error(404, "only the report is served here")
                return
            body = report.read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return None  # quiet: the terminal shows the address only

    return Handler


def serve_report(report: Path, port: int, announce: Callable[[str], None]) -> None:
    """Serve ``report`` at ``http://127.0.0.1:<port>/`` (0: any free port) until KeyboardInterrupt."""
    with ThreadingHTTPServer(("127.0.0.1", port), _handler(report)) as server:
        announce(f"http://127.0.0.1:{server.server_address[1]}/")
        server.serve_forever()
