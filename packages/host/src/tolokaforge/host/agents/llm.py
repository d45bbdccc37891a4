"""The llm agent: an OpenAI-compatible chat model with tool calling, behind the Agent interface.

The agent never ends a conversation itself: like tau-bench, the (simulated) user does, or the turn
budget does -- unless the task's conversation rules name agent stop markers: then a turn whose text
contains one is done. Under rules the agent reads the conversation as τ²'s agent does (a user message
that called tools is not shown to it). Every turn's spend is returned with the turn so the trial loop
can account for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tolokaforge.contracts.runner import ToolSchema
from tolokaforge.core.models import ConversationRules, TaskDescription
from tolokaforge.core.transcript import Message

from ..llm.chat import ChatClient
from ..llm.openai_format import agent_view, proposed_calls, tool_specs
from ..turns import AgentTurn

__all__ = ["LLMAgent", "LLMAgentFactory"]


class LLMAgent:
    def __init__(self, client: ChatClient, rules: ConversationRules | None = None) -> None:
        self._client = client
        self._rules = rules

    async def next_turn(self, messages: Sequence[Message], tools: Sequence[ToolSchema]) -> AgentTurn:
        view = agent_view(messages, text_or_calls=self._rules is not None)
        result = await self._client.complete(view, tool_specs(tools))
        content = result.message.get("content")
        text = content if isinstance(content, str) else ""
        return AgentTurn(
            content=text,
            tool_calls=proposed_calls(result.message),
            done=self._rules is not None and self._rules.agent_stops(text),
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
        return LLMAgent(self.client, task.conversation)
