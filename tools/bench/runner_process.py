"""The benchmarks' one way to run ``tolokaforge-runner`` in another process on a free loopback port.

The runner is given a token file of the benchmark's own (``--token-file``, in a temporary directory
removed with the runner), so no token is left behind in the user's token directory.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import tempfile
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from grpclib.client import Channel
from grpclib.encoding.base import CodecBase

from tolokaforge.core.credentials import authorize_channel, new_token, write_token_file


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class RunnerProcess:
    """A started ``tolokaforge-runner``: its process, ``host:port``, and the token every call carries."""

    process: asyncio.subprocess.Process
    address: str
    token: str
    token_file: Path
    """For ``open_runner(..., token_file=)`` and ``RunSettings(runner_token_file=)``."""

    def channel(self, *, codec: CodecBase | None = None) -> Channel:
        """A grpclib channel to the runner whose every call carries its token."""
        host, port = self.address.rsplit(":", 1)
        channel = Channel(host, int(port), codec=codec)
        authorize_channel(channel, self.token)
        return channel


@asynccontextmanager
async def runner_process(*options: str) -> AsyncGenerator[RunnerProcess]:
    """``tolokaforge-runner --port P --token-file F *options``, started and answering."""
    executable = shutil.which("tolokaforge-runner")
    if executable is None:
        raise SystemExit("tolokaforge-runner is not on PATH (run under `uv run`)")
    port = free_port()
    token = new_token()
    with tempfile.TemporaryDirectory(prefix="tf-bench-token-") as folder:
        token_file = Path(folder) / "runner.token"
        write_token_file(token_file, token)
        process = await asyncio.create_subprocess_exec(
            executable,
            "--port",
            str(port),
            "--token-file",
            str(token_file),
            *options,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        assert process.stdout is not None
        await asyncio.wait_for(process.stdout.readline(), timeout=60)  # the runner's "listening" line
        try:
            yield RunnerProcess(process, f"127.0.0.1:{port}", token, token_file)
        finally:
            process.terminate()
            await process.wait()
