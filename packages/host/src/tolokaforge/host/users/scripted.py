"""The scripted user: says the task's ``scripted_flow`` turns in order, then ###STOP###."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tolokaforge.contracts.runner import ToolSchema
from tolokaforge.core.models import TaskDescription
from tolokaforge.core.transcript import Message

from ..turns import UserTurn
from .base import STOP_MARKER

__all__ = ["ScriptedUser", "ScriptedUserFactory"]


class ScriptedUser:
    def __init__(self, flow: Sequence[str]) -> None:
        self._flow = list(flow)
        self._next = 0

    async def next_turn(self, messages: Sequence[Message], tools: Sequence[ToolSchema]) -> UserTurn:
        if self._next >= len(self._flow):
            return UserTurn(content=STOP_MARKER, stop=True)
        text = self._flow[self._next]
        self._next += 1
        return UserTurn(content=text, stop=STOP_MARKER in text)


@dataclass
class ScriptedUserFactory:
    def for_trial(self, task: TaskDescription) -> ScriptedUser:
        simulator = task.user_simulator
        flow = [str(turn.get("user", "")) for turn in simulator.scripted_flow] if simulator else []
        return ScriptedUser(flow)
