"""The golden agent: performs the task's golden actions as real tool calls, then says the golden response.

One assistant turn per action, each with its own id (``golden-<n>``), so the runner records exactly
the calls the grader replays; then one final turn with the task's ``golden_response`` (when it has
one) that declares the task done. Against a correct pack and runner every task scores 1.0, which is
what makes it the end-to-end check of the whole harness.

An action whose ``executor`` is ``"user"`` (a user-side golden action: τ²'s telecom device actions) is
played in its place in the list as the user's own call: a turn with ``executor="user"``, which the loop
runs with executor "user" and records as a user message. Its name is resolved against the task's user
tools as an agent action's is against the offered agent tools.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from tolokaforge.contracts.runner import ToolSchema
from tolokaforge.core.models import GoldenAction, TaskDescription
from tolokaforge.core.transcript import Message

from ..turns import AgentTurn, ProposedCall

__all__ = ["GoldenAgent", "GoldenAgentFactory", "resolve_tool_name"]


def resolve_tool_name(name: str, offered: Sequence[str]) -> str:
    """As the runner resolves golden names: exactly, or the single offered ``…_<name>``; else as given."""
    if name in offered:
        return name
    suffixed = [candidate for candidate in offered if candidate.endswith(f"_{name}")]
    return suffixed[0] if len(suffixed) == 1 else name


class GoldenAgent:
    def __init__(
        self, actions: Sequence[GoldenAction], response: str | None, user_tools: Sequence[str] = ()
    ) -> None:
        self._actions = list(actions)
        self._response = response
        self._user_tools = list(user_tools)
        self._next = 0

    async def next_turn(self, messages: Sequence[Message], tools: Sequence[ToolSchema]) -> AgentTurn:
        if self._next < len(self._actions):
            action = self._actions[self._next]
            self._next += 1
            executor = action.executor
            offered = self._user_tools if executor == "user" else [tool.name for tool in tools]
            name = resolve_tool_name(action.tool_name, offered)
            call = ProposedCall(
                id=f"golden-{self._next}", name=name, arguments_json=json.dumps(action.arguments)
            )
            return AgentTurn(content="", tool_calls=(call,), executor=executor)
        return AgentTurn(content=self._response or "", done=True)


@dataclass
class GoldenAgentFactory:
    name: str = "golden"
    model: str | None = None

    def for_trial(self, task: TaskDescription) -> GoldenAgent:
        state_checks = task.grading.state_checks
        actions = state_checks.golden_actions if state_checks is not None else []
        return GoldenAgent(actions, task.golden_response, [tool.name for tool in task.user_tools])
