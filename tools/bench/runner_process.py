"""The benchmarks' one way to run ``tolokaforge-runner`` in another process on a free loopback port."""

from __future__ import annotations

import asyncio
import shutil
import socket
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@asynccontextmanager
async def runner_process(*options: str) -> AsyncGenerator[tuple[asyncio.subprocess.Process, str]]:
    """``tolokaforge-runner --port P *options``, started and answering; yields (process, "host:port")."""
    executable = shutil.which("tolokaforge-runner")
    if executable is None:
        raise SystemExit("tolokaforge-runner is not on PATH (run under `uv run`)")
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        executable,
        "--port",
        str(port),
        *options,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert process.stdout is not None
    await asyncio.wait_for(process.stdout.readline(), timeout=60)  # the runner's "listening" line
    try:
        yield process, f"127.0.0.1:{port}"
    finally:
        process.terminate()
        await process.wait()
