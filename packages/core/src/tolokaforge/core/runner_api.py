"""The Runner as its callers see it: register a trial, execute its tool calls, grade it, release it.

One interface, two implementations, chosen once when a run starts:

* the embedded runner (``tolokaforge.runner.LocalRunner``), called directly in this process: the
  TrialSpec, the transcript and the grade travel as the objects they are;
* the gRPC client adapter (``tolokaforge.host.runner.GrpcRunner``), which owns every wire concern:
  encoding, task digests, what was sent once, transport retries, credentials.

The runner's gRPC servicer is the mirror adapter: it decodes a request, calls the same embedded runner,
and encodes its answer. The host's conductor, episode loop, Ray workers and the pytest plugin hold a
:class:`Runner` and never learn which one it is (httpx's transports are the model).

Every outcome is a type: a tool call answers a :class:`ToolResult` (its failure typed by the tool
error taxonomy), a grade a :class:`GradeResult`, and what cannot be answered raises one of the
:class:`RunnerError` subclasses below, never a message to match.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tolokaforge.contracts.runner import (
    ExecutionStatus,
    Grade,
    GradeErrorKind,
    GradeReasonVerdict,
    RegistrationErrorKind,
    ToolSchema,
)
from tolokaforge.contracts.tool import ToolErrorCategory

from .models import TrialSpec
from .termination import TerminationReason
from .transcript import Executor, Message

__all__ = [
    "Attachment",
    "CallFailure",
    "GradeRequest",
    "GradeResult",
    "GradingFailedError",
    "InfrastructureFailure",
    "InvalidRequestError",
    "RegisteredTrial",
    "RegistrationFailedError",
    "Runner",
    "RunnerError",
    "RunnerHealth",
    "RunnerUnavailableError",
    "StoreConflictError",
    "ToolCallRequest",
    "ToolResult",
    "TrialLostError",
    "judge_error",
    "reason_messages",
]


@dataclass(frozen=True, slots=True)
class RegisteredTrial:
    """A registered trial and the tools it offers, split by who may call them."""

    trial_id: str
    agent_tools: tuple[ToolSchema, ...]
    user_tools: tuple[ToolSchema, ...]


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    """One tool call of a trial, as the agent (or the simulated user) made it."""

    trial_id: str
    call_id: str
    """The trial's episode-unique tool-call id."""
    tool_name: str
    arguments_json: str
    """The arguments exactly as the model produced them (the runner answers INVALID_ARGUMENTS)."""
    executor: Executor
    timeout_s: float = 0.0
    """0: the tool's declared budget, else the trial's default."""


