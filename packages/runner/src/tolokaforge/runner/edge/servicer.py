"""The RunnerService servicer: decodes requests, delegates, and maps errors to the protocol's answers.

Nothing here decides anything about trials or tools; see registry.py, executor.py and grading/.
Protocol rules enforced at this edge (docs/protocol/runner.md#executetool): an empty call_id or tool name, or an
unknown executor, is a harness bug and fails the RPC with INVALID_ARGUMENT; an unregistered trial is
TRIAL_NOT_FOUND (never recorded); every other failure is a recorded status with a ToolError. What the
host may call is what RegisterTrial offered it: a hidden tool is neither listed nor found here.
"""

from __future__ import annotations

import json
import logging
import re

import grpclib
import grpclib.const
from grpclib.const import Status

from tolokaforge.contracts.runner import (
    CleanupTrialRequest,
    CleanupTrialResponse,
    ExecuteToolRequest,
    ExecuteToolResponse,
    ExecutionStatus,
    GetStateRequest,
    GetStateResponse,
    GradeErrorKind,
    GradeTrialRequest,
    GradeTrialResponse,
    HealthCheckRequest,
    HealthCheckResponse,
    RegisterTrialRequest,
    RegisterTrialResponse,
    RegistrationErrorKind,
    ResetTrialRequest,
    ResetTrialResponse,
    RunnerServiceBase,
    ToolMetrics,
)
from tolokaforge.contracts.tool import ToolError, ToolErrorCategory
from tolokaforge.db import DBServiceError, StoreUnreachableError

from .. import __version__
from ..calls.executor import ToolExecutor
from ..errors import GradingFailure, InvalidRequestError, RegistrationError, TrialNotFoundError
from ..grading import grade_trial
from ..lifecycle.registry import TrialRegistry
from ..lifecycle.released_grades import ReleasedGrades
from ..trials.task_cache import TaskParts
from .guard import EdgeLimits, guard_mapping
from .reply_wire import send_unchanged

__all__ = ["RunnerServicer"]

log = logging.getLogger(__name__)

EXECUTORS = ("agent", "user")


