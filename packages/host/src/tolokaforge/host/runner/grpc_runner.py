"""The Runner interface over gRPC: every wire concern of talking to a runner in another process.

Encoding (each task serialised once and sent once per runner by digest, task_wire.py and
sent_once.py; RegisterTrial replies decoded once, reply_codec.py), credentials, and the protocol's
recovery rules:

* ``TRIAL_NOT_FOUND`` from ExecuteTool raises :class:`TrialLostError` (the attempt ends ``trial_lost``).
* A transport failure during ExecuteTool does the same: whether the call ran is unknown, so the attempt
  is abandoned and re-run from a fresh registration rather than guessed at. So does a ToolError the
  runner marks as an infrastructure failure (its state store failed, not the tool):
  :class:`InfrastructureFailure`.
* Only UNAVAILABLE and CANCELLED count as transient; UNKNOWN and every other status are final.
* RegisterTrial, GradeTrial and CleanupTrial are retried across transport failures with exponential
  backoff (a runner restarting on the same address comes back), up to ``transport_budget_s``; past
  that, :class:`RunnerUnavailableError`.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar, cast

import grpclib.exceptions
from grpclib.client import Channel
from grpclib.const import Status

from tolokaforge.contracts.runner import (
    CleanupTrialRequest,
    CleanupTrialResponse,
    ExecuteToolRequest,
    ExecuteToolResponse,
    ExecutionStatus,
    GradeErrorKind,
    GradeTrialRequest,
    GradeTrialResponse,
    HealthCheckRequest,
    HealthCheckResponse,
    RegisterTrialRequest,
    RegisterTrialResponse,
    RegistrationErrorKind,
    RunnerServiceStub,
)
from tolokaforge.contracts.tool import ToolErrorCategory
from tolokaforge.core.credentials import authorize_channel
from tolokaforge.core.models import TrialSpec
from tolokaforge.core.retry import Backoff, RetryPolicy, retry_async
from tolokaforge.core.runner_api import (
    Attachment,
    CallFailure,
    GradeRequest,
    GradeResult,
    GradingFailedError,
    InfrastructureFailure,
    InvalidRequestError,
    RegisteredTrial,
    RegistrationFailedError,
    RunnerHealth,
    RunnerUnavailableError,
    StoreConflictError,
    ToolCallRequest,
    ToolResult,
    TrialLostError,
)
from tolokaforge.core.transcript import encode_transcript_wire

from ..errors import ConfigError
from .reply_codec import DecodeOnceCodec
from .sent_once import SentOnce
from .task_wire import TaskWire, TaskWires, register_request

__all__ = ["GrpcRunner", "RunnerStub", "parse_address"]

_T = TypeVar("_T")
# Only what the runner says may succeed unchanged: UNAVAILABLE (it or its store is down), CANCELLED (the
# connection dropped mid-call). UNKNOWN / INTERNAL / INVALID_ARGUMENT are deterministic: never retried.
_TRANSIENT_STATUSES = (Status.UNAVAILABLE, Status.CANCELLED)
_BACKOFF = Backoff(initial_s=0.05, max_s=2.0)


def parse_address(address: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` too) -> (host, port)."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConfigError(f"runner address {address!r} must be HOST:PORT")
    return host.strip("[]"), int(port)


def _is_transport_error(error: BaseException) -> bool:
    if isinstance(error, grpclib.exceptions.GRPCError):
        return error.status in _TRANSIENT_STATUSES
    return isinstance(
        error, OSError | grpclib.exceptions.StreamTerminatedError | asyncio.TimeoutError | ConnectionError
    )


def _is_infrastructure(response: ExecuteToolResponse) -> bool:
    """The wire's mark of a call the runner's store failed: ``infrastructure`` in the ToolError's details."""
    error = response.tool_error
    if error is None or not error.retryable or not error.details_json:
        return False
    try:
        details = json.loads(error.details_json)
    except ValueError:
        return False
    return isinstance(details, dict) and "infrastructure" in details


class RunnerStub(Protocol):
    """The RunnerService calls this adapter makes: the generated stub (or a test's stand-in for it)."""

    async def health_check(
        self, message: HealthCheckRequest | None = None, *, timeout: float | None = None
    ) -> HealthCheckResponse: ...

    async def register_trial(
        self, message: RegisterTrialRequest, *, timeout: float | None = None
    ) -> RegisterTrialResponse: ...

    async def execute_tool(
        self, message: ExecuteToolRequest, *, timeout: float | None = None
    ) -> ExecuteToolResponse: ...

    async def grade_trial(
        self, message: GradeTrialRequest, *, timeout: float | None = None
    ) -> GradeTrialResponse: ...

    async def cleanup_trial(
        self, message: CleanupTrialRequest, *, timeout: float | None = None
    ) -> CleanupTrialResponse: ...


