"""The transcript wire codec: ``GradeTrialRequest.llm_messages_json`` <-> ``list[Message]``.

The wire is a JSON array of ``{role, content}`` objects in execution order::

    {"role": "system" | "user" | "assistant" | "tool", "content": "..."}
    # a user or assistant turn that called tools also carries
    "tool_calls": [{"id": "...", "function": {"name": "...", "arguments": "<JSON-encoded object>"}}]
    # a tool result also carries
    "tool_call_id": "..."

Decoding is strict where a lenient reading could grade the wrong thing and lenient only where the
provider's own shape is unambiguous:

* ``content`` must be present and a string (``""`` is fine). ``null`` is read as ``""`` only on a user
  or assistant turn that carries tool calls, because OpenAI sends exactly that; anywhere else ``null``
  is rejected rather than guessed at.
* ``tool_calls`` absent, ``null`` or ``[]`` all mean "no calls". Entries may carry ``"type": "function"``
  (any other type is rejected). ``arguments`` must be a string holding a JSON *object*: the runner's
  record and every tool schema take keyword arguments, so ``"[1]"`` or ``"null"`` is a harness bug.
* Every tool-call id must be present, non-empty and unique within the transcript: ids are what join
  calls to results, and parallel calls to one tool with identical arguments have nothing else.
* ``tool_calls`` on a system or tool message, and ``tool_call_id`` on anything but a tool message, are
  rejected: they would describe a join the roles cannot take part in.
* Other keys (``name``, ``refusal``, …) are ignored, so a newer encoder can add fields.

Non-standard JSON constants (``NaN``, ``Infinity``) are rejected on both sides: they are not JSON, and
the encoder never emits them. Encoding then decoding is the identity on ``list[Message]``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn, cast

from ..errors import (
    DuplicateToolCallIdError,
    InvalidMessageError,
    InvalidToolCallError,
    MalformedTranscriptError,
)
from .messages import (
    ROLES,
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)

__all__ = ["decode_transcript_wire", "encode_transcript_wire", "split_leading_system_message"]


def encode_transcript_wire(messages: Iterable[Message]) -> str:
    """Encode a transcript as the ``llm_messages_json`` payload.

    Raises:
        DuplicateToolCallIdError: two calls share an id; the decoder would refuse the payload.
        ValueError: an argument value is not JSON-representable (NaN, infinity).
        TypeError: an argument value is not JSON-serialisable at all.
    """
    seen: dict[str, str] = {}
    wire: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        entry: dict[str, Any] = {"role": message.role, "content": message.content}
        if isinstance(message, ToolMessage):
            entry["tool_call_id"] = message.tool_call_id
        elif isinstance(message, UserMessage | AssistantMessage) and message.tool_calls:
            entry["tool_calls"] = [
                _encode_call(call, f"messages[{index}].tool_calls[{position}]", seen)
                for position, call in enumerate(message.tool_calls)
            ]
        wire.append(entry)
    # ensure_ascii keeps the payload pure ASCII, so lone surrogates survive a UTF-8 transport.
    return json.dumps(wire, allow_nan=False)


def _encode_call(call: ToolCall, path: str, seen: dict[str, str]) -> dict[str, Any]:
    if call.id in seen:
        raise DuplicateToolCallIdError(f"{path}.id", call.id, seen[call.id])
    seen[call.id] = path
    return {
        "id": call.id,
        "function": {"name": call.name, "arguments": json.dumps(call.arguments, allow_nan=False)},
    }


def decode_transcript_wire(payload: str) -> list[Message]:
    """Decode an ``llm_messages_json`` payload into typed messages, in order.

    Raises:
        MalformedTranscriptError: the payload is not JSON or not an array.
        InvalidMessageError: a message is not an object, lacks ``role`` / ``content``, names an unknown
            role, or carries a key its role cannot carry.
        InvalidToolCallError: a ``tool_calls`` entry lacks ``id``, ``function``, ``function.name`` or
            ``function.arguments``, or its arguments are not a string encoding a JSON object.
        DuplicateToolCallIdError: one tool-call id is declared twice.

    Every error names the offending location, e.g. ``messages[3].tool_calls[0].id``.
    """
    try:
        document: Any = json.loads(payload, parse_constant=_reject_constant)
    except (json.JSONDecodeError, _NonStandardConstant) as exc:
        raise MalformedTranscriptError("llm_messages_json", f"not valid JSON ({exc})") from None
    except RecursionError:
        # Nesting deep enough to exhaust the stack is no transcript either; keep it on the ValueError row.
        raise MalformedTranscriptError("llm_messages_json", "nested too deeply to decode") from None
    if not isinstance(document, list):
        raise MalformedTranscriptError(
            "llm_messages_json", f"expected a JSON array of messages, got {_json_type(document)}"
        )
    seen: dict[str, str] = {}
    return [
        _decode_message(item, f"messages[{index}]", seen)
        for index, item in enumerate(cast(list[Any], document))
    ]


def split_leading_system_message(messages: Sequence[Message]) -> tuple[str | None, list[Message]]:
    """Lift a leading system message out as the agent's policy.

    Returns ``(policy, rest)``: ``policy`` is the first message's content when that message is a system
    message (``""`` included: an empty policy was still sent), else None. Only the first message is
    lifted; a later system message is part of the conversation and stays in ``rest``.
    """
    if messages and isinstance(messages[0], SystemMessage):
        return messages[0].content, list(messages[1:])
    return None, list(messages)


class _NonStandardConstant(ValueError):
    pass


def _reject_constant(name: str) -> NoReturn:
    raise _NonStandardConstant(f"{name} is not a JSON value")


def _json_type(value: object) -> str:
    """Name a decoded JSON value's type as JSON calls it, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _decode_message(item: Any, path: str, seen: dict[str, str]) -> Message:
    if not isinstance(item, dict):
        raise InvalidMessageError(path, f"expected a message object, got {_json_type(item)}")
    message = cast(dict[str, Any], item)
    if "role" not in message:
        raise InvalidMessageError(path, "missing 'role'")
    role = message["role"]
    if role not in ROLES:  # also rejects a non-string role: ROLES holds only strings
        accepted = ", ".join(ROLES)
        raise InvalidMessageError(f"{path}.role", f"unknown role {role!r} (accepted: {accepted})")
    if "content" not in message:
        raise InvalidMessageError(path, "missing 'content' (it may be \"\" but must be present)")

    raw_calls = message.get("tool_calls")
    has_calls = raw_calls is not None and raw_calls != []
    if has_calls and role in ("system", "tool"):
        raise InvalidMessageError(f"{path}.tool_calls", f"a {role} message cannot call tools")
    if "tool_call_id" in message and role != "tool":
        raise InvalidMessageError(f"{path}.tool_call_id", f"only a tool message answers a call, not {role}")

    content = message["content"]
    if content is None and has_calls:
        # OpenAI sends null content on a turn that only called tools; it means "said nothing".
        content = ""
    if content is None:
        raise InvalidMessageError(
            f"{path}.content", "null is accepted only on a user or assistant turn that calls tools"
        )
    if not isinstance(content, str):
        raise InvalidMessageError(
            f"{path}.content",
            f"expected a string, got {_json_type(content)} (content blocks are not represented on the wire)",
        )

    if role == "system":
        return SystemMessage(content)
    if role == "tool":
        return ToolMessage(content, _decode_tool_call_id(message, path))
    calls = _decode_calls(raw_calls, f"{path}.tool_calls", seen) if has_calls else ()
    if role == "user":
        return UserMessage(content, calls)
    return AssistantMessage(content, calls)


