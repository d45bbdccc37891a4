"""OpenAI chat shapes shared by the adapters: tool schemas and messages as plain dicts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast


def function_parts(tool: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """(name, description, parameters) of an OpenAI function tool schema, nested or flat."""
    function: Mapping[str, Any] = tool.get("function", tool)
    parameters: dict[str, Any] = dict(function.get("parameters") or {"type": "object", "properties": {}})
    return str(function["name"]), str(function.get("description") or ""), parameters


def tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """One OpenAI chat tool call."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def text_of(content: Any) -> str:
    """A message's content as text: strings as they are, content parts joined, None as empty."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for part in cast(list[Any], content):
        text: Any = (
            cast(Mapping[str, Any], part).get("text")
            if isinstance(part, Mapping)
            else getattr(part, "text", None)
        )
        if isinstance(text, str):
            parts.append(text)
    return "".join(parts)
