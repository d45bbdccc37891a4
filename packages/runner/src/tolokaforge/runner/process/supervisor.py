"""The one way the runner starts a child process: its own session, killed as a group, always reaped.

Every child (tool worker, tool provider, custom-check suite; MCP servers through the same launcher)
leads a session of its own, so killing its process group also kills whatever it started; descendants
that moved to a session of their own are found with psutil before the kill. Live children are
tracked, so runner shutdown -- and, as a last resort, interpreter exit -- leaves none behind.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import dataclasses
import errno
import json
import os
import shutil
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

import psutil

from . import sandbox
from .confinement import Confinement, Launch, View
from .sandbox import Limits

__all__ = [
    "Killable",
    "Supervised",
    "confined_launch",
    "descendants",
    "forget",
    "kill_all_supervised",
    "launcher_argv",
    "probe_limits",
    "signal_group",
    "track",
]


class Killable(Protocol):
    """A live child the runner must not leave behind: its own (Supervised) or one a zygote forked for it."""

    @property
    def exited(self) -> bool: ...

    def kill(self) -> None: ...


_live: set[Killable] = set()
_EXIT_POLL_S = 0.005
_DESCENDANTS_GONE_S = 5.0
_atexit_registered = False


def track(child: Killable) -> None:
    """Kill ``child`` at runner shutdown (and, as a last resort, at interpreter exit) unless forgotten first."""
    global _atexit_registered
    if not _atexit_registered:
        atexit.register(kill_all_supervised)
        _atexit_registered = True
    _live.add(child)


def forget(child: Killable) -> None:
    _live.discard(child)


Redirect = int | IO[Any] | None


def confined_launch(
    confinement: Confinement, limits: Limits, argv: Sequence[str], env: Mapping[str, str], view: View
) -> Launch:
    """``argv`` run in the sandbox (or, at the process level, under ``limits`` alone) through the launcher."""
    program = launcher_argv(limits, argv, env)
    # The program and the files it is handed by absolute path (a server script) are seen read-only.
    named = tuple(
        Path(arg)
        for arg in program[5:]
        if os.path.isabs(arg) and os.path.isfile(arg) and not confinement.covers(arg)
    )
    view = dataclasses.replace(view, read=(*view.read, *named))
    program[3] = confinement.spec(limits, view)
    return confinement.launch(program, limits, view)


def launcher_argv(limits: Limits, argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """``argv`` run under ``limits``: the sandbox launcher applies them, then execs ``argv``.

    The program is resolved here, on the child's ``PATH``, so a missing one is a FileNotFoundError
    for the caller to report -- as if it had been started directly.
    """
    program = argv[0]
    if os.sep not in program:
        found = shutil.which(program, path=env.get("PATH", ""))
        if found is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
        program = found
    elif not os.access(program, os.X_OK):
        raise FileNotFoundError(errno.ENOENT, "not an executable file", program)
    return [sys.executable, "-I", sandbox.__file__, limits.to_json(), "--", program, *argv[1:]]


async def probe_limits(limits: Limits, confinement: Confinement, scratch: Path) -> dict[str, str]:
    """What ``limits`` come to on this machine, asked of a throwaway child (sandbox.py --report) in
    the sandbox a worker would get (``scratch``: an empty directory standing for its workspace)."""
    scratch.mkdir(parents=True, exist_ok=True)
    confinement.own(scratch)
    view = View(cwd=scratch, write=(scratch,))
    argv = [sys.executable, "-I", sandbox.__file__, "--report", confinement.spec(limits, view)]
    child = await Supervised.spawn_launch(
        confinement.launch(argv, limits, view),
        cwd=scratch,
        env=sandbox.scrubbed_env({}, home=str(scratch)),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        out, _ = await asyncio.wait_for(child.process.communicate(), 30)
        report: dict[str, str] = json.loads(out)
        return report
    except (TimeoutError, ValueError) as error:
        return {"probe": f"failed ({type(error).__name__}: {error})"}
    finally:
        await child.stop()


class Supervised:
    """One supervised child (an ``asyncio.subprocess.Process`` in a session of its own)."""

    def __init__(self, process: asyncio.subprocess.Process, *, sandboxed: bool = False) -> None:
        self.process = process
        self.sandboxed = sandboxed
        """Started through bubblewrap, which exits with 128 + N when the sandboxed program died of signal N."""
        self._killed: list[psutil.Process] = []
        """Descendants killed with the child: a sandboxed one's are not its children, so reaping it
        does not wait for them; :meth:`reap` does."""

    @classmethod
    async def spawn_launch(
        cls,
        launch: Launch,
        *,
        cwd: Path,
        env: Mapping[str, str],
        stdin: Redirect = asyncio.subprocess.DEVNULL,
        stdout: Redirect = asyncio.subprocess.DEVNULL,
        stderr: Redirect = asyncio.subprocess.DEVNULL,
    ) -> Supervised:
        """Spawn a command line the confinement built (process/confinement.py)."""
        with launch.opened() as (argv, fds):
            child = await cls.spawn(
                argv, cwd=cwd, env=env, stdin=stdin, stdout=stdout, stderr=stderr, pass_fds=fds
            )
        child.sandboxed = launch.sandboxed
        return child

    @classmethod
    async def spawn(
        cls,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        stdin: Redirect = asyncio.subprocess.DEVNULL,
        stdout: Redirect = asyncio.subprocess.DEVNULL,
        stderr: Redirect = asyncio.subprocess.DEVNULL,
        pass_fds: Sequence[int] = (),
    ) -> Supervised:
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=dict(env),
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
            pass_fds=tuple(pass_fds),
        )
        child = cls(process)
        track(child)
        return child

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        """The exit code; a signal's death as ``-N`` (as asyncio reports it for a direct child)."""
        code = self.process.returncode
        if self.sandboxed and code is not None and 128 < code < 128 + 65:
            return 128 - code
        return code

    @property
    def exited(self) -> bool:
        return self.process.returncode is not None

    def kill(self) -> None:
        """SIGKILL the child's group and every descendant that left it (synchronous, idempotent)."""
        found = descendants(self.pid) if not self.exited else []
        signal_group(self.pid, signal.SIGKILL)
        for proc in found:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        self._killed.extend(found)

    async def stop(self, grace_s: float = 0.0) -> int | None:
        """SIGTERM the group, wait up to ``grace_s``, then :meth:`kill` and reap; the exit code."""
        if grace_s > 0 and not self.exited:
            found = descendants(self.pid)
            signal_group(self.pid, signal.SIGTERM)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.process.wait(), grace_s)
            for proc in found:
                with contextlib.suppress(psutil.Error):
                    proc.kill()
        self.kill()
        return await self.reap()

    async def reap(self, *, status: bool = True) -> int | None:
        """Wait for the (killed or exiting) child; forget it. Its end and its status are one wait here."""
        await self.process.wait()
        # The group may outlive its leader (a grandchild that ignored SIGTERM): kill it for good.
        signal_group(self.pid, signal.SIGKILL)
        if self.sandboxed and self._killed:
            killed, self._killed = self._killed, []
            await _until_dead(killed, _DESCENDANTS_GONE_S)
        forget(self)
        return self.returncode

    async def reap_exit(self, deadline_s: float = 5.0) -> int | None:
        """:meth:`reap` without waiting for the child's pipes to close.

        asyncio's ``wait()`` also waits for the pipes' EOF, which a daemon the child double-forked
        (out of reach of the kill) may hold open for as long as it lives; the exit code is set as
        soon as the child is gone.
        """
        loop = asyncio.get_running_loop()
        until = loop.time() + deadline_s
        while self.process.returncode is None and loop.time() < until:
            await asyncio.sleep(_EXIT_POLL_S)
        signal_group(self.pid, signal.SIGKILL)
        if self.process.returncode is not None:
            forget(self)
        return self.returncode


