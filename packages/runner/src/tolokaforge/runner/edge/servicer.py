"""The RunnerService servicer: the gRPC adapter over the runner in this process (lifecycle/local.py).

Each handler decodes its request into the Runner interface's types, calls the :class:`LocalRunner` the
embedded host calls too, and encodes the answer; nothing here decides anything about trials, tools or
grades. What only the wire has is handled here: the engine's protocol version, tasks and parts sent
once by digest (task_wire.py), the transcript as JSON text, the answers of released trials kept for a
repeat of a lost reply (released_grades.py), replies encoded once (reply_wire.py), and every typed
error mapped to the protocol's answer (docs/protocol/runner.md): a caller's bug is INVALID_ARGUMENT, an
unreachable store UNAVAILABLE, an unregistered trial TRIAL_NOT_FOUND, anything else a typed
``success = false``.
"""

from __future__ import annotations

import json
from typing import cast

import grpclib
import grpclib.const
from cachetools import LRUCache
from grpclib.const import Status

from tolokaforge.contracts.runner import (
    Attachment,
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
    ToolSchema,
)
from tolokaforge.contracts.tool import ToolError, ToolErrorCategory
from tolokaforge.core.errors import UnknownTerminationReasonError
from tolokaforge.core.protocol import check_engine_protocol_version
from tolokaforge.core.runner_api import (
    GradeRequest,
    GradingFailedError,
    InfrastructureFailure,
    InvalidRequestError,
    RegistrationFailedError,
    RunnerUnavailableError,
    StoreConflictError,
    ToolCallRequest,
    ToolResult,
    TrialLostError,
)
from tolokaforge.core.termination import parse_termination_reason
from tolokaforge.core.transcript import Executor, decode_transcript_wire
from tolokaforge.db import DBServiceError, StoreUnreachableError

from ..errors import RegistrationError, TrialNotFoundError
from ..lifecycle.local import LocalRunner
from .guard import EdgeLimits, guard_mapping
from .released_grades import ReleasedGrades
from .reply_wire import send_unchanged
from .task_wire import TaskParts, TaskWire

__all__ = ["RunnerServicer"]

REPLIES_KEPT = 256
"""Encoded RegisterTrial replies kept, one per task whose trials all get the task's own tools."""