@dataclass(frozen=True, slots=True)
class CallFailure:
    """Why a call did not succeed, in the tool error taxonomy (docs/protocol/tool-providers.md)."""

    category: ToolErrorCategory
    message: str
    retryable: bool = False
    details: Mapping[str, Any] = field(default_factory=lambda: {})


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file a call produced beside its text (a browser call's screenshot)."""

    media_type: str
    data: bytes
    label: str = ""
    for_model: bool = False
    """The model is shown it too (a vision model's screenshot); otherwise it is for the people reading."""


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool call came to: a status, the tool's output or its typed failure, and metrics."""

    status: ExecutionStatus
    output: str = ""
    failure: CallFailure | None = None
    reported_by_tool: bool = False
    """An ERROR the tool itself answered: its changes stand."""
    latency_s: float = 0.0
    exit_code: int = 0
    """The process's exit status for a process-backed tool; 0 otherwise."""
    state_mutations: int = 0
    attachments: tuple[Attachment, ...] = ()


@dataclass(frozen=True, slots=True)
class GradeRequest:
    """Grade a trial from its transcript and how its episode ended."""

    trial_id: str
    messages: Sequence[Message] | None
    """The transcript, its leading system message included; None when the caller has none to send."""
    termination: TerminationReason | None
    components: frozenset[str] = frozenset()
    """The components to evaluate; empty: all of them."""
    release: bool = False
    """Forget the trial once graded (then :attr:`GradeResult.released` says it was)."""


@dataclass(frozen=True, slots=True)
class GradeResult:
    grade: Grade
    released: bool = False
    """The runner forgot the trial with this grade; otherwise the caller still releases it."""


@dataclass(frozen=True, slots=True)
class RunnerHealth:
    status: str
    """``healthy`` or ``degraded``."""
    version: str
    active_trials: int
    store_connected: bool
    adapters: tuple[str, ...] = ()


class RunnerError(Exception):
    """A runner could not do what was asked; ``str()`` is fit to print as one line."""

    retryable: bool = False
    """Whether the same request may succeed when sent again unchanged."""


class RunnerUnavailableError(RunnerError):
    """The runner (or its state store) could not be reached within the caller's budget."""

    retryable = True


class RegistrationFailedError(RunnerError):
    """The runner refused to register the trial; ``kind`` says why (never its message)."""

    def __init__(self, message: str, *, kind: RegistrationErrorKind, retryable: bool) -> None:
        super().__init__(message)
        self.kind = kind
        self.retryable = retryable


class TrialLostError(RunnerError):
    """The runner does not hold the trial (any more): the attempt ends as ``trial_lost``."""


class InfrastructureFailure(TrialLostError):
    """A tool call's effect is unknown because the runner's state store failed, not the tool.

    The attempt cannot be trusted, so it ends like a lost trial and is run again. ``result`` is what the
    runner recorded for the call.
    """

    def __init__(self, message: str, result: ToolResult) -> None:
        super().__init__(message)
        self.result = result


class GradingFailedError(RunnerError):
    """No grade can be given; ``kind`` is the grading error table's row."""

    def __init__(self, message: str, *, kind: GradeErrorKind) -> None:
        super().__init__(message)
        self.kind = kind


class StoreConflictError(RunnerError):
    """The state store holds the trial for another runner (its live lease): it is not this one's to touch."""

    retryable = True


class InvalidRequestError(RunnerError):
    """The request breaks the protocol (an empty call id, an unknown executor): a caller's bug."""


class Runner(Protocol):
    """Register, execute, grade, release: one trial's lifecycle on a runner (module docstring)."""

    @property
    def address(self) -> str:
        """Where the runner is, for messages: ``host:port``, or ``embedded``."""
        ...

    async def health(self, *, budget_s: float | None = None) -> RunnerHealth:
        """How the runner is; a remote one is retried across transport failures for ``budget_s`` (None:
        the adapter's own budget), then :class:`RunnerUnavailableError`."""
        ...

    async def register(self, spec: TrialSpec) -> RegisteredTrial:
        """Register ``spec``'s trial; :class:`RegistrationFailedError` when refused."""
        ...

    async def execute(self, call: ToolCallRequest) -> ToolResult:
        """Run one call; :class:`TrialLostError` when the runner no longer holds the trial."""
        ...

    async def grade(self, request: GradeRequest) -> GradeResult:
        """The trial's grade; :class:`GradingFailedError` or :class:`TrialLostError` when none."""
        ...

    async def release(self, trial_id: str) -> None:
        """Forget the trial and everything of it; idempotent."""
        ...

    async def aclose(self) -> None: ...


def judge_error(grade: Grade) -> str | None:
    """Why the grade's LLM judge errored (its reason's message), or None when it did not."""
    for reason in grade.reason_items:
        if reason.kind == "llm_judge" and reason.verdict == GradeReasonVerdict.ERRORED:
            return reason.message
    return None


def reason_messages(grade: Grade) -> list[str]:
    """The grade's reasons, one sentence each: from its typed reasons, or, from a runner that sends
    only the joined text, that text split where the runner joined it."""
    if grade.reason_items:
        return [reason.message for reason in grade.reason_items]
    return [part for part in grade.reasons.split(" | ") if part]
