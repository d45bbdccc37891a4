from __future__ import annotations

from typing import Any, cast

import pytest

from tolokaforge.core import (
    ROLES,
    AssistantMessage,
    InvalidMessageError,
    InvalidToolCallError,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)


def test_each_class_names_its_role() -> None:
    assert [cls.role for cls in (SystemMessage, UserMessage, AssistantMessage, ToolMessage)] == list(ROLES)


def test_messages_are_frozen() -> None:
    message = AssistantMessage("hi")
    with pytest.raises(AttributeError):
        message.content = "changed"  # type: ignore[misc]


def test_equal_messages_compare_equal_and_roles_do_not_mix() -> None:
    assert UserMessage("x") == UserMessage("x")
    assert cast(object, UserMessage("x")) != AssistantMessage("x")


@pytest.mark.parametrize(
    ("call_id", "name", "field"), [("", "get_user", "ToolCall.id"), ("c1", "", "ToolCall.name")]
)
def test_a_tool_call_needs_an_id_and_a_name(call_id: str, name: str, field: str) -> None:
    with pytest.raises(InvalidToolCallError, match=field):
        ToolCall(call_id, name)


def test_a_tool_result_needs_the_call_it_answers() -> None:
    with pytest.raises(InvalidMessageError, match=r"ToolMessage\.tool_call_id"):
        ToolMessage("output", "")


@pytest.mark.parametrize("cls", [UserMessage, AssistantMessage])
def test_tool_calls_must_be_a_tuple(cls: type[UserMessage] | type[AssistantMessage]) -> None:
    calls: Any = [ToolCall("c1", "get_user")]
    with pytest.raises(InvalidMessageError, match="tuple"):
        cls("", calls)


def test_arguments_default_to_an_empty_object() -> None:
    assert ToolCall("c1", "list_all").arguments == {}
