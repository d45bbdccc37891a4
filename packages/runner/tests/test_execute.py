"""ExecuteTool: statuses, the ToolError taxonomy, budgets, isolation, and the recorded history."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import grpclib
import pytest
from grpclib.const import Status

from tolokaforge.contracts.runner import (
    ExecuteToolRequest,
    ExecuteToolResponse,
    ExecutionStatus,
    GetStateRequest,
    RegisterTrialRequest,
    ResetTrialRequest,
    RunnerServiceStub,
)
from tolokaforge.contracts.tool import ToolErrorCategory
from tolokaforge.runner import RunnerHandle

from .conftest import tool_description

SpecFactory = Callable[..., dict[str, Any]]


@pytest.fixture(params=["memory", "http-postgres"])
def store_mode(request: pytest.FixtureRequest) -> str:
    """Every test here runs on both stores: in-process memory, and a DB service over HTTP on PostgreSQL."""
    return request.param


RequestFor = Callable[..., RegisterTrialRequest]


async def _register(stub: RunnerServiceStub, request: RegisterTrialRequest) -> None:
    response = await stub.register_trial(request)
    assert response.success, response.error


def _call(
    trial_id: str, tool: str, arguments: dict[str, Any] | str, call_id: str, executor: str = "agent"
) -> ExecuteToolRequest:
    arguments_json = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ExecuteToolRequest(
        trial_id=trial_id, tool_name=tool, arguments_json=arguments_json, executor=executor, call_id=call_id
    )


async def _state(stub: RunnerServiceStub, trial_id: str) -> dict[str, Any]:
    return json.loads(
        (await stub.get_state(GetStateRequest(trial_id=trial_id, include_unstable=True))).state_json
    )


@pytest.fixture
async def trial(stub: RunnerServiceStub, spec_factory: SpecFactory, request_for: RequestFor) -> str:
    await _register(stub, request_for(spec_factory("t:0")))
    return "t:0"


async def test_success_changes_state_and_reports_metrics(stub: RunnerServiceStub, trial: str) -> None:
    response = await stub.execute_tool(
        _call(trial, "set_status", {"order_id": "O-1", "status": "paid"}, "c1")
    )
    assert response.status == ExecutionStatus.SUCCESS
    assert response.output == "O-1 is now paid" and response.error_message == ""
    assert response.tool_error is None
    assert response.metrics is not None and response.metrics.latency_seconds > 0
    assert response.metrics.state_mutations == 1
    assert (await _state(stub, trial))["orders"][0]["status"] == "paid"


async def test_empty_call_id_fails_the_rpc(stub: RunnerServiceStub, trial: str) -> None:
    with pytest.raises(grpclib.GRPCError) as raised:
        await stub.execute_tool(_call(trial, "who_am_i", {}, ""))
    assert raised.value.status == Status.INVALID_ARGUMENT
    assert "call_id" in (raised.value.message or "")


async def test_unknown_executor_fails_the_rpc(stub: RunnerServiceStub, trial: str) -> None:
    with pytest.raises(grpclib.GRPCError) as raised:
        await stub.execute_tool(_call(trial, "who_am_i", {}, "c1", executor="robot"))
    assert raised.value.status == Status.INVALID_ARGUMENT


def _assert_failure(
    response: ExecuteToolResponse, status: ExecutionStatus, category: ToolErrorCategory
) -> None:
    assert response.status == status
    assert response.output == ""
    assert response.tool_error is not None
    assert response.tool_error.category == category
    assert response.tool_error.message == response.error_message != ""


async def test_schema_invalid_arguments(runner: RunnerHandle, stub: RunnerServiceStub, trial: str) -> None:
    response = await stub.execute_tool(
        _call(trial, "set_status", {"order_id": "O-1", "status": "shipped"}, "c1")
    )
    _assert_failure(response, ExecutionStatus.INVALID_ARGUMENTS, ToolErrorCategory.INVALID_ARGUMENTS)
    assert "status" in response.error_message and "'shipped'" in response.error_message
    assert not response.tool_error.retryable  # pyright: ignore[reportOptionalMemberAccess]
    (record,) = runner.servicer.runner.registry.get(trial).history
    assert (record.status, record.arguments) == ("invalid_arguments", {})
    not_json = await stub.execute_tool(_call(trial, "set_status", "{not json", "c2"))
    _assert_failure(not_json, ExecutionStatus.INVALID_ARGUMENTS, ToolErrorCategory.INVALID_ARGUMENTS)


async def test_tool_offered_to_the_other_actor_is_not_found(stub: RunnerServiceStub, trial: str) -> None:
    response = await stub.execute_tool(_call(trial, "check_balance", {}, "c1", executor="agent"))
    _assert_failure(response, ExecutionStatus.TOOL_NOT_FOUND, ToolErrorCategory.NOT_FOUND)
    assert "user tool" in response.error_message
    as_user = await stub.execute_tool(_call(trial, "check_balance", {}, "c2", executor="user"))
    assert (as_user.status, as_user.output) == (ExecutionStatus.SUCCESS, "42")
    agent_tool_as_user = await stub.execute_tool(_call(trial, "who_am_i", {}, "c3", executor="user"))
    _assert_failure(agent_tool_as_user, ExecutionStatus.TOOL_NOT_FOUND, ToolErrorCategory.NOT_FOUND)


async def test_unknown_tool_is_not_found_and_recorded(
    runner: RunnerHandle, stub: RunnerServiceStub, trial: str
) -> None:
    response = await stub.execute_tool(_call(trial, "no_such_tool", {}, "c1"))
    _assert_failure(response, ExecutionStatus.TOOL_NOT_FOUND, ToolErrorCategory.NOT_FOUND)
    assert [r.status for r in runner.servicer.runner.registry.get(trial).history] == ["tool_not_found"]


async def test_unknown_trial_is_trial_not_found_and_not_recorded(
    runner: RunnerHandle, stub: RunnerServiceStub, trial: str
) -> None:
    response = await stub.execute_tool(_call("ghost:0", "who_am_i", {}, "c1"))
    assert response.status == ExecutionStatus.TRIAL_NOT_FOUND
    assert "Trial 'ghost:0' not found" in response.error_message
    assert runner.servicer.runner.registry.get(trial).history == []


async def test_tool_that_raises_is_an_error(stub: RunnerServiceStub, trial: str) -> None:
    response = await stub.execute_tool(_call(trial, "explode", {}, "c1"))
    _assert_failure(response, ExecutionStatus.ERROR, ToolErrorCategory.EXECUTION_FAILED)
    assert response.error_message == "ValueError: Order O-404 not found"
    details = json.loads(response.tool_error.details_json)  # pyright: ignore[reportOptionalMemberAccess]
    assert details["exception"] == "ValueError"
    # The traceback travels in the details, for the trial's record; the message stays one line.
    assert details["traceback"].startswith("Traceback (most recent call last):")
    assert details["traceback"].rstrip().endswith("ValueError: Order O-404 not found")
    assert "Traceback" not in response.error_message


async def test_failed_call_changes_nothing(stub: RunnerServiceStub, trial: str) -> None:
    before = await _state(stub, trial)
    response = await stub.execute_tool(_call(trial, "get_order", {"order_id": "O-404"}, "c1"))
    assert response.status == ExecutionStatus.ERROR
    assert await _state(stub, trial) == before


async def test_a_tool_that_fails_after_writing_leaves_nothing_for_later_calls(
    stub: RunnerServiceStub, spec_factory: SpecFactory, request_for: RequestFor
) -> None:
    tools = [tool_description(name) for name in ("write_then_fail", "add_note", "get_order")]
    await _register(stub, request_for(spec_factory("f:0", agent_tools=tools)))
    before = await _state(stub, "f:0")
    for n in range(2):  # twice: the second call runs on the views the first one used
        failed = await stub.execute_tool(_call("f:0", "write_then_fail", {}, f"fail{n}"))
        assert failed.status == ExecutionStatus.ERROR
        assert await _state(stub, "f:0") == before
    assert (await stub.execute_tool(_call("f:0", "add_note", {"text": "next"}, "c1"))).status == (
        ExecutionStatus.SUCCESS
    )
    order = await stub.execute_tool(_call("f:0", "get_order", {"order_id": "O-1"}, "c2"))
    assert json.loads(order.output)["status"] == "open"
    assert (await _state(stub, "f:0"))["notes"] == [{"text": "next"}]


async def test_keyed_tables_iterate_in_the_same_order_before_and_after_a_reset(
    stub: RunnerServiceStub, spec_factory: SpecFactory, request_for: RequestFor
) -> None:
    tables = {"wallet": {"zoe": {"balance": 1}, "adam": {"balance": 2}, "mia": {"balance": 3}}}
    spec = spec_factory(
        "k:0", agent_tools=[tool_description("wallet_owners")], initial_state={"tables": tables}
    )
    await _register(stub, request_for(spec))
    first = await stub.execute_tool(_call("k:0", "wallet_owners", {}, "c1"))
    assert (await stub.reset_trial(ResetTrialRequest(trial_id="k:0"))).success
    again = await stub.execute_tool(_call("k:0", "wallet_owners", {}, "c2"))
    assert first.output == again.output == "adam,mia,zoe"


async def test_timeout_leaves_no_change_and_other_trials_keep_running(
    runner: RunnerHandle,
    stub: RunnerServiceStub,
    trial: str,
    spec_factory: SpecFactory,
    request_for: RequestFor,
) -> None:
    await _register(stub, request_for(spec_factory("other:0")))
    slow = asyncio.ensure_future(_slow(stub, trial))
    await asyncio.sleep(0.05)
    started = time.perf_counter()
    completed = 0
    while not slow.done():
        fast = await stub.execute_tool(
            _call("other:0", "add_note", {"text": f"n{completed}"}, f"f{completed}")
        )
        assert fast.status == ExecutionStatus.SUCCESS
        completed += 1
    response = await slow
    assert completed >= 5, "calls on another trial must keep completing while one tool sleeps"
    assert time.perf_counter() - started < 1.0
    _assert_failure(response, ExecutionStatus.TIMEOUT, ToolErrorCategory.TIMEOUT)
    assert response.tool_error.retryable  # pyright: ignore[reportOptionalMemberAccess]
    # The abandoned thread finishes its write later; it must never reach the trial's state.
    await asyncio.sleep(1.6)
    assert (await _state(stub, trial))["notes"] == []
    after = await stub.execute_tool(_call(trial, "add_note", {"text": "after"}, "c2"))
    assert after.status == ExecutionStatus.SUCCESS
    assert (await _state(stub, trial))["notes"] == [{"text": "after"}]


async def _slow(stub: RunnerServiceStub, trial: str) -> ExecuteToolResponse:
    request = _call(trial, "slow_write", {"seconds": 1.5}, "slow")
    request.timeout_seconds = 0.3
    return await stub.execute_tool(request)


async def test_budget_resolution_prefers_request_then_tool_then_trial(
    stub: RunnerServiceStub, spec_factory: SpecFactory, request_for: RequestFor
) -> None:
    spec = spec_factory("t:1")
    for tool in spec["task"]["agent_tools"]:
        if tool["name"] == "slow_write":
            tool["timeout_s"] = 0.2
    await _register(stub, request_for(spec, timeout=5.0))
    by_tool = await stub.execute_tool(_call("t:1", "slow_write", {"seconds": 0.5}, "c1"))
    assert by_tool.status == ExecutionStatus.TIMEOUT and "0.2s" in by_tool.error_message
    overridden = _call("t:1", "slow_write", {"seconds": 0.5}, "c2")
    overridden.timeout_seconds = 2.0
    assert (await stub.execute_tool(overridden)).status == ExecutionStatus.SUCCESS
    await _register(stub, request_for(spec_factory("t:2"), timeout=0.1))
    by_trial = await stub.execute_tool(_call("t:2", "slow_write", {"seconds": 0.5}, "c1"))
    assert by_trial.status == ExecutionStatus.TIMEOUT and "0.1s" in by_trial.error_message


async def test_two_packs_with_a_module_named_tools_stay_apart(
    stub: RunnerServiceStub, spec_factory: SpecFactory, request_for: RequestFor
) -> None:
    await _register(stub, request_for(spec_factory("a:0")))
    await _register(stub, request_for(spec_factory("b:0", pack="pack_b")))
    a = await stub.execute_tool(_call("a:0", "who_am_i", {}, "c1"))
    b = await stub.execute_tool(_call("b:0", "who_am_i", {}, "c1"))
    assert (a.output, b.output) == ("pack_a", "pack_b")


async def test_history_records_every_call_in_order(
    runner: RunnerHandle, stub: RunnerServiceStub, trial: str
) -> None:
    calls = [
        _call(trial, "get_order", {"order_id": "O-1"}, "c1"),
        _call(trial, "get_order", {"order_id": "O-1"}, "c1#1"),
        _call(trial, "set_status", {"order_id": "O-2", "status": "bogus"}, "c2"),
        _call(trial, "check_balance", {}, "c3", executor="user"),
        _call(trial, "explode", {}, "c4"),
        _call(trial, "missing", {}, "c5"),
    ]
    for call in calls:
        await stub.execute_tool(call)
    await stub.execute_tool(_call("ghost:0", "get_order", {}, "c6"))
    history = runner.servicer.runner.registry.get(trial).history
    assert [(r.sequence, r.call_id, r.tool_name, r.executor, r.status) for r in history] == [
        (0, "c1", "get_order", "agent", "success"),
        (1, "c1#1", "get_order", "agent", "success"),
        (2, "c2", "set_status", "agent", "invalid_arguments"),
        (3, "c3", "check_balance", "user", "success"),
        (4, "c4", "explode", "agent", "error"),
        (5, "c5", "missing", "agent", "tool_not_found"),
    ]
    assert history[0].arguments == {"order_id": "O-1"}
    assert json.loads(history[0].output)["id"] == "O-1"
    assert history[4].error_category == "execution_failed"
    assert all(r.latency_seconds >= 0 and r.timestamp > 0 for r in history)