class RunnerServicer(RunnerServiceBase):
    def __init__(
        self,
        registry: TrialRegistry,
        executor: ToolExecutor,
        *,
        store_name: str,
        limits: EdgeLimits | None = None,
        token: str | None = None,
    ) -> None:
        self.registry = registry
        self.token = token
        """What every call over gRPC must present (None: no check; the in-process stub needs none)."""
        self.executor = executor
        self.store_name = store_name
        self.limits = limits or EdgeLimits()
        self.released = ReleasedGrades()

    def __mapping__(self) -> dict[str, grpclib.const.Handler]:
        # Every handler checks the token, decodes its request under the limits and answers typed
        # errors (grpc_edge.py).
        return guard_mapping(super().__mapping__(), self.limits, self.token)

    async def register_trial(self, message: RegisterTrialRequest) -> RegisterTrialResponse:
        try:
            trial = await self.registry.register(
                message.trial_id,
                message.trial_spec_json,
                engine_protocol_version=message.engine_protocol_version,
                default_tool_timeout_s=message.default_tool_timeout_s,
                task_json=message.task_json,
                task_digest=message.task_digest,
                parts=TaskParts(
                    code_json=message.code_json,
                    code_digest=message.code_digest,
                    tables_json=message.tables_json,
                    tables_digest=message.tables_digest,
                ),
            )
        except RegistrationError as error:
            return RegisterTrialResponse(
                success=False, error=str(error), error_kind=error.kind, retryable=error.retryable
            )
        except StoreUnreachableError as error:  # after the state existed (snapshot, init actions)
            return RegisterTrialResponse(
                success=False,
                error=f"the state store is unreachable: {error.message}",
                error_kind=RegistrationErrorKind.STATE_STORE,
                retryable=True,
            )
        self.released.forget(message.trial_id)  # the id is a new trial now: its old grade is not its
        shared = trial.shared_reply
        if shared is not None and shared.message is not None:
            return shared.message
        agent, user = trial.agent_tools.schemas(), trial.user_tools.schemas()
        reply = RegisterTrialResponse(
            success=True, tool_schemas=agent + user, num_agent_tools=len(agent), num_user_tools=len(user)
        )
        if shared is not None:
            shared.message = reply
            send_unchanged(reply)
        return reply

    async def execute_tool(self, message: ExecuteToolRequest) -> ExecuteToolResponse:
        if not message.call_id:
            raise grpclib.GRPCError(
                Status.INVALID_ARGUMENT,
                "ExecuteToolRequest.call_id is empty: every call needs the trial's episode-unique tool-call id",
            )
        if not message.tool_name:
            raise grpclib.GRPCError(Status.INVALID_ARGUMENT, "ExecuteToolRequest.tool_name is empty")
        if message.executor not in EXECUTORS:
            raise grpclib.GRPCError(
                Status.INVALID_ARGUMENT,
                f"ExecuteToolRequest.executor must be one of {', '.join(EXECUTORS)}, got {message.executor!r}",
            )
        try:
            trial = self.registry.get(message.trial_id)
        except TrialNotFoundError as error:
            return ExecuteToolResponse(
                status=ExecutionStatus.TRIAL_NOT_FOUND,
                error_message=str(error),
                metrics=ToolMetrics(),
                tool_error=ToolError(
                    category=ToolErrorCategory.NOT_FOUND, message=str(error), retryable=False
                ),
            )
        outcome = await self.executor.call(
            trial,
            call_id=message.call_id,
            tool_name=message.tool_name,
            arguments_json=message.arguments_json,
            executor=message.executor,
            timeout_seconds=message.timeout_seconds,
            offered_only=True,  # the host's callers never reach a hidden tool
        )
        metrics = ToolMetrics(
            latency_seconds=outcome.latency_seconds,
            exit_code=outcome.exit_code or 0,  # proto3 int32: 0 also when no process ran
            state_mutations=outcome.state_mutations,
        )
        failure = outcome.failure
        if failure is None:
            return ExecuteToolResponse(status=outcome.status, output=outcome.output, metrics=metrics)
        return ExecuteToolResponse(
            status=outcome.status,
            error_message=failure.message,
            metrics=metrics,
            reported_by_tool=outcome.reported,
            tool_error=ToolError(
                category=failure.category,
                message=failure.message,
                retryable=failure.retryable,
                details_json=json.dumps(failure.details, default=str) if failure.details else "",
            ),
        )

    async def grade_trial(self, message: GradeTrialRequest) -> GradeTrialResponse:
        answer = await self._grade(message)
        if answer.released:  # the request again, answered from what its release kept: nothing to do
            return answer
        if message.release and answer.error_kind != GradeErrorKind.TRIAL_NOT_FOUND:
            answer.released = await self._release(message.trial_id)
            if answer.released:
                self.released.keep(message.trial_id, answer)
        return answer

    async def _release(self, trial_id: str) -> bool:
        """Forget a graded trial as CleanupTrial would; False (the caller cleans up) if that failed."""
        try:
            await self.registry.cleanup(trial_id)
        except (StoreUnreachableError, DBServiceError, RegistrationError) as error:
            log.warning("releasing graded trial %s failed: %s", trial_id, _describe(error))
            return False
        return True

    async def _grade(self, message: GradeTrialRequest) -> GradeTrialResponse:
        try:
            trial = self.registry.get(message.trial_id)
            grade = await grade_trial(trial, message, self.executor)
        except InvalidRequestError as error:
            raise grpclib.GRPCError(Status.INVALID_ARGUMENT, str(error)) from error
        except TrialNotFoundError as error:
            released = self.released.get(message.trial_id)
            if released is not None:  # graded and released already: this is that request again
                return released
            return GradeTrialResponse(
                success=False, error=str(error), error_kind=GradeErrorKind.TRIAL_NOT_FOUND
            )
        except GradingFailure as error:
            if isinstance(error.__cause__, StoreUnreachableError):
                raise _unavailable(error.__cause__) from error
            return GradeTrialResponse(success=False, error=str(error), error_kind=error.kind)
        except StoreUnreachableError as error:  # the host retries; past its budget the trial is unfinished
            raise _unavailable(error) from error
        except Exception as error:  # anything else escaping the grading path is still an answer, not a crash
            log.exception("grading trial %s failed", message.trial_id)
            return GradeTrialResponse(
                success=False,
                error=f"Grading error: {type(error).__name__}: {error}",
                error_kind=GradeErrorKind.GRADING_ERROR,
            )
        return GradeTrialResponse(success=True, grade=grade)

    async def get_state(self, message: GetStateRequest) -> GetStateResponse:
        try:
            state, hashes = await self.registry.read_state(
                message.trial_id, tables=list(message.tables) or None, stable=not message.include_unstable
            )
        except StoreUnreachableError as error:
            raise _unavailable(error) from error
        except (TrialNotFoundError, DBServiceError) as error:
            return GetStateResponse(success=False, error=_describe(error))
        return GetStateResponse(
            success=True,
            state_json=json.dumps(state.tables, sort_keys=True, default=str),
            stable_hash=hashes.stable_hash,
            full_hash=hashes.full_hash,
        )

    async def reset_trial(self, message: ResetTrialRequest) -> ResetTrialResponse:
        try:
            hashes = await self.registry.reset(
                message.trial_id, run_init_actions=message.execute_init_actions
            )
        except StoreUnreachableError as error:
            raise _unavailable(error) from error
        except (TrialNotFoundError, DBServiceError, RegistrationError) as error:
            return ResetTrialResponse(success=False, error=_describe(error))
        return ResetTrialResponse(success=True, state_hash=hashes.stable_hash)

    async def cleanup_trial(self, message: CleanupTrialRequest) -> CleanupTrialResponse:
        self.released.forget(message.trial_id)
        if not _TRIAL_ID.fullmatch(message.trial_id) and message.trial_id not in self.registry.trial_ids():
            return CleanupTrialResponse(success=True)  # no state can exist under such an id
        try:
            await self.registry.cleanup(message.trial_id)
        except StoreUnreachableError as error:
            raise _unavailable(error) from error
        except (DBServiceError, RegistrationError) as error:
            # Something of the trial remains (another runner's live lease, a store refusal): not done.
            return CleanupTrialResponse(success=False, error=_describe(error))
        return CleanupTrialResponse(success=True)

    async def health_check(self, message: HealthCheckRequest) -> HealthCheckResponse:
        client = self.registry.client
        try:
            health = await client.health()
            connected = health.status == "healthy"
        except Exception as error:  # any failure to reach the store is "not connected", never a crash
            log.warning("state store health check failed: %s", error)
            connected = False
        tools_healthy, isolation = await self.executor.health()
        return HealthCheckResponse(
            status="healthy" if connected and tools_healthy else "degraded",
            version=__version__,
            num_active_trials=len(self.registry),
            db_service_connected=connected,
            available_adapters=["tau_sync", "mcp", "provider", *isolation],
            accepts_task_digest=True,
            accepts_task_parts=True,
        )


_TRIAL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:#@-]{0,199}")
"""The DB contract's TrialId: the store can hold nothing under any other id."""


def _unavailable(error: StoreUnreachableError) -> grpclib.GRPCError:
    return grpclib.GRPCError(Status.UNAVAILABLE, f"state store: {error.message}")


def _describe(error: Exception) -> str:
    if isinstance(error, DBServiceError):
        return f"state store: {error.message}"
    return str(error)
