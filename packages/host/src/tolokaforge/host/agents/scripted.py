"""The scripted agent: plays turns from a YAML/JSON file, then declares the task done.

File shape: a list of turns (every task plays it), or ``{default: [...], tasks: {task_id: [...]}}``.
A turn is ``{content: str, tool_calls: [{name, arguments, id?}], done: bool}``; ``arguments`` may be
an object or a raw string (sent to the runner as written, to test argument validation).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from tolokaforge.contracts.runner import ToolSchema
from tolokaforge.core.models import TaskDescription, describe_validation_error
from tolokaforge.core.transcript import Message

from ..errors import ConfigError
from ..turns import AgentTurn, ProposedCall

__all__ = ["ScriptedAgent", "ScriptedAgentFactory", "load_script"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ScriptedCall(_Strict):
    name: str
    arguments: dict[str, Any] | str = {}
    id: str = ""


class ScriptedTurn(_Strict):
    content: str = ""
    tool_calls: list[ScriptedCall] = []
    done: bool = False


class Script(_Strict):
    default: list[ScriptedTurn] = []
    tasks: dict[str, list[ScriptedTurn]] = {}


def load_script(path: Path) -> Script:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"agent script {path}: cannot be read: {error}") from error
    try:
        return Script.model_validate({"default": raw} if isinstance(raw, list) else raw)
    except ValidationError as error:
        raise ConfigError(f"agent script {path}: {describe_validation_error(error)}") from error


class ScriptedAgent:
    def __init__(self, turns: Sequence[ScriptedTurn]) -> None:
        self._turns = list(turns)
        self._next = 0

    async def next_turn(self, messages: Sequence[Message], tools: Sequence[ToolSchema]) -> AgentTurn:
        if self._next >= len(self._turns):
            return AgentTurn(content="", done=True)
        turn = self._turns[self._next]
        self._next += 1
        calls = tuple(
            ProposedCall(
                id=call.id or f"scripted-{self._next}-{index}",
                name=call.name,
                arguments_json=call.arguments
                if isinstance(call.arguments, str)
                else json.dumps(call.arguments),
            )
            for index, call in enumerate(turn.tool_calls)
        )
        return AgentTurn(content=turn.content, tool_calls=calls, done=turn.done)


@dataclass
class ScriptedAgentFactory:
    script: Script
    name: str = "scripted"
    model: str | None = None

    def for_trial(self, task: TaskDescription) -> ScriptedAgent:
        return ScriptedAgent(self.script.tasks.get(task.task_id, self.script.default))
