"""The DB service's door: every request presents the service's token, or is answered 401 unread.

A pure ASGI wrapper rather than a Starlette middleware class: it runs on every request of the hot
path, and an ``http.response.start`` of our own is all a refusal needs. The contract documents
(``/openapi.yaml``, ``/openapi.json``) stay open: they are public and say nothing about any trial.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from tolokaforge.core.credentials import presented_token, token_matches
from tolokaforge.db.errors import UnauthorizedError
from tolokaforge.db.wire import dump_body

__all__ = ["TokenGate"]


class TokenGate:
    """``app`` behind a bearer-token check; ``open_paths`` answer without one."""

    def __init__(self, app: ASGIApp, token: str, *, open_paths: frozenset[str]) -> None:
        self.app = app
        self.token = token
        self.open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.open_paths:
            await self.app(scope, receive, send)
            return
        authorization: str | None = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization = value.decode("latin-1")
                break
        presented = presented_token(authorization)
        if presented is not None and token_matches(presented, self.token):
            await self.app(scope, receive, send)
            return
        reason = (
            "this service needs its token: Authorization: Bearer <token>"
            if presented is None
            else "the token presented is not this service's"
        )
        body = dump_body(UnauthorizedError(reason).to_body())
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'Bearer realm="tolokaforge-db"'),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