class GrpcRunner:
    """One channel to one runner, shared by every trial of a run (grpclib multiplexes on HTTP/2).

    :meth:`connect` opens the channel; the constructor takes any :class:`RunnerStub`, which is how a
    test puts a recording stand-in between this adapter and a servicer.
    """

    def __init__(
        self,
        stub: RunnerStub,
        *,
        address: str,
        transport_budget_s: float = 30.0,
        rpc_timeout_s: float = 300.0,
        channel: Channel | None = None,
    ) -> None:
        self._address = address
        self._channel = channel
        self.stub = stub
        self._wires: TaskWires | None = None
        """How tasks travel to this runner once HealthCheck said it takes them by digest."""
        self._asked = False
        self._asking = asyncio.Lock()
        self._sent = SentOnce()
        self._budget = transport_budget_s
        self._timeout = rpc_timeout_s

    @classmethod
    def connect(
        cls,
        host: str,
        port: int,
        *,
        token: str,
        transport_budget_s: float = 30.0,
        rpc_timeout_s: float = 300.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> GrpcRunner:
        """An adapter over a new channel to ``host:port`` whose every call carries ``token``."""
        channel = Channel(host, port, codec=DecodeOnceCodec(), ssl=ssl_context)
        authorize_channel(channel, token)
        return cls(
            RunnerServiceStub(channel),
            address=f"{host}:{port}",
            transport_budget_s=transport_budget_s,
            rpc_timeout_s=rpc_timeout_s,
            channel=channel,
        )

    @property
    def address(self) -> str:
        return self._address

    async def aclose(self) -> None:
        if self._channel is not None:
            self._channel.close()

    async def _retrying(
        self, what: str, call: Callable[[], Awaitable[_T]], budget_s: float | None = None
    ) -> _T:
        budget = self._budget if budget_s is None else budget_s
        policy = RetryPolicy(retry_if=_is_transport_error, backoff=_BACKOFF, deadline_s=budget)
        try:
            return await retry_async(call, policy)
        except Exception as error:
            if isinstance(error, grpclib.exceptions.GRPCError) and error.status == Status.UNAUTHENTICATED:
                # A setup error: no retry, and no other trial, fixes it.
                raise ConfigError(
                    f"the runner at {self._address} refused this run's token ({error.message}): pass the "
                    f"token file it printed at start with --runner-token-file"
                ) from error
            if isinstance(error, grpclib.exceptions.GRPCError) and error.status == Status.INVALID_ARGUMENT:
                raise InvalidRequestError(f"{what}: {error.message}") from error
            if not _is_transport_error(error):
                raise
            raise RunnerUnavailableError(
                f"runner at {self._address} unreachable for {what} after {budget:g}s: "
                f"{type(error).__name__}: {error}"
            ) from error

    async def health(self, *, budget_s: float | None = None) -> RunnerHealth:
        response = await self.health_check(budget_s=budget_s)
        return RunnerHealth(
            status=response.status,
            version=response.version,
            active_trials=response.num_active_trials,
            store_connected=response.db_service_connected,
            adapters=tuple(response.available_adapters),
        )

    async def health_check(self, *, budget_s: float | None = None) -> HealthCheckResponse:
        """HealthCheck, retried across transport failures for ``budget_s`` (default: the transport budget)."""
        timeout = self._timeout if budget_s is None else budget_s
        return await self._retrying(
            "HealthCheck",
            lambda: self.stub.health_check(HealthCheckRequest(), timeout=timeout),
            budget_s,
        )

    async def _task_wires(self) -> TaskWires | None:
        """How this runner takes tasks: once for many trials (with their parts apart, when it can), or
        whole in each TrialSpec (None). HealthCheck says which; asked once."""
        if not self._asked:
            async with self._asking:  # the run's first trials all start at once: one of them asks
                if not self._asked:
                    try:
                        health = await self.health_check()
                        if health.accepts_task_digest:
                            self._wires = TaskWires(parts=health.accepts_task_parts)
                    except grpclib.exceptions.GRPCError:  # a runner that cannot say: the plain way
                        pass
                    self._asked = True
        return self._wires

    async def register(self, spec: TrialSpec) -> RegisteredTrial:
        wires = await self._task_wires()
        wire = wires.of(spec.task) if wires is not None else None
        # Of what travels once, this registration sends what the runner does not keep yet, unless
        # another registration is sending it right now: then it waits for that one's answer.
        claimed = await self._sent.claim(wire.keys) if wire is not None else ()
        held = False
        try:
            response = await self._register(spec, wire)
            held = response.success
        finally:
            self._sent.settle(claimed, held=held)
        if not response.success:
            raise RegistrationFailedError(
                f"RegisterTrial {spec.trial_id}: {response.error}",
                kind=response.error_kind,
                retryable=response.retryable,
            )
        if wire is not None:
            self._sent.held.update(wire.keys)
        schemas = tuple(response.tool_schemas)
        split = response.num_agent_tools
        return RegisteredTrial(spec.trial_id, schemas[:split], schemas[split:])

    async def _register(self, spec: TrialSpec, wire: TaskWire | None) -> RegisterTrialResponse:
        request = register_request(spec, wire, sent=self._sent.held)
        response = await self._retrying(
            "RegisterTrial", lambda: self.stub.register_trial(request, timeout=self._timeout)
        )
        if wire is not None and response.error_kind in (
            RegistrationErrorKind.TASK_NOT_CACHED,
            RegistrationErrorKind.PART_NOT_CACHED,
        ):
            # The runner forgot the task or a part (restarted, or evicted it): send everything again.
            self._sent.forget(wire.keys)
            request = register_request(spec, wire)
            response = await self._retrying(
                "RegisterTrial", lambda: self.stub.register_trial(request, timeout=self._timeout)
            )
        if not response.success and response.error_kind == RegistrationErrorKind.DUPLICATE_TRIAL:
            # A registration whose answer was lost in transit: forget it and register afresh.
            await self.release(spec.trial_id)
            response = await self._retrying(
                "RegisterTrial", lambda: self.stub.register_trial(request, timeout=self._timeout)
            )
        return response

    async def execute(self, call: ToolCallRequest) -> ToolResult:
        request = ExecuteToolRequest(
            trial_id=call.trial_id,
            tool_name=call.tool_name,
            arguments_json=call.arguments_json,
            executor=call.executor,
            call_id=call.call_id,
            timeout_seconds=call.timeout_s,
        )
        try:
            response = await self.stub.execute_tool(request, timeout=self._timeout)
        except Exception as error:
            if _is_transport_error(error):
                raise TrialLostError(
                    f"runner connection failed during ExecuteTool {call.tool_name} ({call.call_id}): "
                    f"{type(error).__name__}: {error}"
                ) from error
            if isinstance(error, grpclib.exceptions.GRPCError) and error.status == Status.INVALID_ARGUMENT:
                raise InvalidRequestError(error.message or "ExecuteTool: INVALID_ARGUMENT") from error
            raise
        if response.status == ExecutionStatus.TRIAL_NOT_FOUND:
            raise TrialLostError(response.error_message or f"Trial '{call.trial_id}' not found")
        result = _tool_result(response)
        if _is_infrastructure(response):
            # The runner's store failed, not the tool, and the call's effect may be unknown: this attempt
            # cannot be trusted, so it is abandoned and re-run like a lost trial.
            raise InfrastructureFailure(
                f"infrastructure failure during {call.tool_name} ({call.call_id}): {response.error_message}",
                result,
            )
        return result

    async def grade(self, request: GradeRequest) -> GradeResult:
        """GradeTrial; with ``release``, the runner forgets the trial once graded when it can."""
        message = GradeTrialRequest(
            trial_id=request.trial_id,
            llm_messages_json=encode_transcript_wire(request.messages)
            if request.messages is not None
            else "",
            termination_reason=request.termination.value if request.termination is not None else "",
            grading_components=sorted(request.components),
            release=request.release,
        )
        response = await self._retrying(
            "GradeTrial", lambda: self.stub.grade_trial(message, timeout=self._timeout)
        )
        if not response.success or response.grade is None:
            error = response.error or "GradeTrial answered success=false with no error"
            if response.error_kind == GradeErrorKind.TRIAL_NOT_FOUND:
                raise TrialLostError(error)
            raise GradingFailedError(error, kind=response.error_kind)
        return GradeResult(response.grade, released=response.released)

    async def release(self, trial_id: str) -> None:
        request = CleanupTrialRequest(trial_id=trial_id)
        response = await self._retrying(
            "CleanupTrial", lambda: self.stub.cleanup_trial(request, timeout=self._timeout)
        )
        if not response.success:
            raise StoreConflictError(f"CleanupTrial {trial_id}: {response.error}")


def _tool_result(response: ExecuteToolResponse) -> ToolResult:
    error = response.tool_error
    failure: CallFailure | None = None
    if response.status != ExecutionStatus.SUCCESS:
        details: dict[str, object] = {}
        if error is not None and error.details_json:
            try:
                decoded = json.loads(error.details_json)
                details = (
                    cast(dict[str, object], decoded) if isinstance(decoded, dict) else {"details": decoded}
                )
            except ValueError:
                details = {"details_json": error.details_json}
        failure = CallFailure(
            category=error.category if error is not None else _category(response.status),
            message=response.error_message,
            retryable=error.retryable if error is not None else False,
            details=details,
        )
    metrics = response.metrics
    return ToolResult(
        status=response.status,
        output=response.output,
        failure=failure,
        reported_by_tool=response.reported_by_tool,
        latency_s=metrics.latency_seconds if metrics is not None else 0.0,
        exit_code=metrics.exit_code if metrics is not None else 0,
        state_mutations=metrics.state_mutations if metrics is not None else 0,
        attachments=tuple(
            Attachment(item.media_type, item.data, item.label, item.for_model)
            for item in response.attachments
        ),
    )


def _category(status: ExecutionStatus) -> ToolErrorCategory:
    """A runner that predates the ToolError still answers a status: its category, as the taxonomy maps it."""
    return {
        ExecutionStatus.TIMEOUT: ToolErrorCategory.TIMEOUT,
        ExecutionStatus.TOOL_NOT_FOUND: ToolErrorCategory.NOT_FOUND,
        ExecutionStatus.INVALID_ARGUMENTS: ToolErrorCategory.INVALID_ARGUMENTS,
    }.get(status, ToolErrorCategory.UNKNOWN)
