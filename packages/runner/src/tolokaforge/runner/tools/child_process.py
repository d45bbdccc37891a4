"""A tool provider's child process: spawn, read the handshake, drain the pipes, kill the whole tree.

The child is started by the runner's one supervisor (process/supervisor.py): its own session, under
the runner's limits (it keeps the network: it speaks gRPC over loopback), killed as a group with
every descendant, reaped. Its stdout
and stderr are read for as long as it lives -- a provider that logs on every call must never block
on a full pipe -- and the last few kilobytes of stderr are kept for the crash report.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path

from tolokaforge.sdk.providers import Handshake, HandshakeError, is_handshake_line, parse_handshake

from ..process.confinement import Confinement, View
from ..process.sandbox import Limits
from ..process.supervisor import Supervised, confined_launch

__all__ = ["ChildProcess"]

_TAIL_BYTES = 8192
_STOP_GRACE_S = 1.0


class ChildProcess:
    """A started child and the tasks that drain its output."""

    def __init__(self, child: Supervised) -> None:
        self.child = child
        self.process = child.process
        self._stderr_tail: deque[bytes] = deque()
        self._stderr_size = 0
        self._drains: list[asyncio.Task[None]] = []

    @classmethod
    async def spawn(
        cls,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        limits: Limits | None = None,
        confinement: Confinement | None = None,
        view: View | None = None,
        stdin_data: bytes | None = None,
    ) -> ChildProcess:
        """Start ``argv``; its stdin is ``/dev/null``, or a pipe carrying ``stdin_data`` and then closed
        (how a provider gets its token: never in argv, never in its environment)."""
        limits = limits or Limits(network=True)
        confinement = confinement or Confinement.process()
        view = view or View(cwd=cwd, write=(cwd,))
        supervised = await Supervised.spawn_launch(
            confined_launch(confinement, limits, argv, env, view),
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.DEVNULL if stdin_data is None else asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        child = cls(supervised)
        process = supervised.process
        assert process.stderr is not None
        child._drains.append(asyncio.create_task(child._drain(process.stderr, keep=True)))
        if stdin_data is not None:
            assert process.stdin is not None
            # A few bytes: the pipe's buffer holds them whether or not the child reads. A child that
            # already died is reported by the handshake read, with its exit code and stderr.
            with contextlib.suppress(ConnectionError):
                process.stdin.write(stdin_data)
                await process.stdin.drain()
            process.stdin.close()
        return child

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def exited(self) -> bool:
        return self.process.returncode is not None

    def stderr_tail(self) -> str:
        return b"".join(self._stderr_tail).decode("utf-8", errors="replace")

    async def read_handshake(self, deadline_s: float) -> Handshake:
        """The first handshake line on stdout; other lines before it are startup chatter."""
        stdout = self.process.stdout
        assert stdout is not None
        try:
            async with asyncio.timeout(deadline_s):
                while True:
                    line = await stdout.readline()
                    if not line:
                        await self.process.wait()
                        raise HandshakeError(
                            f"the provider exited (code {self.child.returncode}) before its handshake; "
                            f"stderr: {self.stderr_tail()[-500:]!r}"
                        )
                    text = line.decode("utf-8", errors="replace").strip()
                    if is_handshake_line(text):
                        break
        except TimeoutError as error:
            raise HandshakeError(f"no handshake line on stdout within {deadline_s:g}s") from error
        # From here on stdout is only ever drained.
        self._drains.append(asyncio.create_task(self._drain(stdout, keep=False)))
        return parse_handshake(text)

    async def _drain(self, stream: asyncio.StreamReader, *, keep: bool) -> None:
        while True:
            data = await stream.read(65536)
            if not data:
                return
            if keep:
                self._stderr_tail.append(data)
                self._stderr_size += len(data)
                while self._stderr_size > _TAIL_BYTES and len(self._stderr_tail) > 1:
                    self._stderr_size -= len(self._stderr_tail.popleft())

    async def stop(self, *, grace: bool = True) -> None:
        """Stop the child and every descendant: SIGTERM to the group, then SIGKILL after a grace (or at once)."""
        await self.child.stop(_STOP_GRACE_S if grace else 0.0)
        for task in self._drains:
            task.cancel()
        for task in self._drains:
            with contextlib.suppress(asyncio.CancelledError):
                await task
