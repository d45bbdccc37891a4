"""The runner's side of one tool worker: start it, call it within a budget, kill it.

A worker is a disposable cache of one trial's tables at ``version``: the runner starts one from its
mirror (which is in step with the store), keeps it while its answers are committed, and discards it
on a timeout, a crash, a malformed reply or a commit the store refused. Killing is by process group
(process/supervisor.py), so whatever the tool started dies with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from ..process.cgroups import TrialCgroup
from ..process.confinement import Confinement, View
from ..process.sandbox import Limits, scrubbed_env
from ..process.supervisor import Supervised
from .code import STARTUP_DEADLINE_S, WorkerBase, WorkerCode
from .frames import FrameError, decode_reply, encode_request, reply_length

if TYPE_CHECKING:
    from .zygotes import Zygotes

__all__ = ["ToolWorker", "WorkerCode", "WorkerCrashed", "WorkerError", "WorkerProcess", "WorkerTimeout"]

log = logging.getLogger(__name__)

_EXIT_GRACE_S = 0.1
"""How long after the worker's exit its pipe is read before the call counts as crashed."""


class WorkerError(Exception):
    """The worker could not answer; it has been killed."""


class WorkerTimeout(WorkerError):
    pass


class WorkerCrashed(WorkerError):
    def __init__(self, message: str, exit_code: int | None) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class WorkerProcess(Protocol):
    """A worker's process: spawned (process/supervisor.py) or forked by a zygote (process/forked.py)."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    @property
    def exited(self) -> bool: ...

    def kill(self) -> None: ...

    async def reap(self, *, status: bool = True) -> int | None: ...


class ToolWorker:
    """One live worker process holding ``tables`` (the mirror's object it was built from) at ``version``."""

    def __init__(
        self,
        child: WorkerProcess,
        requests: asyncio.StreamWriter,
        replies: asyncio.StreamReader,
        tables: dict[str, Any],
        version: int,
    ) -> None:
        self.child = child
        self.tables = tables
        self.version = version
        self.forked = False
        """Forked from a zygote (else spawned as a fresh interpreter)."""
        self.limits: dict[str, str] = {}
        self.problems: dict[str, str] = {}
        self.busy = False
        self._dead = False
        self._stdin = requests
        self._stdout = replies
        self._exit_watch = asyncio.create_task(self._watch_exit())

    @classmethod
    async def start(
        cls,
        code: WorkerCode,
        tables: dict[str, Any],
        version: int,
        *,
        workspace: Path,
        log_path: Path,
        limits: Limits,
        env: Mapping[str, str],
        zygotes: Zygotes | None = None,
        base: WorkerBase | None = None,
        confinement: Confinement | None = None,
        cgroup: TrialCgroup | None = None,
    ) -> ToolWorker:
        """A worker forked from ``code``'s zygote when one serves, else a freshly spawned interpreter.

        With ``base``, a forked worker starts from the zygote's copy of the task's initial tables and
        is sent only the tables its trial changed; a spawned one is always sent every table.
        """
        if zygotes is not None:
            sent = tables if base is None else base.overlay(tables)
            worker = await cls._fork(
                zygotes,
                code,
                _init(code, sent, workspace, base=base),
                tables,
                version,
                workspace=workspace,
                log_path=log_path,
                env=env,
                base=base,
                cgroup=cgroup,
            )
            if worker is not None:
                return worker
        init = _init(code, tables, workspace)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        confinement = confinement or Confinement.process()
        view = View(cwd=workspace, write=(workspace,), read=(code.root,), cgroup=cgroup)
        argv = [
            sys.executable,
            "-I",
            "-m",
            "tolokaforge.runner.workers.child",
            confinement.spec(limits, view),
        ]
        with log_path.open("ab") as log_file:
            spawned = await Supervised.spawn_launch(
                confinement.launch(argv, limits, view),
                cwd=workspace,
                env=scrubbed_env(dict(env), home=str(workspace)),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log_file,
            )
        process = spawned.process
        worker = cls(
            spawned,
            cast(asyncio.StreamWriter, process.stdin),
            cast(asyncio.StreamReader, process.stdout),
            tables,
            version,
        )
        worker._stdin.write(init)
        await worker._hello(log_path)
        return worker

    @classmethod
    async def _fork(
        cls,
        zygotes: Zygotes,
        code: WorkerCode,
        init: bytes,
        tables: dict[str, Any],
        version: int,
        *,
        workspace: Path,
        log_path: Path,
        env: Mapping[str, str],
        base: WorkerBase | None,
        cgroup: TrialCgroup | None,
    ) -> ToolWorker | None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        replies, requests = await asyncio.open_unix_connection(sock=ours)
        # Written before the fork is asked for: the worker finds its tables waiting, one round trip sooner.
        requests.write(init)
        try:
            child = await zygotes.fork(
                code, conn=theirs, workspace=workspace, env=env, log_path=log_path, base=base, cgroup=cgroup
            )
        except BaseException:
            requests.close()
            raise
        finally:
            theirs.close()
        if child is None:
            requests.close()
            return None
        worker = cls(child, requests, replies, tables, version)
        worker.forked = True
        try:
            await worker._hello(log_path)
        except WorkerError as error:
            if isinstance(error.__cause__, WorkerTimeout):
                raise
            # Whatever broke the forked start, the spawn path reports the code's own failures.
            log.warning("a forked worker did not start (%s); spawning one instead", error)
            return None
        return worker

    async def _hello(self, log_path: Path) -> None:
        """Read the worker's answer to the init frame already written."""
        try:
            hello = await self._exchange(None, STARTUP_DEADLINE_S)
        except WorkerError as error:
            raise WorkerError(f"the tool worker did not start: {error} (log: {log_path})") from error
        self.limits = {str(k): str(v) for k, v in cast(dict[str, Any], hello.get("limits", {})).items()}
        self.problems = {str(k): str(v) for k, v in cast(dict[str, Any], hello.get("problems", {})).items()}

    @property
    def alive(self) -> bool:
        return not self._dead and not self.child.exited

    async def call(self, key: str, arguments: Mapping[str, Any], budget: float) -> dict[str, Any]:
        """The worker's reply to one call; raises WorkerTimeout / WorkerCrashed (the worker is then dead)."""
        self.busy = True
        try:
            return await self._exchange(("call", key, dict(arguments)), budget)
        finally:
            self.busy = False

    async def kill(self, *, status: bool = False) -> None:
        """Kill the worker and wait for its end (and, with ``status``, for its exit status: a crash's cause)."""
        self._dead = True
        self.child.kill()
        with contextlib.suppress(ProcessLookupError):
            await self.child.reap(status=status)
        self._exit_watch.cancel()
        self._stdin.close()

    async def _exchange(self, message: Any, budget: float) -> dict[str, Any]:
        """Send ``message`` (None: it was written already) and read the reply within ``budget``."""
        try:
            if message is not None:
                self._stdin.write(encode_request(message))
            await self._stdin.drain()
            async with asyncio.timeout(budget):
                header = await self._stdout.readexactly(4)
                payload = await self._stdout.readexactly(reply_length(header))
            reply = decode_reply(payload)
        except TimeoutError as error:
            await self.kill()
            raise WorkerTimeout(f"no answer within {budget:g}s") from error
        except (asyncio.IncompleteReadError, ConnectionError, BrokenPipeError) as error:
            await self.kill(status=True)
            code = self.child.returncode
            raise WorkerCrashed(f"the tool's worker process died ({_describe_exit(code)})", code) from error
        except FrameError as error:
            await self.kill()
            raise WorkerCrashed(f"the tool's worker sent a malformed reply ({error})", None) from error
        except asyncio.CancelledError:
            # The RPC was cancelled mid-call: the worker's late answer would be read as the next
            # call's, so it goes now (reaped by the exit watch).
            self._dead = True
            self.child.kill()
            raise
        if not isinstance(reply, dict) or not isinstance(cast(dict[str, Any], reply).get("ok"), bool):
            await self.kill()
            raise WorkerCrashed("the tool's worker sent a reply of the wrong shape", None)
        return cast(dict[str, Any], reply)

    async def _watch_exit(self) -> None:
        # A child the tool forked may hold the pipe open after the worker died: do not wait for EOF.
        await self.child.reap()
        await asyncio.sleep(_EXIT_GRACE_S)
        self._stdout.feed_eof()
        self._stdin.close()


def _init(
    code: WorkerCode, tables: dict[str, Any], workspace: Path, *, base: WorkerBase | None = None
) -> bytes:
    """The init frame: the tables a worker starts from (over its zygote's copy of ``base``, if given)."""
    init: dict[str, Any] = {
        "root": str(code.root),
        "package": code.package,
        "tools": code.tools,
        "tables": tables,
        "workspace": str(workspace),
    }
    if base is not None:
        init["base"] = base.full_hash
    return encode_request(init)


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "exit status unknown"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
        return f"killed by signal {-code}"
    return f"exit code {code}"
