"""Small helpers a checks.py imports: comparing records, reading tool calls, matching text.

Tool-call helpers accept :class:`~tolokaforge.sdk.checks_interface.ToolCall` objects or plain
``{"name", "arguments"}`` mappings, so a check can pass ``ctx.tool_calls`` or its own list.
:func:`build_check_context` is the one place the harness turns a trial's evidence into a CheckContext.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, cast

from .checks_interface import (
    CheckContext,
    EnvironmentState,
    Message,
    TaskContext,
    ToolCall,
    ToolCallStatus,
    Transcript,
)

__all__ = [
    "build_check_context",
    "check_dict_params",
    "count_by_key",
    "count_tool_calls",
    "dict_diff",
    "filter_by_key",
    "find_by_key",
    "find_tool_calls",
    "first_tool_name",
    "get_nested",
    "get_tool_argument",
    "last_tool_name",
    "normalize_whitespace",
    "text_contains_all",
    "text_contains_any",
    "text_matches_pattern",
    "tool_was_called",
    "transcript_from_wire",
]


def transcript_from_wire(
    messages: Sequence[Mapping[str, Any]], failed_call_ids: frozenset[str] = frozenset()
) -> Transcript:
    """The transcript wire (``{role, content, tool_calls?, tool_call_id?}``) as a :class:`Transcript`.

    Each call carries the text of its tool message as ``result``; ``failed_call_ids`` marks calls
    whose execution failed.
    """
    results = {
        str(m.get("tool_call_id")): str(m.get("content") or "") for m in messages if m.get("role") == "tool"
    }
    out: list[Message] = []
    for message in messages:
        calls: list[ToolCall] = []
        for raw in cast(list[dict[str, Any]], message.get("tool_calls") or []):
            function = cast(dict[str, Any], raw.get("function") or {})
            arguments = function.get("arguments") or "{}"
            call_id = str(raw.get("id", ""))
            calls.append(
                ToolCall(
                    name=str(function.get("name", "")),
                    arguments=json.loads(arguments)
                    if isinstance(arguments, str)
                    else cast(dict[str, Any], arguments),
                    result=results.get(call_id),
                    status=ToolCallStatus.ERROR if call_id in failed_call_ids else ToolCallStatus.SUCCESS,
                )
            )
        out.append(
            Message(
                role=str(message.get("role", "")), content=str(message.get("content") or ""), tool_calls=calls
            )
        )
    return Transcript(messages=out)


def build_check_context(
    *,
    initial_tables: Mapping[str, Any],
    final_tables: Mapping[str, Any],
    transcript: Transcript,
    task: TaskContext,
) -> CheckContext:
    return CheckContext(
        initial_state=EnvironmentState(data=dict(initial_tables)),
        final_state=EnvironmentState(data=dict(final_tables)),
        transcript=transcript,
        task=task,
    )


def check_dict_params(data: Mapping[str, Any], expected: Mapping[str, Any], prefix: str = "") -> list[str]:
    """One line per key of ``expected`` whose value in ``data`` differs; empty when all match."""
    lines: list[str] = []
    for key, want in expected.items():
        got = data.get(key)
        if got != want:
            lines.append(f"{prefix + '.' if prefix else ''}{key}: expected {want!r}, got {got!r}")
    return lines


def dict_diff(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    include_keys: Sequence[str] | None = None,
    exclude_keys: Sequence[str] | None = None,
) -> dict[str, tuple[Any, Any]]:
    """``{key: (before, after)}`` for every key whose value changed (absent reads as None)."""
    keys = set(before) | set(after)
    if include_keys is not None:
        keys &= set(include_keys)
    keys -= set(exclude_keys or ())
    return {
        key: (before.get(key), after.get(key)) for key in sorted(keys) if before.get(key) != after.get(key)
    }


def get_nested(data: Any, path: str, default: Any = None, separator: str = ".") -> Any:
    """The value at ``path`` through mappings (by key) and lists (by index), or ``default``."""
    current = data
    for part in path.split(separator):
        if isinstance(current, Mapping):
            current = cast(Mapping[str, Any], current).get(part)
        elif isinstance(current, list | tuple):
            sequence = cast(Sequence[Any], current)
            try:
                index = int(part)
            except ValueError:
                return default
            current = sequence[index] if 0 <= index < len(sequence) else None
        else:
            return default
        if current is None:
            return default
    return current


def _name(call: Any) -> str | None:
    if isinstance(call, ToolCall):
        return call.name
    if isinstance(call, Mapping):
        name = cast(Mapping[str, Any], call).get("name")
        return name if isinstance(name, str) else None
    name = getattr(call, "name", None)
    return name if isinstance(name, str) else None


def last_tool_name(tool_calls: Sequence[Any]) -> str | None:
    return _name(tool_calls[-1]) if tool_calls else None


def first_tool_name(tool_calls: Sequence[Any]) -> str | None:
    return _name(tool_calls[0]) if tool_calls else None


def find_tool_calls(tool_calls: Sequence[Any], tool_name: str) -> list[Any]:
    return [call for call in tool_calls if _name(call) == tool_name]


def count_tool_calls(tool_calls: Sequence[Any], tool_name: str | None = None) -> int:
    return len(tool_calls) if tool_name is None else len(find_tool_calls(tool_calls, tool_name))


def tool_was_called(tool_calls: Sequence[Any], tool_name: str) -> bool:
    return count_tool_calls(tool_calls, tool_name) > 0


def get_tool_argument(tool_call: Any, arg_name: str, default: Any = None) -> Any:
    if isinstance(tool_call, ToolCall):
        arguments: Any = tool_call.arguments
    elif isinstance(tool_call, Mapping):
        arguments = cast(Mapping[str, Any], tool_call).get("arguments", {})
    else:
        arguments = getattr(tool_call, "arguments", None)
    if isinstance(arguments, Mapping):
        return cast(Mapping[str, Any], arguments).get(arg_name, default)
    return default


def _fold(text: str, phrases: Sequence[str], case_sensitive: bool) -> tuple[str, list[str]]:
    if case_sensitive:
        return text, list(phrases)
    return text.lower(), [phrase.lower() for phrase in phrases]


def text_contains_any(text: str, phrases: Sequence[str], case_sensitive: bool = False) -> bool:
    folded, wanted = _fold(text, phrases, case_sensitive)
    return any(phrase in folded for phrase in wanted)


def text_contains_all(text: str, phrases: Sequence[str], case_sensitive: bool = False) -> bool:
    folded, wanted = _fold(text, phrases, case_sensitive)
    return all(phrase in folded for phrase in wanted)


def text_matches_pattern(text: str, pattern: str, flags: int = re.IGNORECASE) -> bool:
    return re.search(pattern, text, flags) is not None


def normalize_whitespace(text: str) -> str:
    return " ".join(text.split())


def filter_by_key(items: Sequence[Any], key: str, value: Any) -> list[dict[str, Any]]:
    return [
        cast(dict[str, Any], item)
        for item in items
        if isinstance(item, dict) and cast(dict[str, Any], item).get(key) == value
    ]


def find_by_key(items: Sequence[Any], key: str, value: Any) -> dict[str, Any] | None:
    found = filter_by_key(items, key, value)
    return found[0] if found else None


def count_by_key(items: Sequence[Any], key: str, value: Any) -> int:
    return len(filter_by_key(items, key, value))
