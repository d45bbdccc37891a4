"""The scripted user: says the task's ``scripted_flow`` turns, and answers by rules when the flow has them.

A flow is a list of turns, each one of (as the pack loader hands them over, docs/pack-format.md):

- ``{"user": text}`` -- said once, in order;
- ``{"if_assistant_contains": phrase, "user": text}`` -- said whenever the assistant's latest message
  contains ``phrase`` (case-insensitive), the first matching rule winning;
- ``{"default": text}`` -- said when no rule matches (the last one given counts).

This is the public Tolokaforge user simulator's order of preference: an unconditional turn not said yet
(a turn whose text the user already said, the task's first message included, counts as said), then a
matching rule, then the default, then the public generic answers ("Yes, please proceed." after a
question, else "Okay."). A flow without rules ends the conversation (###STOP###) once its turns are
said: there is nothing left it could say, and the public harness would only repeat generic answers
until the turn budget runs out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tolokaforge.contracts.runner import ToolSchema
from tolokaforge.core.models import TaskDescription
from tolokaforge.core.transcript import AssistantMessage, Message, UserMessage

from ..turns import UserTurn
from .base import STOP_MARKER

__all__ = ["ScriptedUser", "ScriptedUserFactory"]

_AFTER_QUESTION = "Yes, please proceed."
_AFTER_STATEMENT = "Okay."
_NO_ASSISTANT_YET = "I'm waiting for your response."


@dataclass(frozen=True)
class _Rule:
    phrase: str
    text: str


class ScriptedUser:
    def __init__(self, flow: Sequence[dict[str, Any]]) -> None:
        self._turns = [str(turn["user"]).strip() for turn in flow if _is_plain(turn)]
        self._rules = [
            _Rule(str(turn["if_assistant_contains"]).lower(), str(turn["user"]))
            for turn in flow
            if "if_assistant_contains" in turn
        ]
        defaults = [str(turn["default"]) for turn in flow if "default" in turn]
        self._default = defaults[-1] if defaults else None
        self._answers_by_rule = bool(self._rules) or self._default is not None

    async def next_turn(self, messages: Sequence[Message], tools: Sequence[ToolSchema]) -> UserTurn:
        said = {message.content.strip() for message in messages if isinstance(message, UserMessage)}
        text = next((turn for turn in self._turns if turn and turn not in said), None)
        if text is None:
            if not self._answers_by_rule:
                return UserTurn(content=STOP_MARKER, stop=True)
            text = self._answer(_last_assistant_text(messages))
        return UserTurn(content=text, stop=STOP_MARKER in text)

    def _answer(self, assistant: str | None) -> str:
        if not assistant:
            return _NO_ASSISTANT_YET
        lowered = assistant.lower()
        for rule in self._rules:
            if rule.phrase in lowered:
                return rule.text
        if self._default:
            return self._default
        return _AFTER_QUESTION if "?" in assistant else _AFTER_STATEMENT


def _is_plain(turn: dict[str, Any]) -> bool:
    return "user" in turn and not any(key.startswith("if_") for key in turn)


def _last_assistant_text(messages: Sequence[Message]) -> str | None:
    for message in reversed(messages):
        if isinstance(message, AssistantMessage):
            return message.content
    return None


@dataclass
class ScriptedUserFactory:
    def for_trial(self, task: TaskDescription) -> ScriptedUser:
        simulator = task.user_simulator
        return ScriptedUser(simulator.scripted_flow if simulator else [])
