"""The Ray actor: one embedded runner, whole trials driven by the conductor, in the worker's process.

A trial's traffic (agent turns, tool calls, grading) stays inside the worker; only the task in and the
TrialOutcome out cross the cluster. The runner, the HTTP session and the factories are made on the
worker's first call, on its own event loop (an actor is constructed before its loop runs).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from typing import Any, Literal

from tolokaforge.core.runner_api import Runner

from ...agents.base import AgentFactory
from ...agents.setup import AgentRecipe
from ...llm import llm_session
from ...packs.loader import LoadedTask
from ...results.outcome import TrialOutcome
from ...runner import open_runner
from ...users.router import UserRouter
from ..conductor import TrialSettings, run_trial

__all__ = ["Isolation", "TrialWorker"]

Isolation = Literal["sandbox", "process", "thread"]
GoldenReplay = Literal["task", "trial"]


class TrialWorker:
    """Ray makes this an actor (driver.py); its methods are called through Ray, never directly."""

    def __init__(
        self,
        recipe: AgentRecipe,
        transport_budget_s: float,
        isolation: Isolation,
        concurrency: int,
        golden_replay: GoldenReplay = "task",
        sandbox_without: tuple[str, ...] = (),
    ) -> None:
        self._recipe = recipe
        self._sandbox_without = sandbox_without
        self._concurrency = concurrency
        self._transport_budget_s = transport_budget_s
        self._isolation: Isolation = isolation
        self._golden_replay: GoldenReplay = golden_replay
        self._stack = contextlib.AsyncExitStack()
        self._ready: tuple[Runner, AgentFactory, UserRouter] | None = None
        self._lock: asyncio.Lock | None = None

    async def _parts(self) -> tuple[Runner, AgentFactory, UserRouter]:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._ready is None:
                runner = await self._stack.enter_async_context(
                    open_runner(
                        None,
                        transport_budget_s=self._transport_budget_s,
                        isolation=self._isolation,
                        golden_replay=self._golden_replay,
                        sandbox_without=self._sandbox_without,
                    )
                )
                session = await self._stack.enter_async_context(llm_session(self._concurrency))
                agents, users = self._recipe.build(session)
                self._ready = (runner, agents, users)
            return self._ready

    async def health(self, budget_s: float) -> dict[str, Any]:
        """The worker's runner answers a HealthCheck; where the worker runs (for run.yaml and tests)."""
        runner, _, _ = await self._parts()
        health = await runner.health(budget_s=budget_s)
        return {
            "version": health.version,
            "status": health.status,
            "db_service_connected": health.store_connected,
            "tool_adapters": list(health.adapters),
            "pid": os.getpid(),
            "node": socket.gethostname(),
        }

    async def run_trial(
        self, loaded: LoadedTask, trial_index: int, settings: TrialSettings, first_attempt: int
    ) -> TrialOutcome:
        runner, agents, users = await self._parts()
        return await run_trial(
            runner, loaded, trial_index, agents, users, settings, first_attempt=first_attempt
        )

    async def close(self) -> None:
        await self._stack.aclose()
        self._ready = None