async def _until_dead(procs: list[psutil.Process], deadline_s: float) -> None:
    """Wait until every process in ``procs`` has ended (a zombie has: only its reaping is left)."""
    loop = asyncio.get_running_loop()
    until = loop.time() + deadline_s
    pending = procs
    while pending and loop.time() < until:
        alive: list[psutil.Process] = []
        for proc in pending:
            with contextlib.suppress(psutil.Error):
                if proc.status() != psutil.STATUS_ZOMBIE:
                    alive.append(proc)
        pending = alive
        if pending:
            await asyncio.sleep(_EXIT_POLL_S)


def kill_all_supervised() -> None:
    """SIGKILL every live child's group (runner shutdown, interpreter exit)."""
    for child in list(_live):
        child.kill()
        if child.exited:
            _live.discard(child)


def descendants(pid: int) -> list[psutil.Process]:
    """Every live descendant of ``pid`` (whatever group or session it moved to)."""
    if not _HAS_CHILDREN_LISTS:
        try:
            return psutil.Process(pid).children(recursive=True)
        except psutil.Error:
            return []
    # Walk down the tree through the kernel's per-thread children lists: psutil finds children by
    # reading every process's parent on the machine, tens of milliseconds on a busy host, per kill.
    found: list[psutil.Process] = []
    pending = [pid]
    while pending:
        parent = pending.pop()
        for child in _children(parent):
            with contextlib.suppress(psutil.Error):
                found.append(psutil.Process(child))
                pending.append(child)
    return found


def _children(pid: int) -> list[int]:
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    children: list[int] = []
    for thread in threads:
        try:
            with open(f"/proc/{pid}/task/{thread}/children", "rb") as listing:
                children.extend(int(child) for child in listing.read().split())
        except OSError:
            continue  # the thread (or the process) ended meanwhile
    return children


_HAS_CHILDREN_LISTS = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")
"""Linux with CONFIG_PROC_CHILDREN (most distributions): children are listed per thread."""


def signal_group(pid: int, sig: signal.Signals) -> None:
    # The child leads its own session (start_new_session, or setsid in a forked worker): its pid is its group's id.
    if pid <= 0:  # 0 and -1 would name the runner's own group, or every process it may signal
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
