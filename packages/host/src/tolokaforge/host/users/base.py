"""The simulated user's interface, and the marker that ends a conversation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol

from tolokaforge.contracts.runner import ToolSchema
from tolokaforge.core.models import TaskDescription
from tolokaforge.core.transcript import Message

from ..turns import UserTurn

__all__ = ["STOP_MARKER", "UserSimulator", "UserSimulatorFactory"]

STOP_MARKER: Final = "###STOP###"
"""A user message containing this ends the conversation (termination ``user_stop``)."""


class UserSimulator(Protocol):
    """Produces the user's next turn; ``tools`` are the user-side tools (executor "user")."""

    async def next_turn(self, messages: Sequence[Message], tools: Sequence[ToolSchema]) -> UserTurn: ...


class UserSimulatorFactory(Protocol):
    def for_trial(self, task: TaskDescription) -> UserSimulator: ...
