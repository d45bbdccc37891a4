"""The runner's zygotes: one fork server per distinct worker code, started on first need.

Starting a worker by spawning an interpreter that imports the task's tools costs tens of
milliseconds of CPU; forking it from a zygote that already imported them costs about one. A zygote
(workers/zygote.py) is keyed by a digest of what its workers import and the limits they run under;
it is started when a trial of that code first needs a worker (or ahead of that need,
:meth:`Zygotes.warm`, when such a trial registers), stopped when idle for
:data:`IDLE_S` with no live worker, and at runner close. It is a supervised child (its own session,
killed as a group, reaped); its workers are not the runner's children, so each is watched as a
:class:`ForkedChild`.

Whenever a zygote cannot serve -- it would not start, died, or declared the code unforkable (tools
that failed to import, or whose import left a thread or a descriptor behind) -- :meth:`Zygotes.fork`
answers None and the caller spawns the worker itself. A zygote that died is started again on the
next need; a code declared unforkable is never forked.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Awaitable, Mapping
from pathlib import Path
from typing import Any, cast

from ..process.cgroups import TrialCgroup
from ..process.confinement import Confinement, View
from ..process.forked import ForkedChild
from ..process.sandbox import Limits, scrubbed_env
from ..process.supervisor import Supervised, descendants
from .code import STARTUP_DEADLINE_S, WorkerBase, WorkerCode

__all__ = ["IDLE_S", "Zygotes"]

log = logging.getLogger(__name__)

IDLE_S = 120.0
"""How long a zygote with no live worker is kept for the next trial of its code."""

_FORK_DEADLINE_S = 10.0
"""How long a fork may take before the zygote counts as wedged (it answers in about a millisecond)."""

_RETRY_AFTER_S = 5.0
"""After a zygote failed to start, its code's workers are spawned for this long before it is tried again."""

_MESSAGE_BYTES = 1 << 16
"""The largest message a zygote sends (a ready with its reason, a fork's answer, an exit status)."""


class ZygoteGone(Exception):
    """The zygote died or stopped answering; it has been stopped."""


class ForkRefused(Exception):
    """The zygote could not fork this once (no process to be had); it still serves."""


