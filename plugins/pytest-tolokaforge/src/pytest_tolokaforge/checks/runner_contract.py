"""The runner's own contract, checked once per session against a tiny synthetic task.

* ``health_check``: HealthCheck answers with a known status;
* ``protocol_version_skew``: RegisterTrial from an engine below the runner's minimum protocol version
  is refused with an error naming the skew, and leaves nothing behind (the id registers afterwards);
* ``empty_call_id``: ExecuteTool with an empty call_id fails the RPC with INVALID_ARGUMENT;
* ``cleanup_idempotent``: CleanupTrial succeeds twice and on an id never registered; the forgotten
  trial answers TRIAL_NOT_FOUND and its id can be registered again.

The synthetic task, not one of the pack's, keeps these verdicts about the runner alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Coroutine
from typing import Any

import grpclib.exceptions
from grpclib.const import Status

from tolokaforge.contracts.runner import (
    CleanupTrialRequest,
    ExecuteToolRequest,
    ExecutionStatus,
    HealthCheckRequest,
    RegisterTrialRequest,
)
from tolokaforge.core.models import InitialState, TaskDescription
from tolokaforge.core.protocol import ENGINE_PROTOCOL_VERSION, MIN_ENGINE_PROTOCOL_VERSION
from tolokaforge.host import build_trial_spec, register_request

from ..errors import CheckFailure
from ..replay import RUN_ID
from ..session import RunnerConnection, ToloSession

__all__ = ["CHECKS", "probe_task"]

_TIMEOUT = 60.0


def probe_task() -> TaskDescription:
    return TaskDescription(
        task_id="tolokaforge_runner_contract",
        name="runner contract probe",
        initial_state=InitialState(tables={"probe": [{"id": 1, "value": "x"}]}),
    )


def _request(session: ToloSession, version: int = ENGINE_PROTOCOL_VERSION) -> RegisterTrialRequest:
    spec = build_trial_spec(probe_task(), run_id=RUN_ID, trial_index=session.next_trial_index())
    request = register_request(spec)
    request.engine_protocol_version = version
    return request


async def _register(connection: RunnerConnection, request: RegisterTrialRequest) -> None:
    response = await connection.stub.register_trial(request, timeout=_TIMEOUT)
    if not response.success:
        raise CheckFailure(f"RegisterTrial of the probe task {request.trial_id} failed: {response.error}")


async def _cleanup(connection: RunnerConnection, trial_id: str, when: str) -> None:
    response = await connection.stub.cleanup_trial(CleanupTrialRequest(trial_id=trial_id), timeout=_TIMEOUT)
    if not response.success:
        raise CheckFailure(f"CleanupTrial {when} answered success=false: {response.error}")


async def health_check(session: ToloSession) -> list[str]:
    connection = await session.connection()
    response = await connection.stub.health_check(HealthCheckRequest(), timeout=_TIMEOUT)
    if response.status not in ("healthy", "degraded", "unhealthy"):
        raise CheckFailure(f"HealthCheck answered status {response.status!r}, not healthy/degraded/unhealthy")
    return [f"runner {connection.address} status {response.status}, version {response.version or '?'}"]


async def protocol_version_skew(session: ToloSession) -> list[str]:
    connection = await session.connection()
    versions = sorted({0, max(MIN_ENGINE_PROTOCOL_VERSION - 1, 0)})
    request = _request(session)
    for version in versions:
        request.engine_protocol_version = version
        response = await connection.stub.register_trial(request, timeout=_TIMEOUT)
        if response.success:
            await _cleanup(connection, request.trial_id, "after the skewed registration")
            raise CheckFailure(
                f"RegisterTrial with engine_protocol_version {version} was accepted "
                f"(this engine's minimum is {MIN_ENGINE_PROTOCOL_VERSION})"
            )
        numbers = {int(n) for n in re.findall(r"\d+", response.error)}
        if version not in numbers or not any(n > version for n in numbers):
            raise CheckFailure(
                f"RegisterTrial refused engine_protocol_version {version} without naming the skew "
                f"(both versions): {response.error!r}"
            )
    # A refused registration leaves nothing behind: the same id registers with the right version.
    request.engine_protocol_version = ENGINE_PROTOCOL_VERSION
    await _register(connection, request)
    await _cleanup(connection, request.trial_id, "of the probe trial")
    return []


async def empty_call_id(session: ToloSession) -> list[str]:
    connection = await session.connection()
    request = _request(session)
    await _register(connection, request)
    try:
        call = ExecuteToolRequest(
            trial_id=request.trial_id, tool_name="probe", arguments_json="{}", executor="agent", call_id=""
        )
        try:
            response = await connection.stub.execute_tool(call, timeout=_TIMEOUT)
        except grpclib.exceptions.GRPCError as error:
            if error.status != Status.INVALID_ARGUMENT:
                raise CheckFailure(
                    f"ExecuteTool with an empty call_id failed with {error.status.name}, "
                    f"not INVALID_ARGUMENT: {error.message}"
                ) from error
            return []
        raise CheckFailure(
            f"ExecuteTool with an empty call_id was answered {response.status.name} "
            "instead of failing the RPC with INVALID_ARGUMENT"
        )
    finally:
        await _cleanup(connection, request.trial_id, "of the probe trial")


async def cleanup_idempotent(session: ToloSession) -> list[str]:
    connection = await session.connection()
    request = _request(session)
    await _register(connection, request)
    await _cleanup(connection, request.trial_id, "of a registered trial")
    await _cleanup(connection, request.trial_id, "a second time")
    await _cleanup(connection, f"{request.trial_id}:never-registered", "of an id never registered")
    call = ExecuteToolRequest(
        trial_id=request.trial_id, tool_name="probe", arguments_json="{}", executor="agent", call_id="c1"
    )
    response = await connection.stub.execute_tool(call, timeout=_TIMEOUT)
    if response.status != ExecutionStatus.TRIAL_NOT_FOUND:
        raise CheckFailure(
            f"ExecuteTool on a cleaned-up trial answered {response.status.name}, not TRIAL_NOT_FOUND"
        )
    await _register(connection, request)  # the id is free again
    await _cleanup(connection, request.trial_id, "after registering the id again")
    return []


CHECKS: dict[str, Callable[[ToloSession], Coroutine[Any, Any, list[str]]]] = {
    "health_check": health_check,
    "protocol_version_skew": protocol_version_skew,
    "empty_call_id": empty_call_id,
    "cleanup_idempotent": cleanup_idempotent,
}