class RunnerServicer(RunnerServiceBase):
    def __init__(
        self,
        runner: LocalRunner,
        *,
        store_name: str,
        limits: EdgeLimits | None = None,
        token: str | None = None,
    ) -> None:
        self.runner = runner
        self.token = token
        """What every call must present (None: no check)."""
        self.store_name = store_name
        self.limits = limits or EdgeLimits()
        self.released = ReleasedGrades()
        self.tasks = TaskWire()
        self._replies: LRUCache[int, tuple[tuple[ToolSchema, ...], RegisterTrialResponse]] = LRUCache(
            REPLIES_KEPT
        )

    def __mapping__(self) -> dict[str, grpclib.const.Handler]:
        # Every handler checks the token, decodes its request under the limits and answers typed
        # errors (guard.py).
        return guard_mapping(super().__mapping__(), self.limits, self.token)

    async def register_trial(self, message: RegisterTrialRequest) -> RegisterTrialResponse:
        skew = check_engine_protocol_version(message.engine_protocol_version)
        if skew is not None:
            return _refused(skew, RegistrationErrorKind.VERSION_SKEW, retryable=False)
        if not message.trial_id:
            return _refused("trial_id is empty", RegistrationErrorKind.INVALID_SPEC, retryable=False)
        try:
            spec = self.tasks.decode(
                message.trial_spec_json,
                message.task_json,
                message.task_digest,
                TaskParts(message.code_json, message.code_digest, message.tables_json, message.tables_digest),
            )
        except RegistrationError as error:
            return _refused(str(error), error.kind, retryable=error.retryable)
        if spec.trial_id != message.trial_id:
            return _refused(
                f"trial_id {message.trial_id!r} differs from the TrialSpec's trial_id {spec.trial_id!r}",
                RegistrationErrorKind.INVALID_SPEC,
                retryable=False,
            )
        try:
            registered = await self.runner.register(
                spec, default_tool_timeout_s=message.default_tool_timeout_s, tables_from_json=True
            )
        except RegistrationFailedError as error:
            return _refused(str(error), error.kind, retryable=error.retryable)
        self.released.forget(message.trial_id)  # the id is a new trial now: its old grade is not its
        return self._reply(registered.agent_tools, registered.user_tools)

    def _reply(self, agent: tuple[ToolSchema, ...], user: tuple[ToolSchema, ...]) -> RegisterTrialResponse:
        """The reply listing these tools; the same reply object (encoded once) for the same tool tuples."""
        kept = self._replies.get(id(agent))
        if kept is not None and kept[0] is agent and kept[1].num_user_tools == len(user):
            return kept[1]
        reply = RegisterTrialResponse(
            success=True, tool_schemas=[*agent, *user], num_agent_tools=len(agent), num_user_tools=len(user)
        )
        self._replies[id(agent)] = (agent, reply)  # held, so that the id stays the tuple's
        send_unchanged(reply)
        return reply

    async def execute_tool(self, message: ExecuteToolRequest) -> ExecuteToolResponse:
        call = ToolCallRequest(
            trial_id=message.trial_id,
            call_id=message.call_id,
            tool_name=message.tool_name,
            arguments_json=message.arguments_json,
            executor=cast(Executor, message.executor),  # checked by the runner: INVALID_ARGUMENT otherwise
            timeout_s=message.timeout_seconds,
        )
        try:
            result = await self.runner.execute(call)
        except InvalidRequestError as error:
            raise grpclib.GRPCError(Status.INVALID_ARGUMENT, str(error)) from error
        except InfrastructureFailure as failure:
            result = failure.result  # answered as recorded: the wire marks it in the ToolError's details
        except TrialLostError as error:
            return ExecuteToolResponse(
                status=ExecutionStatus.TRIAL_NOT_FOUND,
                error_message=str(error),
                metrics=ToolMetrics(),
                tool_error=ToolError(
                    category=ToolErrorCategory.NOT_FOUND, message=str(error), retryable=False
                ),
            )
        return _tool_response(result)

    async def grade_trial(self, message: GradeTrialRequest) -> GradeTrialResponse:
        released = self.released.get(message.trial_id)
        try:
            termination = parse_termination_reason(message.termination_reason)
        except UnknownTerminationReasonError as error:
            # An unknown reason fails the RPC: parsing it to "none" would mislabel the trial's health.
            raise grpclib.GRPCError(Status.INVALID_ARGUMENT, str(error)) from error
        try:
            messages = (
                decode_transcript_wire(message.llm_messages_json) if message.llm_messages_json else None
            )
        except ValueError as error:
            return GradeTrialResponse(
                success=False,
                error=f"Trial '{message.trial_id}' is not gradeable: {type(error).__name__}: {error}",
                error_kind=GradeErrorKind.NOT_GRADEABLE,
            )
        request = GradeRequest(
            trial_id=message.trial_id,
            messages=messages,
            termination=termination,
            components=frozenset(message.grading_components),
            release=message.release,
        )
        try:
            result = await self.runner.grade(request)
        except TrialLostError as error:
            if released is not None:  # graded and released already: this is that request again
                return released
            return GradeTrialResponse(
                success=False, error=str(error), error_kind=GradeErrorKind.TRIAL_NOT_FOUND
            )
        except GradingFailedError as error:
            return GradeTrialResponse(success=False, error=str(error), error_kind=error.kind)
        except RunnerUnavailableError as error:  # the host retries; past its budget the trial is unfinished
            raise grpclib.GRPCError(Status.UNAVAILABLE, str(error)) from error
        answer = GradeTrialResponse(success=True, grade=result.grade, released=result.released)
        if result.released:
            self.released.keep(message.trial_id, answer)
        return answer

    async def get_state(self, message: GetStateRequest) -> GetStateResponse:
        try:
            state, hashes = await self.runner.registry.read_state(
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
            hashes = await self.runner.registry.reset(
                message.trial_id, run_init_actions=message.execute_init_actions
            )
        except StoreUnreachableError as error:
            raise _unavailable(error) from error
        except (TrialNotFoundError, DBServiceError, RegistrationError) as error:
            return ResetTrialResponse(success=False, error=_describe(error))
        return ResetTrialResponse(success=True, state_hash=hashes.stable_hash)

    async def cleanup_trial(self, message: CleanupTrialRequest) -> CleanupTrialResponse:
        self.released.forget(message.trial_id)
        try:
            await self.runner.release(message.trial_id)
        except StoreConflictError as error:
            # Something of the trial remains (another runner's live lease): not done.
            return CleanupTrialResponse(success=False, error=str(error))
        except RunnerUnavailableError as error:
            if isinstance(error.__cause__, StoreUnreachableError):
                raise grpclib.GRPCError(Status.UNAVAILABLE, str(error)) from error
            return CleanupTrialResponse(success=False, error=str(error))
        return CleanupTrialResponse(success=True)

    async def health_check(self, message: HealthCheckRequest) -> HealthCheckResponse:
        health = await self.runner.health()
        return HealthCheckResponse(
            status=health.status,
            version=health.version,
            num_active_trials=health.active_trials,
            db_service_connected=health.store_connected,
            available_adapters=list(health.adapters),
            accepts_task_digest=True,
            accepts_task_parts=True,
        )


def _refused(error: str, kind: RegistrationErrorKind, *, retryable: bool) -> RegisterTrialResponse:
    return RegisterTrialResponse(success=False, error=error, error_kind=kind, retryable=retryable)


def _tool_response(result: ToolResult) -> ExecuteToolResponse:
    metrics = ToolMetrics(
        latency_seconds=result.latency_s, exit_code=result.exit_code, state_mutations=result.state_mutations
    )
    attachments = [
        Attachment(media_type=item.media_type, data=item.data, label=item.label, for_model=item.for_model)
        for item in result.attachments
    ]
    failure = result.failure
    if failure is None:
        return ExecuteToolResponse(
            status=result.status, output=result.output, metrics=metrics, attachments=attachments
        )
    return ExecuteToolResponse(
        status=result.status,
        error_message=failure.message,
        metrics=metrics,
        reported_by_tool=result.reported_by_tool,
        attachments=attachments,
        tool_error=ToolError(
            category=failure.category,
            message=failure.message,
            retryable=failure.retryable,
            details_json=json.dumps(dict(failure.details), default=str) if failure.details else "",
        ),
    )


def _unavailable(error: StoreUnreachableError) -> grpclib.GRPCError:
    return grpclib.GRPCError(Status.UNAVAILABLE, f"state store: {error.message}")


def _describe(error: Exception) -> str:
    if isinstance(error, DBServiceError):
        return f"state store: {error.message}"
    return str(error)
