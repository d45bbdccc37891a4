"""The host's view of a runner: the generated RunnerService stub plus the protocol's recovery rules.

* ``TRIAL_NOT_FOUND`` from ExecuteTool raises :class:`TrialLostError` (the attempt ends ``trial_lost``).
* A transport failure during ExecuteTool does the same: whether the call ran is unknown, so the attempt
  is abandoned and re-run from a fresh registration rather than guessed at. So does a ToolError the
  runner marks as an infrastructure failure (its state store failed, not the tool).
* Only UNAVAILABLE and CANCELLED count as transient; UNKNOWN and every other status are final.
* RegisterTrial, GradeTrial and CleanupTrial are retried across transport failures with exponential
  backoff (a runner restarting on the same address comes back), up to ``transport_budget_s``; past
  that, :class:`RunnerUnavailableError`.

``open_runner(None)`` starts the embedded runner (in this event loop, memory store, called in process:
no HTTP/2 between two ends on one core) and ``open_runner("host:port")`` connects to a running one over
gRPC; both yield a :class:`RunnerClient`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, TypeVar

import grpclib.exceptions
from grpclib.client import Channel
from grpclib.const import Status

from tolokaforge.contracts.runner import (
    CleanupTrialRequest,
    CleanupTrialResponse,
    ExecuteToolRequest,
    ExecuteToolResponse,
    ExecutionStatus,
    GradeTrialRequest,
    GradeTrialResponse,
    HealthCheckRequest,
    HealthCheckResponse,
    RegisterTrialRequest,
    RegisterTrialResponse,
    RegistrationErrorKind,
    RunnerServiceStub,
    ToolSchema,
)
from tolokaforge.core.credentials import (
    CredentialError,
    authorize_channel,
    client_tls,
    client_token,
    refuse_clear_token,
)
from tolokaforge.core.models import TrialSpec
from tolokaforge.core.retry import Backoff, RetryPolicy, retry_async

from ..errors import ConfigError, RegistrationFailedError, RunnerUnavailableError, TrialLostError
from ..results.redaction import register_secret
from .reply_codec import ReplyCodec
from .sent_once import SentOnce
from .trial_spec import TaskWire, TaskWires, register_request

__all__ = ["RegisteredTrial", "RunnerClient", "open_runner", "parse_address"]

_T = TypeVar("_T")
# Only what the runner says may succeed unchanged: UNAVAILABLE (it or its store is down), CANCELLED (the
# connection dropped mid-call). UNKNOWN / INTERNAL / INVALID_ARGUMENT are deterministic: never retried.
_TRANSIENT_STATUSES = (Status.UNAVAILABLE, Status.CANCELLED)
_BACKOFF = Backoff(initial_s=0.05, max_s=2.0)


@dataclass(frozen=True)
class RegisteredTrial:
    trial_id: str
    agent_tools: tuple[ToolSchema, ...]
    user_tools: tuple[ToolSchema, ...]


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
    error = response.tool_error
    if error is None or not error.retryable or not error.details_json:
        return False
    try:
        details = json.loads(error.details_json)
    except ValueError:
        return False
    return isinstance(details, dict) and "infrastructure" in details


class RunnerStub(Protocol):
    """The RunnerService calls the host makes: the generated gRPC stub, or the runner's in-process one."""

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


