"""Transcript messages <-> the chat-completions message format, for the agent and the simulated user.

The agent sees the transcript as is. The simulated user sees it mirrored: the agent's words arrive
as ``user`` messages and its own as ``assistant``; the agent's tool traffic is not the user's to see,
only the user's own tool calls and their results are.

``text_or_calls`` (a task with conversation rules) reads the transcript as τ²-bench routes it: a message
that called tools went to the tools, not to the other party, so the other party never sees it, text
included -- the user does not see an assistant turn that called tools (τ²'s ``UserState.flip_roles``
gets only the agent's text messages), the agent does not see a user turn that called tools (τ²'s
``is_valid_agent_history_message``). Each side still sees its own such turns and their results.

The agent is shown the images a call produced for it (``for_model`` attachments: a vision model's
screenshot) with the call's text, under the tool message's ``images``; core's chat client places them
as the provider accepts them (``tolokaforge.core.llm.images``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any, cast

from tolokaforge.contracts.runner import ToolSchema
from tolokaforge.core.transcript import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)

from ..turns import AttachedToolMessage, ProposedCall

__all__ = ["agent_view", "proposed_calls", "tool_specs", "user_view"]


def tool_specs(tools: Sequence[ToolSchema]) -> list[dict[str, Any]]:
    """RegisterTrial's schemas as the ``tools`` parameter of a completion request."""
    specs: list[dict[str, Any]] = []
    for tool in tools:
        parameters = json.loads(tool.parameters_json) if tool.parameters_json else {"type": "object"}
        specs.append(
            {
                "type": "function",
                "function": {"name": tool.name, "description": tool.description, "parameters": parameters},
            }
        )
    return specs


def _calls(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    return [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
        }
        for call in calls
    ]


def agent_view(messages: Sequence[Message], *, text_or_calls: bool = False) -> list[dict[str, Any]]:
    view: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            view.append({"role": "system", "content": message.content})
        elif isinstance(message, UserMessage):
            if not (text_or_calls and message.tool_calls):
                view.append({"role": "user", "content": message.content})
        elif isinstance(message, AssistantMessage):
            entry: dict[str, Any] = {"role": "assistant", "content": message.content or None}
            if message.tool_calls:
                entry["tool_calls"] = _calls(message.tool_calls)
            view.append(entry)
        else:
            entry = {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
            if isinstance(message, AttachedToolMessage):
                images = [
                    {"media_type": item.media_type, "data": base64.b64encode(item.data).decode("ascii")}
                    for item in message.attachments
                    if item.for_model
                ]
                if images:
                    entry["images"] = images
            view.append(entry)
    # A user turn's tool results are not the agent's: drop results answering no call the agent made.
    agent_ids = {call["id"] for entry in view for call in entry.get("tool_calls", [])}
    return [entry for entry in view if entry["role"] != "tool" or entry["tool_call_id"] in agent_ids]


def user_view(
    messages: Sequence[Message], system_prompt: str, *, text_or_calls: bool = False
) -> list[dict[str, Any]]:
    view: list[dict[str, Any]] = [{"role": "system", "content": system_prompt}]
    user_ids: set[str] = set()
    for message in messages:
        if isinstance(message, AssistantMessage):
            if message.content and not (text_or_calls and message.tool_calls):
                view.append({"role": "user", "content": message.content})
        elif isinstance(message, UserMessage):
            entry: dict[str, Any] = {"role": "assistant", "content": message.content or None}
            if message.tool_calls:
                entry["tool_calls"] = _calls(message.tool_calls)
                user_ids.update(call.id for call in message.tool_calls)
            view.append(entry)
        elif isinstance(message, ToolMessage) and message.tool_call_id in user_ids:
            view.append({"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content})
    return view


def proposed_calls(message: dict[str, Any]) -> tuple[ProposedCall, ...]:
    """The completion's tool calls, arguments kept exactly as the model wrote them."""
    calls: list[ProposedCall] = []
    for raw in cast(list[dict[str, Any]], message.get("tool_calls") or []):
        function = cast(dict[str, Any], raw.get("function") or {})
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments if arguments is not None else {})
        calls.append(
            ProposedCall(
                id=str(raw.get("id") or ""), name=str(function.get("name") or ""), arguments_json=arguments
            )
        )
    return tuple(calls)
