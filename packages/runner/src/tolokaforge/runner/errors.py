"""Errors raised inside the runner, each mapped once at the gRPC edge (service.py).

RunnerError
├── RegistrationError          RegisterTrial answers success=false with the message
│   ├── VersionSkewError       engine_protocol_version below the runner's minimum
│   ├── DuplicateTrialError    the trial_id is registered already
│   └── ToolLoadError          a tool's code or schema could not be loaded
├── TrialNotFoundError         the trial is not registered (TRIAL_NOT_FOUND / "Trial '<id>' not found")
└── ToolFailure                one tool call failed; carries the ExecutionStatus and the ToolError
"""

from __future__ import annotations

from typing import Any

from tolokaforge.contracts.runner import ExecutionStatus
from tolokaforge.contracts.tool import ToolErrorCategory

__all__ = [
    "DuplicateTrialError",
    "RegistrationError",
    "RunnerError",
    "ToolFailure",
    "ToolLoadError",
    "TrialNotFoundError",
    "VersionSkewError",
]


class RunnerError(Exception):
    """Base of every error the runner raises on purpose."""


class RegistrationError(RunnerError):
    """RegisterTrial cannot register this trial; nothing of it remains."""


class VersionSkewError(RegistrationError):
    pass


class DuplicateTrialError(RegistrationError):
    pass


class ToolLoadError(RegistrationError):
    pass


class TrialNotFoundError(RunnerError):
    def __init__(self, trial_id: str) -> None:
        super().__init__(f"Trial '{trial_id}' not found")
        self.trial_id = trial_id


class ToolFailure(RunnerError):
    """A classified failure of one tool call (recorded, and answered with its status and ToolError)."""

    def __init__(
        self,
        status: ExecutionStatus,
        category: ToolErrorCategory,
        message: str,
        *,
        retryable: bool = False,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.category = category
        self.message = message
        self.retryable = retryable
        self.details = details or {}
