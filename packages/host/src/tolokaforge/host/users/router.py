"""Picks each task's simulated user by its ``user_simulator.mode``: scripted, or the LLM user."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tolokaforge.contracts.runner import ToolSchema
from tolokaforge.core.models import TaskDescription
from tolokaforge.core.transcript import Message

from ..errors import ConfigError
from ..turns import UserTurn
from .base import UserSimulator, UserSimulatorFactory
from .scripted import ScriptedUserFactory
from .stand_in import StandInUser

__all__ = ["UserRouter"]


class _Unavailable:
    """An LLM user asked for with no model configured: the trial ends ``error`` saying so."""

    def __init__(self, task_id: str) -> None:
        self._task_id = task_id

    async def next_turn(self, messages: Sequence[Message], tools: Sequence[ToolSchema]) -> UserTurn:
        raise ConfigError(
            f"task {self._task_id} wants an LLM user (user_simulator.mode: llm) but no user model is configured"
        )


@dataclass
class UserRouter:
    llm: UserSimulatorFactory | None = None
    scripted: UserSimulatorFactory | None = None
    stand_in: bool = False
    """A golden run: an LLM user with no model configured is the stand-in user (stand_in.py)."""

    def for_trial(self, task: TaskDescription) -> UserSimulator:
        mode = task.user_simulator.mode if task.user_simulator else "scripted"
        if mode == "llm":
            if self.llm is not None:
                return self.llm.for_trial(task)
            return StandInUser() if self.stand_in else _Unavailable(task.task_id)
        return (self.scripted or ScriptedUserFactory()).for_trial(task)
