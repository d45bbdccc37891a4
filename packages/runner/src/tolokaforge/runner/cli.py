"""``tolokaforge-runner``: serve the RunnerService until interrupted.

    tolokaforge-runner --port 50051 --store memory
    tolokaforge-runner --port 50051 --db-url http://127.0.0.1:8700

    tolokaforge-runner --isolation thread      # trusted mode: python tools in this process

Every option is also an environment variable (TOLOKAFORGE_RUNNER_HOST, _PORT, _DB_URL, _TOOL_TIMEOUT;
TOLOKAFORGE_ISOLATION for --isolation, which the embedded runner honours too).
The bound address is printed as ``tolokaforge-runner listening on HOST:PORT`` once serving.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys

from .server import ISOLATION_MODES, RunnerSettings, isolation_from_env, start_runner

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    env = os.environ.get
    parser = argparse.ArgumentParser(
        prog="tolokaforge-runner", description="Serve the Tolokaforge RunnerService."
    )
    parser.add_argument("--host", default=env("TOLOKAFORGE_RUNNER_HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(env("TOLOKAFORGE_RUNNER_PORT", "50051")))
    store = parser.add_mutually_exclusive_group()
    store.add_argument("--store", choices=["memory"], help="keep trial state in this process (default)")
    store.add_argument("--db-url", default=env("TOLOKAFORGE_RUNNER_DB_URL"), help="a DB service over HTTP")
    parser.add_argument(
        "--tool-timeout",
        type=float,
        default=float(env("TOLOKAFORGE_RUNNER_TOOL_TIMEOUT", "30")),
        help="default per-call tool budget in seconds",
    )
    parser.add_argument(
        "--isolation",
        choices=ISOLATION_MODES,
        default=None,
        help="process: python tools in supervised worker processes (default); "
        "thread: trusted mode, in this process (only for code you trust)",
    )
    return parser


async def _serve(settings: RunnerSettings) -> None:
    handle = await start_runner(settings)
    print(f"tolokaforge-runner listening on {handle.address}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        await handle.close()


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    db_url = None if args.store == "memory" else args.db_url
    try:
        isolation = args.isolation or isolation_from_env()
    except ValueError as error:
        print(f"tolokaforge-runner: {error}", file=sys.stderr)
        raise SystemExit(2) from error
    settings = RunnerSettings(
        host=args.host,
        port=args.port,
        db_url=db_url,
        default_tool_timeout_s=args.tool_timeout,
        isolation=isolation,
    )
    try:
        asyncio.run(_serve(settings))
    except OSError as error:
        print(f"tolokaforge-runner: cannot serve on {args.host}:{args.port}: {error}", file=sys.stderr)
        raise SystemExit(2) from error
