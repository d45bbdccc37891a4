"""The in-process stub answers as the gRPC edge would: typed errors through, timeouts, INTERNAL, cancellation."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import grpclib
import pytest
from grpclib.const import Status

from tolokaforge.contracts.runner import (
    ExecuteToolRequest,
    ExecutionStatus,
    GetStateRequest,
    HealthCheckRequest,
)
from tolokaforge.runner import RunnerHandle, RunnerSettings, start_runner
from tolokaforge.runner.edge.in_process import InProcessStub

from .conftest import make_spec, register_request


@pytest.fixture
async def served_nowhere() -> AsyncIterator[RunnerHandle]:
    handle = await start_runner(RunnerSettings(isolation="thread"), serve=False)
    try:
        yield handle
    finally:
        await handle.close()


async def _registered(stub: InProcessStub, trial_id: str) -> None:
    response = await stub.register_trial(register_request(make_spec(trial_id)))
    assert response.success, response.error


def _call(trial_id: str, tool: str, arguments: dict[str, Any], call_id: str) -> ExecuteToolRequest:
    return ExecuteToolRequest(
        trial_id=trial_id,
        tool_name=tool,
        arguments_json=json.dumps(arguments),
        executor="agent",
        call_id=call_id,
    )


async def test_a_runner_not_served_listens_nowhere_and_answers_in_process(
    served_nowhere: RunnerHandle,
) -> None:
    assert served_nowhere.port == 0
    stub = served_nowhere.in_process_stub()
    health = await stub.health_check(HealthCheckRequest())
    assert health.status == "healthy" and health.accepts_task_digest
    await _registered(stub, "t:0")
    response = await stub.execute_tool(
        _call("t:0", "set_status", {"order_id": "O-1", "status": "paid"}, "c1")
    )
    assert response.status == ExecutionStatus.SUCCESS, response.error_message
    state = json.loads((await stub.get_state(GetStateRequest(trial_id="t:0"))).state_json)
    assert state["orders"][0]["status"] == "paid"


async def test_the_servicers_typed_errors_pass_through(served_nowhere: RunnerHandle) -> None:
    stub = served_nowhere.in_process_stub()
    await _registered(stub, "t:0")
    with pytest.raises(grpclib.GRPCError) as raised:
        await stub.execute_tool(_call("t:0", "who_am_i", {}, ""))
    assert raised.value.status == Status.INVALID_ARGUMENT


async def test_an_exception_escaping_a_handler_is_internal_never_raw(
    served_nowhere: RunnerHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    stub = served_nowhere.in_process_stub()

    def broken(trial_id: str) -> Any:
        raise RuntimeError("registry defect")

    monkeypatch.setattr(served_nowhere.servicer.registry, "get", broken)
    with pytest.raises(grpclib.GRPCError) as raised:
        await stub.execute_tool(_call("t:0", "who_am_i", {}, "c1"))
    assert raised.value.status == Status.INTERNAL
    assert "RuntimeError: registry defect" in (raised.value.message or "")


async def test_a_call_past_its_timeout_ends_with_timeout_error_and_the_trial_goes_on(
    served_nowhere: RunnerHandle,
) -> None:
    stub = served_nowhere.in_process_stub()
    await _registered(stub, "t:0")
    started = asyncio.get_running_loop().time()
    with pytest.raises(TimeoutError):
        await stub.execute_tool(_call("t:0", "slow_write", {"seconds": 1.0}, "c1"), timeout=0.1)
    assert asyncio.get_running_loop().time() - started < 0.9  # the caller was not kept for the tool
    # The trial is still usable: the next call on it runs.
    response = await stub.execute_tool(_call("t:0", "who_am_i", {}, "c2"))
    assert response.status == ExecutionStatus.SUCCESS, response.error_message
