"""Typed transcript messages: what the wire codec decodes into and encodes from.

One class per role, all frozen. A transcript is a ``list[Message]`` in execution order. A turn that
called tools (assistant, or a simulated user with tools) carries its ``ToolCall`` entries; a tool
result is a ``ToolMessage`` that names the call it answers by ``tool_call_id``.

Not represented, as the protocol says: multimodal content blocks, reasoning blocks and per-message
timestamps. A screenshot-only assistant turn is ``content=""``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from ..errors import InvalidMessageError, InvalidToolCallError

__all__ = [
    "ROLES",
    "AssistantMessage",
    "Message",
    "Role",
    "SystemMessage",
    "ToolCall",
    "ToolMessage",
    "UserMessage",
]

Role = Literal["system", "user", "assistant", "tool"]

ROLES: tuple[Role, ...] = ("system", "user", "assistant", "tool")
"""Every role the wire accepts, in the order error messages list them."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call a turn asked for.

    ``id`` is the trial's episode-unique tool-call id (the host assigns ``<id>#<n>`` to the n-th repeat
    of a provider id), the only key that joins the call to its result and to the runner's record.
    ``arguments`` is the decoded JSON object; treat it as read-only.
    """

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict[str, Any])

    def __post_init__(self) -> None:
        # An empty id is no key at all: the join by id would silently fall back to nothing.
        if not self.id:
            raise InvalidToolCallError("ToolCall.id", "must be a non-empty tool-call id")
        if not self.name:
            raise InvalidToolCallError("ToolCall.name", "must be a non-empty tool name")


def _require_tuple(tool_calls: tuple[ToolCall, ...], role: str) -> None:
    # A turn's calls are a tuple so the frozen message really is immutable. A list passed by mistake
    # would also break equality (a list never equals the tuple the decoder builds), so refuse it here.
    if not isinstance(tool_calls, tuple):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise InvalidMessageError(f"{role} message.tool_calls", "must be a tuple of ToolCall")


@dataclass(frozen=True, slots=True)
class SystemMessage:
    """A system message. The leading one is the agent's policy (see ``split_leading_system_message``)."""

    content: str
    role: ClassVar[Literal["system"]] = "system"


@dataclass(frozen=True, slots=True)
class UserMessage:
    """A user turn; a simulated user with tools may call them, like the assistant."""

    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    role: ClassVar[Literal["user"]] = "user"

    def __post_init__(self) -> None:
        _require_tuple(self.tool_calls, "user")


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """An assistant turn; ``content`` is ``""`` for a turn that only called tools."""

    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    role: ClassVar[Literal["assistant"]] = "assistant"

    def __post_init__(self) -> None:
        _require_tuple(self.tool_calls, "assistant")


@dataclass(frozen=True, slots=True)
class ToolMessage:
    """A tool result: the output the requestor saw for the call ``tool_call_id``."""

    content: str
    tool_call_id: str
    role: ClassVar[Literal["tool"]] = "tool"

    def __post_init__(self) -> None:
        if not self.tool_call_id:
            raise InvalidMessageError("ToolMessage.tool_call_id", "must be a non-empty tool-call id")


Message = SystemMessage | UserMessage | AssistantMessage | ToolMessage
"""Any transcript message."""