class RunnerClient:
    """One channel to one runner, shared by every trial of a run (grpclib multiplexes on HTTP/2).

    With ``stub``, calls go to it instead (the embedded runner's in-process stub) and ``host:port``
    only names the runner in messages.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        transport_budget_s: float = 30.0,
        rpc_timeout_s: float = 300.0,
        stub: RunnerStub | None = None,
        token: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.address = f"{host}:{port}"
        self._channel: Channel | None = None
        if stub is None:
            if token is None:
                raise ValueError("a runner over gRPC needs its token")
            self._channel = Channel(host, port, codec=ReplyCodec(), ssl=ssl_context)
            authorize_channel(self._channel, token)
            stub = RunnerServiceStub(self._channel)
        self._stub: RunnerStub = stub
        self._wires: TaskWires | None = None
        """How tasks travel to this runner once HealthCheck said it takes them by digest."""
        self._asked = False
        self._asking = asyncio.Lock()
        self._sent = SentOnce()
        self._budget = transport_budget_s
        self._timeout = rpc_timeout_s

    def close(self) -> None:
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
                    f"the runner at {self.address} refused this run's token ({error.message}): pass the "
                    f"token file it printed at start with --runner-token-file"
                ) from error
            if not _is_transport_error(error):
                raise
            raise RunnerUnavailableError(
                f"runner at {self.address} unreachable for {what} after {budget:g}s: "
                f"{type(error).__name__}: {error}"
            ) from error

    async def health(self) -> str:
        return (await self.health_check()).status

    async def health_check(self, *, budget_s: float | None = None) -> HealthCheckResponse:
        """HealthCheck, retried across transport failures for ``budget_s`` (default: the transport budget)."""
        timeout = self._timeout if budget_s is None else budget_s
        return await self._retrying(
            "HealthCheck",
            lambda: self._stub.health_check(HealthCheckRequest(), timeout=timeout),
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
                kind=response.error_kind.name or "UNSPECIFIED",
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
            "RegisterTrial", lambda: self._stub.register_trial(request, timeout=self._timeout)
        )
        if wire is not None and response.error_kind in (
            RegistrationErrorKind.TASK_NOT_CACHED,
            RegistrationErrorKind.PART_NOT_CACHED,
        ):
            # The runner forgot the task or a part (restarted, or evicted it): send everything again.
            self._sent.forget(wire.keys)
            request = register_request(spec, wire)
            response = await self._retrying(
                "RegisterTrial", lambda: self._stub.register_trial(request, timeout=self._timeout)
            )
        if not response.success and response.error_kind == RegistrationErrorKind.DUPLICATE_TRIAL:
            # A registration whose answer was lost in transit: forget it and register afresh.
            await self.cleanup(spec.trial_id)
            response = await self._retrying(
                "RegisterTrial", lambda: self._stub.register_trial(request, timeout=self._timeout)
            )
        return response

    async def execute(
        self, trial_id: str, *, call_id: str, tool_name: str, arguments_json: str, executor: str
    ) -> ExecuteToolResponse:
        request = ExecuteToolRequest(
            trial_id=trial_id,
            tool_name=tool_name,
            arguments_json=arguments_json,
            executor=executor,
            call_id=call_id,
        )
        try:
            response = await self._stub.execute_tool(request, timeout=self._timeout)
        except Exception as error:
            if _is_transport_error(error):
                raise TrialLostError(
                    f"runner connection failed during ExecuteTool {tool_name} ({call_id}): "
                    f"{type(error).__name__}: {error}"
                ) from error
            raise
        if response.status == ExecutionStatus.TRIAL_NOT_FOUND:
            raise TrialLostError(response.error_message or f"Trial '{trial_id}' not found")
        if _is_infrastructure(response):
            # The runner's store failed, not the tool, and the call's effect may be unknown: this attempt
            # cannot be trusted, so it is abandoned and re-run like a lost trial.
            raise TrialLostError(
                f"infrastructure failure during {tool_name} ({call_id}): {response.error_message}"
            )
        return response

    async def grade(
        self, trial_id: str, llm_messages_json: str, termination_reason: str, *, release: bool = False
    ) -> GradeTrialResponse:
        """GradeTrial; with ``release``, the runner forgets the trial once graded when it can (the
        response's ``released``: otherwise the caller still sends CleanupTrial)."""
        request = GradeTrialRequest(
            trial_id=trial_id,
            llm_messages_json=llm_messages_json,
            termination_reason=termination_reason,
            release=release,
        )
        return await self._retrying(
            "GradeTrial", lambda: self._stub.grade_trial(request, timeout=self._timeout)
        )

    async def cleanup(self, trial_id: str) -> None:
        request = CleanupTrialRequest(trial_id=trial_id)
        response = await self._retrying(
            "CleanupTrial", lambda: self._stub.cleanup_trial(request, timeout=self._timeout)
        )
        if not response.success:
            raise RunnerUnavailableError(f"CleanupTrial {trial_id}: {response.error}")


@contextlib.asynccontextmanager
async def open_runner(
    address: str | None,
    *,
    transport_budget_s: float = 30.0,
    isolation: Literal["sandbox", "process", "thread"] = "sandbox",
    golden_replay: Literal["task", "trial"] = "task",
    sandbox_without: Sequence[str] = (),
    token_file: Path | None = None,
    ca_file: Path | None = None,
) -> AsyncGenerator[RunnerClient]:
    """A client of the runner at ``address``, or of an embedded runner (run with ``isolation`` and
    ``golden_replay``) started for the duration.

    The embedded runner is called in process; a caller that needs it served over gRPC starts it with
    ``tolokaforge.runner.start_runner`` and holds its token.

    A runner at ``address`` is called with its token: from ``token_file``, else from the file a runner
    on this machine wrote for that port (docs/services.md); over TLS when ``ca_file`` (the CA that
    signed its certificate) is given. No token is a :class:`ConfigError` naming ``--runner-token-file``.
    """
    if address is not None:
        host, port = parse_address(address)
        try:
            refuse_clear_token(host, tls=ca_file is not None, service="runner", flags="--runner-ca")
            token = client_token("runner", host, port, token_file, flag="--runner-token-file")
            register_secret(token)  # whatever echoes it, it never reaches the results
            tls = None if ca_file is None else client_tls(ca_file)
        except CredentialError as error:
            raise ConfigError(str(error)) from error
        client = RunnerClient(host, port, transport_budget_s=transport_budget_s, token=token, ssl_context=tls)
        try:
            yield client
        finally:
            client.close()
        return
    from tolokaforge.runner import RunnerSettings, SandboxUnavailable, start_runner

    settings = RunnerSettings(
        isolation=isolation, golden_replay=golden_replay, sandbox_without=frozenset(sandbox_without)
    )
    try:
        handle = await start_runner(settings, serve=False)
    except SandboxUnavailable as error:  # the machine lacks a layer: a setup error, said in one line
        raise ConfigError(str(error)) from error
    client = RunnerClient("embedded", 0, transport_budget_s=transport_budget_s, stub=handle.in_process_stub())
    try:
        yield client
    finally:
        client.close()
        await handle.close()
