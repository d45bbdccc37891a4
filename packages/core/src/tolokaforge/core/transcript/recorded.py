"""``RecordedToolCall``: the runner's own record of one ExecuteTool call.

The runner appends one per ExecuteTool call it answered (every status but TRIAL_NOT_FOUND, which
reached no tool), keyed by the request's ``call_id`` and stamped with a trial-wide 0-based
``sequence``. It never crosses the wire: GradeTrial joins it with the decoded transcript into the
trial's timeline (``build_trial_timeline``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

from ..errors import InvalidRecordedToolCallError

__all__ = ["RECORDED_CALL_STATUSES", "Executor", "RecordedCallStatus", "RecordedToolCall"]

Executor = Literal["agent", "user"]
"""Which registry ran the call: the assistant's tools ("agent") or the simulated user's ("user")."""

RecordedCallStatus = Literal["success", "error", "timeout", "tool_not_found", "invalid_arguments"]
"""``ExecutionStatus`` in lower case, for the statuses that are recorded (TRIAL_NOT_FOUND never is)."""

RECORDED_CALL_STATUSES: Final[tuple[RecordedCallStatus, ...]] = get_args(RecordedCallStatus)

_EXECUTORS: Final[tuple[Executor, ...]] = get_args(Executor)


@dataclass(frozen=True, slots=True)
class RecordedToolCall:
    """One ExecuteTool call as the runner answered it.

    Attributes:
        call_id: The trial's episode-unique tool-call id from ``ExecuteToolRequest.call_id``.
        sequence: Trial-wide 0-based order in which the runner received the call.
        tool_name: The tool the request named.
        arguments: The decoded arguments; ``{}`` for INVALID_ARGUMENTS, as the protocol records it.
        executor: Which registry the call was routed to.
        status: The outcome, as ``ExecutionStatus`` in lower case.
        output: The tool's output, untruncated (the LLM may have seen less).
        latency_seconds: Execution wall time.
        timestamp: When the call started, seconds since the epoch.
        error_message: ``ExecuteToolResponse.error_message``; ``""`` on success.
        error_category: A classifier of the failure when the runner has one, else None.
        attempts: How many times the runner ran the call (>1 when the kernel retried it unseen).
    """

    call_id: str
    sequence: int
    tool_name: str
    arguments: dict[str, Any]
    executor: Executor
    status: RecordedCallStatus
    output: str
    latency_seconds: float
    timestamp: float
    error_message: str = ""
    error_category: str | None = None
    attempts: int = 1

    def __post_init__(self) -> None:
        # Checked at run time too: the runner builds these from request strings, and a record that no
        # ExecuteTool call could have produced must not reach grading looking valid.
        if not self.call_id:
            raise InvalidRecordedToolCallError("call_id", "must be non-empty (ExecuteTool refuses one)")
        if self.sequence < 0:
            raise InvalidRecordedToolCallError("sequence", f"must be 0 or more, got {self.sequence}")
        if not self.tool_name:
            raise InvalidRecordedToolCallError("tool_name", "must be non-empty")
        if self.executor not in _EXECUTORS:
            raise InvalidRecordedToolCallError(
                "executor", f"expected one of {', '.join(_EXECUTORS)}, got {self.executor!r}"
            )
        if self.status not in RECORDED_CALL_STATUSES:
            raise InvalidRecordedToolCallError(
                "status", f"expected one of {', '.join(RECORDED_CALL_STATUSES)}, got {self.status!r}"
            )
        if self.attempts < 1:
            raise InvalidRecordedToolCallError("attempts", f"must be 1 or more, got {self.attempts}")
        if not (math.isfinite(self.latency_seconds) and self.latency_seconds >= 0):
            raise InvalidRecordedToolCallError(
                "latency_seconds", f"must be a finite number of seconds >= 0, got {self.latency_seconds}"
            )
