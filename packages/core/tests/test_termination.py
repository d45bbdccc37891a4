from __future__ import annotations

import pytest

from tolokaforge.core import (
    GRADEABLE_TERMINATION_REASONS,
    TerminationReason,
    UnknownTerminationReasonError,
    parse_termination_reason,
)

WIRE_VALUES = [
    "agent_done",
    "user_stop",
    "max_turns",
    "trial_lost",
    "tool_not_found",
    "error",
    "timeout",
    "too_many_errors",
]


def test_the_enum_is_exactly_the_documented_set() -> None:
    assert [reason.value for reason in TerminationReason] == WIRE_VALUES


@pytest.mark.parametrize("value", WIRE_VALUES)
def test_every_wire_value_parses_to_its_member(value: str) -> None:
    reason = parse_termination_reason(value)
    assert reason is TerminationReason(value)
    # A StrEnum member is its wire string, so it can be sent back unchanged.
    assert reason == value


def test_empty_means_no_reason_reported() -> None:
    assert parse_termination_reason("") is None


@pytest.mark.parametrize("value", ["done", "AGENT_DONE", " agent_done", "agent_done ", "none"])
def test_an_unknown_value_fails_naming_it_and_the_accepted_set(value: str) -> None:
    with pytest.raises(UnknownTerminationReasonError) as caught:
        parse_termination_reason(value)
    message = str(caught.value)
    assert repr(value) in message
    for accepted in WIRE_VALUES:
        assert accepted in message
    assert caught.value.value == value
    assert caught.value.accepted == tuple(WIRE_VALUES)


def test_unknown_reason_is_a_value_error() -> None:
    # GradeTrial maps every ValueError subclass to "not gradeable", never to the catch-all.
    with pytest.raises(ValueError):
        parse_termination_reason("finished")


def test_only_the_planned_ends_are_gradeable() -> None:
    assert {
        TerminationReason.AGENT_DONE,
        TerminationReason.USER_STOP,
        TerminationReason.MAX_TURNS,
        TerminationReason.TOO_MANY_ERRORS,
    } == GRADEABLE_TERMINATION_REASONS