class Zygote:
    """One running zygote and the workers it forked that have not been reaped yet."""

    def __init__(self, key: str, process: Supervised, control: socket.socket, pid: int) -> None:
        self.key = key
        self.process = process
        self.pid = pid
        self.last_used = time.monotonic()
        self._control = control
        self._ids = itertools.count()
        self._pending: dict[int, asyncio.Future[ForkedChild]] = {}
        self._children: dict[int, ForkedChild] = {}
        self._dead = False
        self._held: set[str] = set()
        """The initial states (full hashes) it was asked to hold: it holds them, or failed to read them."""
        self._sending = asyncio.Lock()
        """One sender at a time: the loop keeps one writer callback per socket, so two senders waiting for
        room would replace each other's wake-up and one would wait forever (seen at 256 forks in flight)."""
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def start(
        cls,
        key: str,
        code: WorkerCode,
        limits: Limits,
        directory: Path,
        log_path: Path,
        *,
        confinement: Confinement,
        workspaces: Path,
        states: Path,
    ) -> Zygote:
        """A ready zygote; raises ZygoteGone, or Unforkable with the zygote's reason.

        Sandboxed, it sees the pack's code and the initial states read-only and every workspace
        read-write (its forked workers each narrow that to their own with Landlock).
        """
        directory.mkdir(parents=True, exist_ok=True)
        workspaces.mkdir(parents=True, exist_ok=True)
        states.mkdir(parents=True, exist_ok=True)
        confinement.own(directory)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        view = View(cwd=directory, write=(directory, workspaces), read=(code.root, states))
        argv = [
            sys.executable,
            "-I",
            "-m",
            "tolokaforge.runner.workers.zygote",
            confinement.spec(limits, view),
        ]
        try:
            with log_path.open("ab") as log_file:
                process = await Supervised.spawn_launch(
                    confinement.launch(argv, limits, view),
                    cwd=directory,
                    env=scrubbed_env({}, home=str(directory)),
                    stdin=theirs.fileno(),
                    stderr=log_file,
                )
        except OSError as error:  # no process to be had (descriptors, processes): spawning may still work
            ours.close()
            raise ZygoteGone(f"the zygote could not be started: {error}") from error
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.setblocking(False)
        loop = asyncio.get_running_loop()
        try:
            init = {"root": str(code.root), "package": code.package, "modules": code_modules(code)}
            await loop.sock_sendall(ours, json.dumps(init).encode())
            async with asyncio.timeout(STARTUP_DEADLINE_S):
                reply = await loop.sock_recv(ours, _MESSAGE_BYTES)
            ready: dict[str, Any] = json.loads(reply) if reply else {}
        except (TimeoutError, OSError, ValueError) as error:
            ours.close()
            await process.stop()
            raise ZygoteGone(
                f"the zygote did not start ({type(error).__name__}: {error}; log: {log_path})"
            ) from error
        except BaseException:
            ours.close()
            await process.stop()
            raise
        if ready.get("ready") is not True:
            ours.close()
            status = await process.stop()
            if "why" in ready:
                raise Unforkable(str(ready["why"]))
            raise ZygoteGone(f"the zygote exited while starting (exit status {status}; log: {log_path})")
        return cls(key, process, ours, _host_pid(process.pid, int(ready["pid"])))

    @property
    def alive(self) -> bool:
        return not self._dead and not self.process.exited

    @property
    def workers(self) -> int:
        return len(self._children)

    async def fork(
        self,
        conn: socket.socket,
        workspace: Path,
        env: Mapping[str, str],
        log_fd: int,
        base: WorkerBase | None = None,
    ) -> ForkedChild:
        """A fresh worker in ``workspace`` speaking over ``conn``, starting from ``base`` (which the
        zygote reads from its file the first time); raises ZygoteGone or ForkRefused."""
        if not self.alive:
            raise ZygoteGone("the zygote has exited")
        self.last_used = time.monotonic()
        ident = next(self._ids)
        answer: asyncio.Future[ForkedChild] = asyncio.get_running_loop().create_future()
        self._pending[ident] = answer
        try:
            request: dict[str, Any] = {"fork": ident, "workspace": str(workspace), "env": dict(env)}
            if base is not None:
                request["base"], request["base_file"] = base.full_hash, str(base.file)
                self._held.add(base.full_hash)
            message = json.dumps(request).encode()
            await self._send(message, [conn.fileno(), log_fd])
            async with asyncio.timeout(_FORK_DEADLINE_S):
                return await answer
        except TimeoutError as error:
            await self.stop()
            raise ZygoteGone(f"the zygote did not fork within {_FORK_DEADLINE_S:g}s") from error
        except OSError as error:
            await self.stop()
            raise ZygoteGone(f"the zygote's control socket failed: {error}") from error
        finally:
            self._pending.pop(ident, None)

    def holds(self, base: WorkerBase) -> bool:
        """It was asked to hold ``base`` already (:meth:`hold`, or a fork from it)."""
        return base.full_hash in self._held

    async def hold(self, base: WorkerBase) -> None:
        """Have the zygote read ``base`` now, ahead of its first fork from it (which then only forks).

        Nothing is answered: a base the zygote could not read is read again, and the failure answered,
        at that fork.
        """
        if not self.alive or base.full_hash in self._held:
            return
        self._held.add(base.full_hash)
        message = json.dumps({"hold": base.full_hash, "base_file": str(base.file)}).encode()
        try:
            await self._send(message, [])
        except OSError as error:  # the reader sees the socket fail too: the zygote counts as lost
            log.warning("zygote %s: control socket failed: %s", self.pid, error)

    async def stop(self) -> None:
        """Stop the zygote; its live workers die with it."""
        self._lost()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader
        await self.process.stop()

    async def _send(self, message: bytes, fds: list[int]) -> None:
        loop = asyncio.get_running_loop()
        async with self._sending:
            while True:
                try:
                    if fds:
                        socket.send_fds(self._control, [message], fds)
                    else:
                        self._control.send(message)
                    return
                except BlockingIOError:
                    ready = loop.create_future()
                    loop.add_writer(self._control, ready.set_result, None)
                    try:
                        await ready
                    finally:
                        loop.remove_writer(self._control)

    async def _receive(self) -> tuple[bytes, list[int]]:
        """One message and the descriptors it carries (a forked worker's pidfd)."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(self._control, _MESSAGE_BYTES, 1)
                return data, fds
            except BlockingIOError:
                ready = loop.create_future()
                loop.add_reader(self._control, ready.set_result, None)
                try:
                    await ready
                finally:
                    loop.remove_reader(self._control)

    async def _read(self) -> None:
        try:
            while True:
                data, fds = await self._receive()
                if not data:
                    for fd in fds:
                        os.close(fd)
                    break
                message = cast(dict[str, Any], json.loads(data))
                if "exit" in message:
                    child = self._children.pop(int(message["exit"]), None)
                    if child is not None:
                        child.reported(int(message["code"]))
                elif "forked" in message:
                    answer = self._pending.get(int(message["forked"]))
                    if "pid" in message:
                        pid = int(message["pid"])  # in the zygote's pid namespace: its reports name it so
                        child = ForkedChild.from_pidfd(fds[0]) if fds else ForkedChild(pid)
                        fds = []
                        self._children[pid] = child
                        if answer is not None and not answer.done():
                            answer.set_result(child)
                        else:
                            child.kill()  # nobody waits for it any more
                    elif answer is not None and not answer.done():
                        answer.set_exception(
                            ForkRefused(f"the zygote could not fork: {message.get('error')}")
                        )
                for fd in fds:
                    os.close(fd)
        except (OSError, ValueError) as error:
            log.warning("zygote %s: control socket failed: %s", self.pid, error)
        finally:
            self._lost()

    def _lost(self) -> None:
        if self._dead:
            return
        self._dead = True
        self._control.close()
        for answer in self._pending.values():
            if not answer.done():
                answer.set_exception(ZygoteGone("the zygote died"))
        for child in self._children.values():
            child.orphaned()
        self._children.clear()


class Unforkable(Exception):
    """The zygote declined this code (the reason is its message); its workers are spawned."""


class Zygotes:
    """Every zygote of one runner, by code key."""

    def __init__(
        self,
        limits: Limits,
        directory: Path,
        log_dir: Path,
        idle_s: float = IDLE_S,
        *,
        confinement: Confinement | None = None,
        workspaces: Path | None = None,
    ) -> None:
        self.limits = limits
        self.confinement = confinement or Confinement.process()
        self.workspaces = workspaces or directory.parent / "workspaces"
        self.directory = directory
        self.log_dir = log_dir
        self.idle_s = idle_s
        self.unforkable: dict[str, str] = {}
        """Codes the zygote declined, with its reason."""
        self._zygotes: dict[str, Zygote] = {}
        self._starting: dict[str, asyncio.Future[Zygote | None]] = {}
        self._failed_at: dict[str, float] = {}
        self._reaper: asyncio.Task[None] | None = None
        self._stopping: set[asyncio.Task[None]] = set()
        self._closed = False

    async def fork(
        self,
        code: WorkerCode,
        *,
        conn: socket.socket,
        workspace: Path,
        env: Mapping[str, str],
        log_path: Path,
        base: WorkerBase | None = None,
        cgroup: TrialCgroup | None = None,
    ) -> ForkedChild | None:
        """A worker forked from ``code``'s zygote (started if needed) to speak over ``conn``, or None: spawn it instead."""
        key = code_key(code, self.limits, None if base is None else base.full_hash)
        zygote = await self._zygote(key, code)
        if zygote is None:
            return None
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as log_file:
            try:
                child = await zygote.fork(
                    conn, workspace, scrubbed_env(dict(env), home=str(workspace)), log_file.fileno(), base
                )
                if cgroup is not None:
                    # Before the runner sends it a call: no pack code of the trial runs outside its cgroup.
                    try:
                        # A v1 memory cgroup takes a millisecond to join: not on the event loop.
                        await asyncio.to_thread(cgroup.add, child.pid)
                    except OSError as error:
                        child.kill()
                        await child.reap(status=False)
                        raise ZygoteGone(f"the worker could not join its trial's cgroup: {error}") from error
                return child
            except ForkRefused as error:
                log.warning("zygote %s: %s; spawning the worker instead", zygote.pid, error)
                return None
            except ZygoteGone as error:
                log.warning("zygote %s: %s; spawning the worker instead", zygote.pid, error)
                self._forget(zygote)
                return None

    def holding(self, code: WorkerCode, base: WorkerBase) -> bool:
        """A live zygote of ``code`` holds ``base`` (or was asked to): a fork from it costs a fork alone."""
        zygote = self._zygotes.get(code_key(code, self.limits, base.full_hash))
        return zygote is not None and zygote.alive and zygote.holds(base)

    async def warm(self, code: WorkerCode, full_hash: str, base: Awaitable[WorkerBase | None]) -> None:
        """Start ``code``'s zygote for the initial state ``full_hash`` unless it runs, and have it read
        that state (``base``, being written meanwhile) now, so that the first worker of a trial of a
        task never seen costs a fork, not a zygote's start and a read of the task's initial state. A
        zygote that cannot serve is left to :meth:`fork` to report."""
        # The zygote's interpreter starts while the runner writes the state out for it.
        starting = asyncio.ensure_future(self._zygote(code_key(code, self.limits, full_hash), code))
        try:
            held = await base
        finally:
            zygote = await starting
        if zygote is not None and held is not None:
            await zygote.hold(held)

    def pids(self) -> list[int]:
        """The live zygotes' process ids."""
        return [zygote.pid for zygote in self._zygotes.values() if zygote.alive]

    async def close(self) -> None:
        self._closed = True
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        for starting in list(self._starting.values()):
            with contextlib.suppress(Exception):
                await starting
        for zygote in list(self._zygotes.values()):
            await zygote.stop()
        self._zygotes.clear()
        if self._stopping:
            await asyncio.gather(*self._stopping, return_exceptions=True)

    async def _zygote(self, key: str, code: WorkerCode) -> Zygote | None:
        if self._closed or key in self.unforkable:
            return None
        zygote = self._zygotes.get(key)
        if zygote is not None:
            if zygote.alive:
                return zygote
            self._forget(zygote)
        starting = self._starting.get(key)
        if starting is not None:
            return await asyncio.shield(starting)
        if time.monotonic() - self._failed_at.get(key, -_RETRY_AFTER_S) < _RETRY_AFTER_S:
            return None
        starting = asyncio.get_running_loop().create_future()
        self._starting[key] = starting
        result: Zygote | None = None
        try:
            result = await Zygote.start(
                key,
                code,
                self.limits,
                self.directory / key[:16],
                self.log_dir / f"zygote-{key[:16]}.log",
                confinement=self.confinement,
                workspaces=self.workspaces,
                states=self.directory / "states",
            )
        except Unforkable as why:
            log.info("worker code %s is spawned, not forked: %s", code.root, why)
            self.unforkable[key] = str(why)
        except ZygoteGone as error:
            log.warning("worker code %s: %s; spawning its workers for now", code.root, error)
            self._failed_at[key] = time.monotonic()
        finally:
            del self._starting[key]
            starting.set_result(result)
        if result is not None:
            if self._closed:
                await result.stop()
                return None
            self._zygotes[key] = result
            if self._reaper is None:
                self._reaper = asyncio.create_task(self._reap_idle())
        return result

    def _forget(self, zygote: Zygote) -> None:
        if self._zygotes.get(zygote.key) is zygote:
            del self._zygotes[zygote.key]
        if zygote.alive or not zygote.process.exited:
            task = asyncio.get_running_loop().create_task(zygote.stop())
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)

    async def _reap_idle(self) -> None:
        while True:
            await asyncio.sleep(max(self.idle_s / 4, 0.05))
            now = time.monotonic()
            for zygote in list(self._zygotes.values()):
                idle = zygote.workers == 0 and now - zygote.last_used > self.idle_s
                if idle or not zygote.alive:
                    self._zygotes.pop(zygote.key, None)
                    await zygote.stop()


def _host_pid(launched: int, inner: int) -> int:
    """The zygote's pid as the runner sees it: ``inner`` is its pid in its own namespace (bubblewrap's)."""
    for proc in [launched, *(child.pid for child in descendants(launched))]:
        try:
            with open(f"/proc/{proc}/status") as status:
                for line in status:
                    if line.startswith("NSpid:") and int(line.split()[-1]) == inner:
                        return proc
        except (OSError, ValueError):
            continue
    return inner


def code_modules(code: WorkerCode) -> list[str]:
    """The modules a zygote of ``code`` imports: those its tools live in."""
    return sorted({module_path for module_path, _ in code.tools.values()})


def code_key(code: WorkerCode, limits: Limits, state: str | None = None) -> str:
    """What a zygote is keyed by: the bundle (its package name digests root and content), the modules
    its workers import, the limits they run under, and the initial state it holds (its full hash).
    Tasks using other tools of the same modules share it; tasks with other initial states do not, so
    no worker's memory holds the initial state of a task other than its own."""
    material = json.dumps([str(code.root), code.package, code_modules(code), limits.to_json(), state])
    return hashlib.sha256(material.encode()).hexdigest()
