"""``tolokaforge-db``: serve the DB service with uvicorn.

    tolokaforge-db --store memory|postgres --dsn DSN --host 127.0.0.1 --port 8765

Every option is also a ``TOLOKAFORGE_DB_<OPTION>`` variable (``tolokaforge.core.settings``: flags win).
A bad or missing setting (``--store postgres`` without ``--dsn``, a public ``--host`` without TLS, an
unreadable token file) or a missing prerequisite (an unreachable PostgreSQL, a missing contract file)
ends with one line on stderr and exit status 2. Every request needs the service's token: from
``--token-file``, or made at start and written to the default file, whose path (never the token) is
printed as ``tolokaforge-db token in PATH``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import sys
from collections.abc import Sequence
from typing import Any

import uvicorn

from tolokaforge.core.credentials import (
    CredentialError,
    default_token_path,
    new_token,
    read_token_file,
    refuse_public_bind,
    write_token_file,
)
from tolokaforge.core.settings import exit_on_settings_error, parse_settings
from tolokaforge.db.settings import ENV_PREFIX, PROG, DbOptions, Settings

__all__ = ["main"]


async def _check_postgres(dsn: str) -> None:
    import asyncpg  # pyright: ignore[reportMissingTypeStubs] - only needed for this store

    connect: Any = asyncpg.connect  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    connection: Any = await connect(dsn, timeout=10)
    await connection.close()


def _run(argv: Sequence[str] | None) -> int:
    options = parse_settings(
        DbOptions, prog=PROG, prefix=ENV_PREFIX, description="Serve the Tolokaforge DB service.", argv=argv
    )
    settings = Settings.from_options(options)
    from tolokaforge.db.app import create_app

    try:
        refuse_public_bind(settings.host, tls=settings.tls_cert is not None, flags="--tls-cert and --tls-key")
        token = read_token_file(settings.token_file, flag="--token-file") if settings.token_file else None
    except CredentialError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    try:
        if settings.store == "postgres" and settings.dsn:
            asyncio.run(_check_postgres(settings.dsn))
        # Bound before a token is written for the port: a second service started on a busy port
        # fails here and leaves the running one's token file alone.
        sock = _bind(settings.host, settings.port)
    except OSError as exc:
        print(f"{PROG}: cannot start: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # asyncpg's errors do not share a base with OSError
        print(f"{PROG}: cannot start: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    port = int(sock.getsockname()[1])
    token_path = settings.token_file
    if token is None:
        token, token_path = new_token(), default_token_path("db", port)
        write_token_file(token_path, token)
    settings = dataclasses.replace(settings, token=token, port=port)
    app = create_app(settings)
    print(f"{PROG} listening on {settings.host}:{port}", flush=True)
    print(f"{PROG} token in {token_path}", flush=True)
    config = uvicorn.Config(
        app,
        log_level=settings.log_level,
        access_log=False,
        ssl_certfile=settings.tls_cert,
        ssl_keyfile=settings.tls_key,
    )
    uvicorn.Server(config).run(sockets=[sock])
    return 0


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def main(argv: Sequence[str] | None = None) -> int:
    """Parse options, check prerequisites, serve until interrupted."""
    return exit_on_settings_error(PROG, lambda: _run(argv))


if __name__ == "__main__":
    raise SystemExit(main())
