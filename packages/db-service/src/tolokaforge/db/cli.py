"""``tolokaforge-db``: serve the DB service with uvicorn.

    tolokaforge-db --store memory|postgres --dsn DSN --host 127.0.0.1 --port 8765

Every option has a ``TOLOKAFORGE_DB_<OPTION>`` variable (flags win). A missing prerequisite (an
unreachable PostgreSQL, a missing contract file) ends with one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import uvicorn

from tolokaforge.db.settings import ENV_PREFIX, Settings

__all__ = ["main"]


def _parser(defaults: Settings) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tolokaforge-db", description="Serve the Tolokaforge DB service.")
    env = ENV_PREFIX
    parser.add_argument(
        "--store", choices=("memory", "postgres"), default=defaults.store, help=f"[{env}STORE]"
    )
    parser.add_argument("--dsn", default=defaults.dsn, help=f"PostgreSQL DSN for --store postgres [{env}DSN]")
    parser.add_argument("--host", default=defaults.host, help=f"[{env}HOST]")
    parser.add_argument("--port", type=int, default=defaults.port, help=f"[{env}PORT]")
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=defaults.max_body_bytes,
        help=f"413 above this [{env}MAX_BODY_BYTES]",
    )
    parser.add_argument(
        "--spec", type=Path, default=defaults.spec_path, help=f"contract file to serve [{env}SPEC]"
    )
    parser.add_argument("--log-level", default=defaults.log_level, help=f"uvicorn log level [{env}LOG_LEVEL]")
    return parser


async def _check_postgres(dsn: str) -> None:
    import asyncpg  # pyright: ignore[reportMissingTypeStubs] - only needed for this store

    connect: Any = asyncpg.connect  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    connection: Any = await connect(dsn, timeout=10)
    await connection.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Parse options, check prerequisites, serve until interrupted."""
    try:
        defaults = Settings.from_env()
    except ValueError as exc:
        print(f"tolokaforge-db: {exc}", file=sys.stderr)
        return 2
    args = _parser(defaults).parse_args(argv)
    settings = dataclasses.replace(
        defaults,
        store=args.store,
        dsn=args.dsn,
        host=args.host,
        port=args.port,
        max_body_bytes=args.max_body_bytes,
        spec_path=args.spec,
        log_level=args.log_level,
    )
    from tolokaforge.db.app import create_app

    try:
        if settings.store == "postgres":
            asyncio.run(_check_postgres(settings.dsn))
        app = create_app(settings)
    except (OSError, FileNotFoundError) as exc:
        print(f"tolokaforge-db: cannot start: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # asyncpg's errors do not share a base with OSError
        print(f"tolokaforge-db: cannot start: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    uvicorn.run(app, host=settings.host, port=settings.port, log_level=settings.log_level, access_log=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
