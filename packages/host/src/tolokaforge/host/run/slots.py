"""How many trials a run has going at once: ``concurrency`` episodes, and as many being graded.

A trial's episode (the agent and the model, turn by turn) is what ``--concurrency`` is for: it bounds
the conversations the model endpoint sees at once. Grading and cleanup that follow are runner work
(and, with a rubric judge, the judge model's). A trial whose episode has ended hands its episode slot
to the next trial and holds a grading slot until it is cleaned up, so the next episode starts while
this one is graded, not after: against a runner process at concurrency 256, grading and cleanup took
90 ms per trial under load, a twentieth of a 2 s episode, on every trial of every slot.

At most ``2 x concurrency`` trials are registered at the runner at once. A trial never waits for an
episode slot while holding a grading slot (one lost at grading gives it back first, then waits for an
episode slot to try again), so the two bounds cannot wait on each other.
"""

from __future__ import annotations

import asyncio
import time
from types import TracebackType
from typing import Literal

__all__ = ["TrialSlot", "TrialSlots"]


class TrialSlots:
    def __init__(self, concurrency: int) -> None:
        self._episodes = asyncio.Semaphore(concurrency)
        self._grading = asyncio.Semaphore(concurrency)

    def slot(self) -> TrialSlot:
        """One trial's slot: entered, it holds an episode slot."""
        return TrialSlot(self._episodes, self._grading)


class TrialSlot:
    def __init__(self, episodes: asyncio.Semaphore, grading: asyncio.Semaphore) -> None:
        self._episodes = episodes
        self._grading = grading
        self._held: Literal["episode", "grading"] | None = None
        self.waited_s = 0.0
        """Seconds spent waiting for a slot after the first (the run's queue, not the trial's own time)."""

    async def __aenter__(self) -> TrialSlot:
        await self._episodes.acquire()
        self._held = "episode"
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._release()

    async def to_grading(self) -> None:
        """The episode ended: take a grading slot, then give the episode slot to the next trial."""
        if self._held != "episode":
            return
        started = time.perf_counter()
        await self._grading.acquire()
        self.waited_s += time.perf_counter() - started
        self._episodes.release()
        self._held = "grading"

    async def to_episode(self) -> None:
        """Another attempt's episode is about to run: give the grading slot back, then wait for an episode slot."""
        if self._held == "episode":
            return
        self._release()
        started = time.perf_counter()
        await self._episodes.acquire()
        self.waited_s += time.perf_counter() - started
        self._held = "episode"

    def _release(self) -> None:
        if self._held == "episode":
            self._episodes.release()
        elif self._held == "grading":
            self._grading.release()
        self._held = None