def _decode_tool_call_id(message: dict[str, Any], path: str) -> str:
    call_id = message.get("tool_call_id")
    if call_id is None:
        raise InvalidMessageError(path, "a tool message must carry 'tool_call_id'")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidMessageError(f"{path}.tool_call_id", f"expected a non-empty string, got {call_id!r}")
    return call_id


def _decode_calls(raw_calls: Any, path: str, seen: dict[str, str]) -> tuple[ToolCall, ...]:
    if not isinstance(raw_calls, list):
        raise InvalidMessageError(path, f"expected an array of tool calls, got {_json_type(raw_calls)}")
    return tuple(
        _decode_call(entry, f"{path}[{index}]", seen)
        for index, entry in enumerate(cast(list[Any], raw_calls))
    )


def _decode_call(entry: Any, path: str, seen: dict[str, str]) -> ToolCall:
    if not isinstance(entry, dict):
        raise InvalidToolCallError(path, f"expected a tool-call object, got {_json_type(entry)}")
    call = cast(dict[str, Any], entry)
    if "type" in call and call["type"] != "function":
        raise InvalidToolCallError(f"{path}.type", f"expected 'function', got {call['type']!r}")

    call_id = call.get("id")
    if call_id is None:
        raise InvalidToolCallError(
            path, "missing 'id' (the trial's episode-unique tool-call id is what joins a call to its result)"
        )
    if not isinstance(call_id, str) or not call_id:
        raise InvalidToolCallError(f"{path}.id", f"expected a non-empty string, got {call_id!r}")
    if call_id in seen:
        raise DuplicateToolCallIdError(f"{path}.id", call_id, seen[call_id])
    seen[call_id] = path

    function = call.get("function")
    if function is None:
        raise InvalidToolCallError(path, "missing 'function'")
    if not isinstance(function, dict):
        raise InvalidToolCallError(f"{path}.function", f"expected an object, got {_json_type(function)}")
    function = cast(dict[str, Any], function)

    name = function.get("name")
    if name is None:
        raise InvalidToolCallError(f"{path}.function", "missing 'name'")
    if not isinstance(name, str) or not name:
        raise InvalidToolCallError(f"{path}.function.name", f"expected a non-empty string, got {name!r}")

    return ToolCall(call_id, name, _decode_arguments(function, f"{path}.function"))


def _decode_arguments(function: dict[str, Any], path: str) -> dict[str, Any]:
    if "arguments" not in function:
        raise InvalidToolCallError(path, "missing 'arguments'")
    raw = function["arguments"]
    if not isinstance(raw, str):
        raise InvalidToolCallError(
            f"{path}.arguments", f"expected a JSON-encoded string, got {_json_type(raw)}"
        )
    try:
        arguments: Any = json.loads(raw, parse_constant=_reject_constant)
    except (json.JSONDecodeError, _NonStandardConstant) as exc:
        raise InvalidToolCallError(f"{path}.arguments", f"not valid JSON ({exc}): {raw[:80]!r}") from None
    if not isinstance(arguments, dict):
        raise InvalidToolCallError(
            f"{path}.arguments", f"must encode a JSON object, got {_json_type(arguments)}"
        )
    return cast(dict[str, Any], arguments)
