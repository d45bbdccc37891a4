"""The runner in this process behind the Runner interface (tolokaforge.core.runner_api).

Every call goes straight to the registry, the executor and the grader: a TrialSpec, a transcript and a
grade travel as the objects they are. The embedded runner is this class; the gRPC servicer
(edge/servicer.py) decodes each request and calls it too, so both ways to a runner share one code path.
"""

from __future__ import annotations

import logging
import re
from importlib.metadata import version

from tolokaforge.contracts.runner import GradeErrorKind, RegistrationErrorKind, ToolSchema
from tolokaforge.core.models import TrialSpec
from tolokaforge.core.runner_api import (
    CallFailure,
    GradeRequest,
    GradeResult,
    GradingFailedError,
    InfrastructureFailure,
    InvalidRequestError,
    RegisteredTrial,
    RegistrationFailedError,
    RunnerError,
    RunnerHealth,
    RunnerUnavailableError,
    StoreConflictError,
    ToolCallRequest,
    ToolResult,
    TrialLostError,
)
from tolokaforge.db import ConflictError, DBServiceError, StoreUnreachableError

from ..calls.executor import CallOutcome, ToolExecutor
from ..errors import GradingFailure, RegistrationError, TrialNotFoundError
from ..grading import grade_trial
from ..trials.context import TrialContext
from .registry import TrialRegistry

__all__ = ["EXECUTORS", "LocalRunner"]

log = logging.getLogger(__name__)

EXECUTORS = ("agent", "user")

_TRIAL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:#@-]{0,199}")
"""The DB contract's TrialId: the store can hold nothing under any other id."""


