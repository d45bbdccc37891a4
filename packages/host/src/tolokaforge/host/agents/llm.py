"""The llm agent: an OpenAI-compatible chat model with tool calling, behind the Agent interface.

The agent never ends a conversation itself: like tau-bench, the (simulated) user does, or the turn
budget does. Every turn's spend is returned with the turn so the trial loop can account for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tolokaforge.contracts.runner import ToolSchema
from tolokaforge.core.models import TaskDescription
from tolokaforge.core.transcript import Message

from ..llm.chat import ChatClient
from ..llm.openai_format import agent_view, proposed_calls, tool_specs
from ..turns import AgentTurn

__all__ = ["LLMAgent", "LLMAgentFactory"]


class LLMAgent:
    def __init__(self, client: ChatClient) -> None:
        self._client = client

    async def next_turn(self, messages: Sequence[Message], tools: Sequence[ToolSchema]) -> AgentTurn:
        result = await self._client.complete(agent_view(messages), tool_specs(tools))
        content = result.message.get("content")
        return AgentTurn(
            content=content if isinstance(content, str) else "",
            tool_calls=proposed_calls(result.message),
            usage=result.usage,
        )


@dataclass
class LLMAgentFactory:
    client: ChatClient
    name: str = "llm"

    @property
    def model(self) -> str | None:
        return self.client.settings.model

    def for_trial(self, task: TaskDescription) -> LLMAgent:
        return LLMAgent(self.client)
