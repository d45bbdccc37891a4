"""The one small interface every agent implements, and the factory that makes one per trial."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from tolokaforge.contracts.runner import ToolSchema
from tolokaforge.core.models import TaskDescription
from tolokaforge.core.transcript import Message

from ..turns import AgentTurn

__all__ = ["Agent", "AgentFactory"]


class Agent(Protocol):
    """Produces the next assistant turn from the transcript so far (system message first)."""

    async def next_turn(self, messages: Sequence[Message], tools: Sequence[ToolSchema]) -> AgentTurn: ...


class AgentFactory(Protocol):
    """Makes a fresh agent for each trial (agents may keep per-episode state)."""

    @property
    def name(self) -> str: ...

    @property
    def model(self) -> str | None: ...

    def for_trial(self, task: TaskDescription) -> Agent: ...