class LocalRunner:
    """A :class:`~tolokaforge.core.runner_api.Runner` answered in this process (module docstring).

    It does not own what it calls: the handle that started the runner (edge/server.py) stops it.
    """

    def __init__(self, registry: TrialRegistry, executor: ToolExecutor) -> None:
        self.registry = registry
        self.executor = executor

    @property
    def address(self) -> str:
        return "embedded"

    async def aclose(self) -> None:
        return None

    async def health(self, *, budget_s: float | None = None) -> RunnerHealth:
        try:
            connected = (await self.registry.client.health()).status == "healthy"
        except Exception as error:  # any failure to reach the store is "not connected", never a crash
            log.warning("state store health check failed: %s", error)
            connected = False
        tools_healthy, isolation = await self.executor.health()
        return RunnerHealth(
            status="healthy" if connected and tools_healthy else "degraded",
            version=version("tolokaforge-runner"),
            active_trials=len(self.registry),
            store_connected=connected,
            adapters=("tau_sync", "mcp", "provider", *isolation),
        )

    async def register(
        self, spec: TrialSpec, *, default_tool_timeout_s: float = 0.0, tables_from_json: bool = False
    ) -> RegisteredTrial:
        """Register ``spec``'s trial. ``default_tool_timeout_s`` > 0 overrides the spec's budget;
        ``tables_from_json``: its tables were parsed from JSON text (the store skips checking them)."""
        try:
            trial = await self.registry.register(
                spec, default_tool_timeout_s=default_tool_timeout_s, tables_from_json=tables_from_json
            )
        except RegistrationError as error:
            raise RegistrationFailedError(str(error), kind=error.kind, retryable=error.retryable) from error
        except StoreUnreachableError as error:  # after the state existed (snapshot, init actions)
            raise RegistrationFailedError(
                f"the state store is unreachable: {error.message}",
                kind=RegistrationErrorKind.STATE_STORE,
                retryable=True,
            ) from error
        agent, user = _offered(trial)
        return RegisteredTrial(trial.trial_id, agent, user)

    async def execute(self, call: ToolCallRequest) -> ToolResult:
        if not call.call_id:
            raise InvalidRequestError(
                "ExecuteToolRequest.call_id is empty: every call needs the trial's episode-unique tool-call id"
            )
        if not call.tool_name:
            raise InvalidRequestError("ExecuteToolRequest.tool_name is empty")
        if call.executor not in EXECUTORS:
            raise InvalidRequestError(
                f"ExecuteToolRequest.executor must be one of {', '.join(EXECUTORS)}, got {call.executor!r}"
            )
        trial = self._trial(call.trial_id)
        outcome = await self.executor.call(
            trial,
            call_id=call.call_id,
            tool_name=call.tool_name,
            arguments_json=call.arguments_json,
            executor=call.executor,
            timeout_seconds=call.timeout_s,
            offered_only=True,  # callers from outside never reach a hidden tool
        )
        result = _result(outcome)
        if outcome.failure is not None and outcome.failure.infrastructure:
            raise InfrastructureFailure(
                f"infrastructure failure during {call.tool_name} ({call.call_id}): {outcome.failure.message}",
                result,
            )
        return result

    async def grade(self, request: GradeRequest) -> GradeResult:
        trial = self._trial(request.trial_id)
        try:
            grade = await grade_trial(trial, request, self.executor)
        except GradingFailure as error:
            if isinstance(error.__cause__, StoreUnreachableError):
                raise _unavailable(error.__cause__) from error
            raise GradingFailedError(str(error), kind=error.kind) from error
        except StoreUnreachableError as error:  # the caller retries; past its budget the trial is unfinished
            raise _unavailable(error) from error
        except Exception as error:  # anything else escaping grading is still a typed answer, not a crash
            log.exception("grading trial %s failed", request.trial_id)
            raise GradingFailedError(
                f"Grading error: {type(error).__name__}: {error}", kind=GradeErrorKind.GRADING_ERROR
            ) from error
        released = False
        if request.release:
            try:
                await self.release(request.trial_id)
                released = True
            except RunnerError as error:  # graded all the same: the caller releases it later
                log.warning("releasing graded trial %s failed: %s", request.trial_id, error)
        return GradeResult(grade, released)

    async def release(self, trial_id: str) -> None:
        if not _TRIAL_ID.fullmatch(trial_id) and trial_id not in self.registry.trial_ids():
            return  # no state can exist under such an id
        try:
            await self.registry.cleanup(trial_id)
        except StoreUnreachableError as error:
            raise _unavailable(error) from error
        except ConflictError as error:  # held under another runner's live lease
            raise StoreConflictError(f"state store: {error.message}") from error
        except DBServiceError as error:
            raise RunnerUnavailableError(f"state store: {error.message}") from error
        except RegistrationError as error:  # being registered right now: clean it up afterwards
            raise RunnerUnavailableError(str(error)) from error

    def _trial(self, trial_id: str) -> TrialContext:
        try:
            return self.registry.get(trial_id)
        except TrialNotFoundError as error:
            raise TrialLostError(str(error)) from error


def _offered(trial: TrialContext) -> tuple[tuple[ToolSchema, ...], tuple[ToolSchema, ...]]:
    """The trial's agent and user tool schemas: built once per task when its tools are the task's."""
    shared = trial.tools.shared
    if shared is not None and shared.schemas is not None:
        return shared.schemas
    schemas = (tuple(trial.tools.agent.schemas()), tuple(trial.tools.user.schemas()))
    if shared is not None:
        shared.schemas = schemas
    return schemas


def _result(outcome: CallOutcome) -> ToolResult:
    failure = outcome.failure
    return ToolResult(
        status=outcome.status,
        output=outcome.output if failure is None else "",
        failure=None
        if failure is None
        else CallFailure(failure.category, failure.message, failure.retryable, failure.details),
        reported_by_tool=outcome.reported,
        latency_s=outcome.latency_seconds,
        exit_code=outcome.exit_code or 0,
        state_mutations=outcome.state_mutations,
        attachments=outcome.attachments,
    )


def _unavailable(error: StoreUnreachableError) -> RunnerUnavailableError:
    return RunnerUnavailableError(f"state store: {error.message}")
