"""The LLM user: a chat model playing the task's customer, ending the conversation with ###STOP###.

It is given the persona, the backstory and what it wants (the task's first message and description),
and may call the user-side tools (its phone, in a dual-control task); the trial loop runs those with
executor "user". A pack may give its whole system prompt instead (``user_simulator.system_prompt``,
τ²'s guidelines and scenario): it is used verbatim. Under the task's conversation rules the user stops
on the rules' user stop markers and reads the conversation as τ²'s user does (``user_view``,
``text_or_calls``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tolokaforge.contracts.runner import ToolSchema
from tolokaforge.core.models import ConversationRules, TaskDescription
from tolokaforge.core.transcript import Message

from ..llm.chat import ChatClient
from ..llm.openai_format import proposed_calls, tool_specs, user_view
from ..turns import UserTurn
from .base import STOP_MARKER

__all__ = ["LLMUser", "LLMUserFactory", "user_system_prompt"]


def user_system_prompt(task: TaskDescription) -> str:
    simulator = task.user_simulator
    if simulator is not None and simulator.system_prompt:
        return simulator.system_prompt
    persona = simulator.persona if simulator else ""
    backstory = simulator.backstory if simulator else ""
    return (
        "You are a customer talking to a support agent. Stay in character; never act as the agent.\n"
        f"Persona: {persona or 'cooperative'}\n"
        f"Backstory: {backstory}\n"
        f"What you came for: {task.initial_user_message or task.description}\n"
        "Reveal details only when asked. If you have tools, they act on your own device; use them when "
        f"the agent asks you to. When your issue is resolved, or cannot be, reply with exactly {STOP_MARKER}."
    )


class LLMUser:
    def __init__(
        self, client: ChatClient, system_prompt: str, rules: ConversationRules | None = None
    ) -> None:
        self._client = client
        self._system = system_prompt
        self._rules = rules

    def _stops(self, text: str) -> bool:
        return self._rules.user_stops(text) if self._rules is not None else STOP_MARKER in text

    async def next_turn(self, messages: Sequence[Message], tools: Sequence[ToolSchema]) -> UserTurn:
        view = user_view(messages, self._system, text_or_calls=self._rules is not None)
        result = await self._client.complete(view, tool_specs(tools))
        content = result.message.get("content")
        text = content if isinstance(content, str) else ""
        calls = proposed_calls(result.message)
        return UserTurn(
            content=text, tool_calls=calls, stop=self._stops(text) and not calls, usage=result.usage
        )


@dataclass
class LLMUserFactory:
    client: ChatClient

    def for_trial(self, task: TaskDescription) -> LLMUser:
        return LLMUser(self.client, user_system_prompt(task), task.conversation)
