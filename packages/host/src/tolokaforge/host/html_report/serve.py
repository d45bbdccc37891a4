"""``tolokaforge view``: serve one report on 127.0.0.1 until interrupted (stdlib HTTP server).

Besides the page, it serves the trials' attachments the page shows (``/trials/<task>/<index>/
attachments/<name>``, names as results/attachments.py gives them, read from the report's run folder,
never through a symlink); any other path is a 404.
"""

from __future__ import annotations

from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

from ..results.attachments import is_attachment_path
from ..results.records import read_regular

__all__ = ["serve_report"]

_MEDIA_TYPES = {"jpg": "image/jpeg", "png": "image/png", "webp": "image/webp", "gif": "image/gif"}
_MAX_ATTACHMENT_BYTES = 64 << 20


def _attachment(run_dir: Path, path: str) -> tuple[bytes, str] | None:
    """The bytes and media type of the attachment ``path`` names; None for anything else."""
    parts = unquote(path).split("/")
    if len(parts) != 6 or parts[:2] != ["", "trials"] or not parts[3].isdigit():
        return None
    task_id, index, name = parts[2], parts[3], "/".join(parts[4:])
    if task_id in ("", ".", "..") or not is_attachment_path(name):
        return None
    folder = run_dir / "trials" / task_id / index / "attachments"
    if any(step.is_symlink() for step in (folder.parent.parent, folder.parent, folder)):
        return None
    try:
        data = read_regular(folder / parts[5], _MAX_ATTACHMENT_BYTES)
    except ValueError:
        return None
    if data is None:
        return None
    return data, _MEDIA_TYPES.get(name.rsplit(".", 1)[-1], "application/octet-stream")


def _handler(report: Path) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path in ("/", "/report.html"):
                self._send(report.read_bytes(), "text/html; charset=utf-8")
                return
            found = _attachment(report.parent, path)
            if found is None:
                self.send_error(404, "only the report and its trials' attachments are served here")
                return
            self._send(*found)

        def _send(self, body: bytes, media_type: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", media_type)
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
