"""A worker a zygote forked for the runner: watched, killed and reaped like a child of the runner's own.

It is the zygote's child, not the runner's, so the runner cannot wait for it. It learns of the exit
from a pidfd (readable the moment the process ends, whoever reaps it) and of the exit status from
the zygote, which reaps it and reports the status over its control socket. The worker leads a session
of its own, so killing its group -- and the descendants that left the group, found with psutil --
kills whatever the tool started, as for a supervised child.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

import psutil

from .supervisor import descendants, forget, signal_group, track

__all__ = ["ForkedChild"]

_STATUS_WAIT_S = 2.0
"""How long after the exit the zygote's report of the status is awaited (it reaps at once when alive)."""


class ForkedChild:
    """One forked worker: ``returncode`` is its exit status once the zygote reported it (None if the zygote died)."""

    @classmethod
    def from_pidfd(cls, pidfd: int) -> ForkedChild:
        """The worker a pidfd names (passed by a zygote in its own pid namespace): its pid is read here."""
        pid = 0
        try:
            with open(f"/proc/self/fdinfo/{pidfd}") as info:
                for line in info:
                    if line.startswith("Pid:"):
                        pid = int(line.split()[1])
        except (OSError, ValueError):
            pid = 0
        if pid <= 0:  # it has exited already (the kernel says -1)
            os.close(pidfd)
            return cls(0)
        return cls(pid, pidfd=pidfd)

    def __init__(self, pid: int, *, pidfd: int | None = None) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._loop = asyncio.get_running_loop()
        self._gone = asyncio.Event()
        self._status: asyncio.Future[int | None] = self._loop.create_future()
        self._pidfd: int | None = pidfd
        try:
            if pid <= 0:  # exited before the runner read its pid: the zygote's report follows
                raise ProcessLookupError(pid)
            if self._pidfd is None:
                self._pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            self._gone.set()  # already ended and reaped: the zygote's report follows
        except (OSError, AttributeError):
            pass  # no pidfd on this kernel: the zygote's report alone says when it ended
        else:
            self._loop.add_reader(self._pidfd, self._ended)
        track(self)

    @property
    def exited(self) -> bool:
        return self._gone.is_set()

    def reported(self, code: int) -> None:
        """The zygote reaped the worker, which exited with ``code``."""
        if not self._status.done():
            self._status.set_result(code)
        self._ended()

    def orphaned(self) -> None:
        """The zygote died: the worker dies with it (PDEATHSIG; killed here too), its status unknown."""
        if not self._status.done():
            self._status.set_result(None)
        self.kill()
        if self._pidfd is None:
            self._ended()  # nothing else would say it ended

    def kill(self) -> None:
        """SIGKILL the worker, its group and every descendant that left it (synchronous, idempotent)."""
        if self.pid <= 0:
            return
        found = descendants(self.pid) if not self.exited else []
        if self._pidfd is not None and not self.exited:
            # Addressed by pidfd, not pid: safe against reuse, and it reaches a worker not yet in its own group.
            with contextlib.suppress(ProcessLookupError, OSError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
        signal_group(self.pid, signal.SIGKILL)
        for proc in found:
            with contextlib.suppress(psutil.Error):
                proc.kill()

    async def reap(self, *, status: bool = True) -> int | None:
        """Wait for the (killed or exiting) worker's end and, with ``status``, for its exit status; forget it.

        A worker the runner killed on purpose needs no status: not waiting for the zygote's report
        saves a wake-up of the zygote and of the runner on every discard.
        """
        await self._gone.wait()
        if self.returncode is None and self._status.done():
            self.returncode = self._status.result()
        if self.returncode is None and status:
            with contextlib.suppress(TimeoutError):
                self.returncode = await asyncio.wait_for(asyncio.shield(self._status), _STATUS_WAIT_S)
        # The group may outlive its leader (a grandchild that ignored SIGTERM): kill it for good.
        signal_group(self.pid, signal.SIGKILL)
        forget(self)
        return self.returncode

    def _ended(self) -> None:
        if self._pidfd is not None:
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        self._gone.set()
