"""A trial's tool workers: the one in step with the mirror's tables, started on demand.

A worker matches when it was built from the very tables object the mirror holds now and has seen
every commit since (``version``). Grading's golden replay gives the mirror other tables (reset or
restored state) and puts the trial's back afterwards; so two workers are kept -- the trial's and the
replay's, each with fresh module state -- and the least recently used one is killed to start a third.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from .worker import ToolWorker

__all__ = ["TrialWorkers"]

_KEEP = 2

Launcher = Callable[[dict[str, Any], int], Awaitable[ToolWorker]]


class TrialWorkers:
    def __init__(self, launch: Launcher) -> None:
        self._launch = launch
        self._workers: list[ToolWorker] = []  # most recently used first

    async def for_state(self, tables: dict[str, Any], version: int) -> ToolWorker:
        """The worker holding ``tables`` at ``version``, started (outside any call's budget) if none does."""
        for worker in list(self._workers):
            if not worker.alive:
                await self.discard(worker)
            elif worker.tables is tables and worker.version == version:
                self._workers.remove(worker)
                self._workers.insert(0, worker)
                return worker
            elif worker.tables is tables:
                await self.discard(worker)  # same tables, missed a change: out of step for good
        while len(self._workers) >= _KEEP:
            await self.discard(self._workers[-1])
        worker = await self._launch(tables, version)
        self._workers.insert(0, worker)
        return worker

    async def discard(self, worker: ToolWorker) -> None:
        if worker in self._workers:
            self._workers.remove(worker)
        await worker.kill()

    async def close(self) -> None:
        for worker in list(self._workers):
            await self.discard(worker)

    def __len__(self) -> int:
        return len(self._workers)

    def pids(self) -> list[int]:
        return [worker.child.pid for worker in self._workers]

    def live(self) -> list[ToolWorker]:
        """The workers kept, most recently used first."""
        return list(self._workers)
