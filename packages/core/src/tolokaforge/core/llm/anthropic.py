"""Anthropic's Messages API in the chat-completions shapes the rest of the harness speaks.

Callers keep one message format (the chat-completions one: ``system``/``user``/``assistant``/``tool``
roles, ``tool_calls`` with JSON-string arguments); this module turns a request into a Messages API body
and its answer back into a chat-completions message, so the agent, the simulated user and the judge
need not know which provider answers.

Mapping: system messages become the top-level ``system``; an assistant's ``tool_calls`` become
``tool_use`` blocks; ``tool`` messages become ``tool_result`` blocks of a user turn (a tool message's ``images``,
images.py, become ``image`` blocks inside its ``tool_result``); consecutive turns of one role merge into
one, because the Messages API alternates user and assistant turns.
"""

from __future__ import annotations

from typing import Any, cast

import orjson

from .images import images_of

__all__ = ["ANTHROPIC_VERSION", "DEFAULT_MAX_TOKENS", "completion_parts", "messages_body"]

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
"""The Messages API requires ``max_tokens``; this is sent when the caller sets none."""


def messages_body(
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    generation: dict[str, Any],
) -> dict[str, Any]:
    """The Messages API request for a chat-completions ``messages``/``tools`` pair.

    ``generation`` holds ``temperature`` and ``max_tokens`` when set (no seed: the API has none).
    """
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "system":
            system.append(str(message.get("content") or ""))
            continue
        blocks = _blocks(message)
        if not blocks:
            continue  # the API refuses an empty turn; an empty message said nothing
        turn_role = "assistant" if role == "assistant" else "user"
        if turns and turns[-1]["role"] == turn_role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": turn_role, "content": blocks})
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": generation.get("max_tokens") or DEFAULT_MAX_TOKENS,
        "messages": turns,
    }
    if system:
        body["system"] = "\n\n".join(system)
    if tools:
        body["tools"] = [_tool(spec) for spec in tools]
    if generation.get("temperature") is not None:
        body["temperature"] = generation["temperature"]
    return body


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    role = message.get("role")
    content = message.get("content")
    if role == "tool":
        images = images_of(message)
        result: str | list[dict[str, Any]] = str(content or "")
        if images:
            result = [{"type": "text", "text": result}] if result else []
            result.extend(
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": image["media_type"], "data": image["data"]},
                }
                for image in images
            )
        return [
            {
                "type": "tool_result",
                "tool_use_id": str(message.get("tool_call_id") or ""),
                "content": result,
            }
        ]
    blocks: list[dict[str, Any]] = []
    if content:
        blocks.append({"type": "text", "text": str(content)})
    for call in cast(list[dict[str, Any]], message.get("tool_calls") or []):
        function = cast(dict[str, Any], call.get("function") or {})
        blocks.append(
            {
                "type": "tool_use",
                "id": str(call.get("id") or ""),
                "name": str(function.get("name") or ""),
                "input": _arguments(function.get("arguments")),
            }
        )
    return blocks


def _arguments(raw: Any) -> dict[str, Any]:
    # tool_use.input must be an object; a model's malformed arguments go back as an object holding them,
    # so the conversation stays valid and the model can read what it wrote.
    if isinstance(raw, dict):
        return cast(dict[str, Any], raw)
    try:
        parsed = orjson.loads(raw or "{}")
    except (orjson.JSONDecodeError, TypeError):
        return {"_unparsed_arguments": str(raw)}
    return cast(dict[str, Any], parsed) if isinstance(parsed, dict) else {"_arguments": parsed}


def _tool(spec: dict[str, Any]) -> dict[str, Any]:
    function = cast(dict[str, Any], spec.get("function") or spec)
    tool: dict[str, Any] = {
        "name": function.get("name"),
        "input_schema": function.get("parameters") or {"type": "object"},
    }
    if function.get("description"):
        tool["description"] = function["description"]
    return tool


def completion_parts(payload: Any) -> tuple[dict[str, Any], int, int]:
    """A Messages API answer as (chat-completions message, prompt tokens, completion tokens).

    Raises ValueError when ``payload`` is not a Messages API answer.
    """
    answer: dict[str, Any] = cast(dict[str, Any], payload) if isinstance(payload, dict) else {}
    if not isinstance(answer.get("content"), list):
        raise ValueError(f"answered no content list: {str(cast(object, payload))[:300]}")
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in cast(list[Any], answer["content"]):
        if not isinstance(block, dict):
            raise ValueError("answered a content block that is not an object")
        block = cast(dict[str, Any], block)
        if block.get("type") == "text":
            texts.append(str(block.get("text") or ""))
        elif block.get("type") == "tool_use":
            calls.append(
                {
                    "id": str(block.get("id") or ""),
                    "type": "function",
                    "function": {
                        "name": str(block.get("name") or ""),
                        "arguments": orjson.dumps(block.get("input") or {}).decode(),
                    },
                }
            )
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
    if calls:
        message["tool_calls"] = calls
    usage = cast(dict[str, Any], answer.get("usage") or {})
    # Cached prompt tokens are still prompt tokens: the summary counts what the model read.
    prompt = sum(
        int(usage.get(key) or 0)
        for key in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    )
    return message, prompt, int(usage.get("output_tokens") or 0)
