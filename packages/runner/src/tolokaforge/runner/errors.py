"""Every error the runner raises on purpose, in one tree; each is mapped once, at the gRPC edge (edge/servicer.py).

RunnerError                        retryable: may the same request succeed when sent again unchanged?
├── InvalidRequestError            a harness bug (empty call_id, unknown executor or termination reason):
│                                  the RPC fails with INVALID_ARGUMENT
├── RegistrationError              RegisterTrial answers success=false, error_kind INVALID_SPEC
│   ├── VersionSkewError           ... VERSION_SKEW: engine_protocol_version below the runner's minimum
│   ├── DuplicateTrialError        ... DUPLICATE_TRIAL: the trial_id is registered already
│   ├── ToolLoadError              ... TOOL_LOAD: a tool's code, schema or server could not be loaded
│   ├── TaskNotCachedError         ... TASK_NOT_CACHED: task_digest names no task kept here (send task_json)
│   ├── PartNotCachedError         ... PART_NOT_CACHED: code_digest / tables_digest names no part kept here
│   └── StateStoreError            ... STATE_STORE: the store refused the initial state (retryable when
│                                  it could not be reached at all)
├── TrialNotFoundError             the trial is not registered (TRIAL_NOT_FOUND / "Trial '<id>' not found")
├── ToolFailure                    one tool call failed; carries the ExecutionStatus and the ToolError
└── GradingFailure                 GradeTrial answers success=false with str(error) and error_kind
    │                              (one per row of the error table, docs/grading.md)
    ├── NotGradeable               "Trial '<id>' is not gradeable: <Cause>: ..."
    ├── NotGradeableAsAuthored     "Trial '<id>' cannot be graded as authored: ..."
    │   └── EnvAssertionFailed     ... an env assertion's tool call failed or answered no JSON
    ├── HashGradingFailed          "Hash grading failed: ..." (incl. UnresolvableGoldenAction)
    └── UnaccountedKeys            "Grading config populates scored keys the runner neither ..."

Two value errors travel inside grading and are turned into a GradingFailure where they are caught:
UnresolvableGoldenAction and MissingComponentWeight.
"""

from __future__ import annotations

from typing import Any, ClassVar

from tolokaforge.contracts.runner import ExecutionStatus, GradeErrorKind, RegistrationErrorKind
from tolokaforge.contracts.tool import ToolErrorCategory

__all__ = [
    "DuplicateTrialError",
    "EnvAssertionFailed",
    "GradingFailure",
    "HashGradingFailed",
    "InvalidRequestError",
    "MissingComponentWeight",
    "NotGradeable",
    "NotGradeableAsAuthored",
    "PartNotCachedError",
    "RegistrationError",
    "RunnerError",
    "StateStoreError",
    "TaskNotCachedError",
    "ToolFailure",
    "ToolLoadError",
    "TrialNotFoundError",
    "UnaccountedKeys",
    "UnresolvableGoldenAction",
    "VersionSkewError",
    "checked_text",
]


class RunnerError(Exception):
    """Base of every error the runner raises on purpose."""

    retryable: bool = False
    """Whether the same request may succeed when sent again unchanged (never matched from text)."""


class InvalidRequestError(RunnerError):
    """The request breaks the protocol: a harness bug, answered with INVALID_ARGUMENT."""


class RegistrationError(RunnerError):
    """RegisterTrial cannot register this trial; nothing of it remains."""

    kind: ClassVar[RegistrationErrorKind] = RegistrationErrorKind.INVALID_SPEC


class VersionSkewError(RegistrationError):
    kind = RegistrationErrorKind.VERSION_SKEW


class DuplicateTrialError(RegistrationError):
    kind = RegistrationErrorKind.DUPLICATE_TRIAL


class ToolLoadError(RegistrationError):
    kind = RegistrationErrorKind.TOOL_LOAD


class TaskNotCachedError(RegistrationError):
    kind = RegistrationErrorKind.TASK_NOT_CACHED

    def __init__(self, digest: str) -> None:
        super().__init__(f"this runner keeps no task with digest {digest}; send task_json with it")
        self.digest = digest


class PartNotCachedError(RegistrationError):
    kind = RegistrationErrorKind.PART_NOT_CACHED

    def __init__(self, part: str, digest: str) -> None:
        super().__init__(f"this runner keeps no {part} with digest {digest}; send {part}_json with it")
        self.digest = digest


class StateStoreError(RegistrationError):
    kind = RegistrationErrorKind.STATE_STORE

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


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
        infrastructure: bool = False,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.category = category
        self.message = message
        self.retryable = retryable
        self.details = details or {}
        self.infrastructure = infrastructure
        """The runner's state store failed, not the tool: the call's effect may be unknown."""


def checked_text(output: str) -> str:
    """``output`` if the wire can carry it; a lone surrogate fails the call (checked before any commit)."""
    try:
        output.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ToolFailure(
            ExecutionStatus.ERROR,
            ToolErrorCategory.EXECUTION_FAILED,
            f"the tool's output is not valid Unicode text: {error.reason} at position {error.start}",
            details={"position": error.start},
        ) from error
    return output


class GradingFailure(RunnerError):
    """GradeTrial cannot produce a usable grade; the message is the response's ``error``."""

    kind: ClassVar[GradeErrorKind] = GradeErrorKind.GRADING_ERROR


class NotGradeable(GradingFailure):
    kind = GradeErrorKind.NOT_GRADEABLE

    def __init__(self, trial_id: str, cause: BaseException) -> None:
        super().__init__(f"Trial '{trial_id}' is not gradeable: {type(cause).__name__}: {cause}")


class NotGradeableAsAuthored(GradingFailure):
    kind = GradeErrorKind.NOT_GRADEABLE_AS_AUTHORED

    def __init__(self, trial_id: str, reason: str) -> None:
        super().__init__(f"Trial '{trial_id}' cannot be graded as authored: {reason}")


class EnvAssertionFailed(NotGradeableAsAuthored):
    """An env assertion could not be evaluated: its tool call did not succeed, or its output is not JSON.

    Not a verdict on the agent (τ²-bench, too, gives no reward when an assertion raises): the pack's
    assertion cannot be evaluated as written on this trial, so no grade is given.
    """


class HashGradingFailed(GradingFailure):
    kind = GradeErrorKind.HASH_GRADING_FAILED

    def __init__(self, cause: str) -> None:
        super().__init__(f"Hash grading failed: {cause}")


class UnaccountedKeys(GradingFailure):
    kind = GradeErrorKind.UNACCOUNTED_KEYS

    def __init__(self, keys: list[str]) -> None:
        super().__init__(
            "Grading config populates scored keys the runner neither evaluated nor recorded a skip for: "
            + "; ".join(keys)
        )
        self.keys = keys


class UnresolvableGoldenAction(ValueError):
    """Golden actions naming no registered tool: every bad one with its index, and the registered set."""


class MissingComponentWeight(ValueError):
    """A component was scored under "weighted" and combine.weights declares no share for it."""
