"""How a trial ended: the closed ``TerminationReason`` enum and its wire parser.

``GradeTrialRequest.termination_reason`` carries one of these values as a string. The parser is
deliberately strict: an unrecognised value raises rather than reading as "not reported", because a
skewed engine would otherwise look like a healthy trial. Only the reasons in
``GRADEABLE_TERMINATION_REASONS`` ever reach GradeTrial; the host answers every other trial itself.
"""

from __future__ import annotations

import enum
from typing import Final

from .errors import UnknownTerminationReasonError

__all__ = ["GRADEABLE_TERMINATION_REASONS", "TerminationReason", "parse_termination_reason"]


class TerminationReason(enum.StrEnum):
    """Why a trial's agent loop stopped. Values are the wire strings."""

    AGENT_DONE = "agent_done"
    """The agent declared the task finished."""

    USER_STOP = "user_stop"
    """The (simulated) user ended the conversation."""

    MAX_TURNS = "max_turns"
    """The turn budget ran out before either side finished."""

    TRIAL_LOST = "trial_lost"
    """The runner no longer held the trial's registration (ExecuteTool answered TRIAL_NOT_FOUND)."""

    TOOL_NOT_FOUND = "tool_not_found"
    """The agent called a tool the trial never registered, under conversation rules that say
    ``unknown_tool: fail``; the trial fails. Otherwise such a call is answered and the episode goes on."""

    ERROR = "error"
    """The harness or the LLM provider failed."""

    TIMEOUT = "timeout"
    """The trial's wall-clock budget ran out."""

    TOO_MANY_ERRORS = "too_many_errors"
    """The task's conversation rules allow so many failed tool calls, and the episode reached them."""


GRADEABLE_TERMINATION_REASONS: Final = frozenset(
    {
        TerminationReason.AGENT_DONE,
        TerminationReason.USER_STOP,
        TerminationReason.MAX_TURNS,
        TerminationReason.TOO_MANY_ERRORS,
    }
)
"""The reasons a trial can carry into GradeTrial: each is an end the harness planned for. A task may
still score some of them 0 (``GradingConfig.zero_unless_ended_by``), but that is the grade's to say."""


def parse_termination_reason(value: str) -> TerminationReason | None:
    """Parse a wire ``termination_reason``: ``""`` is None (none reported), anything else must be a member.

    Raises:
        UnknownTerminationReasonError: ``value`` is neither empty nor a member value; the message names
            the value and the accepted set. No case folding or trimming: the engine sends enum values.
    """
    if value == "":
        return None
    try:
        return TerminationReason(value)
    except ValueError:
        raise UnknownTerminationReasonError(value, (reason.value for reason in TerminationReason)) from None
