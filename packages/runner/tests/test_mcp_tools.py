"""MCP servers through a real runner: stdio server per trial, outcomes, state write-through, no leaks.

The server is fixtures/servers/mcp_server.py, a real subprocess speaking plain JSON-RPC over stdio.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from tolokaforge.contracts.runner import (
    CleanupTrialRequest,
    ExecuteToolResponse,
    ExecutionStatus,
    GetStateRequest,
    ResetTrialRequest,
    RunnerServiceStub,
)
from tolokaforge.contracts.tool import ToolErrorCategory
from tolokaforge.runner import RunnerHandle

from .conftest import fixture_server, register_request, server_pid, tool_processes

CallTool = Callable[..., Awaitable[ExecuteToolResponse]]
SpecWith = Callable[..., dict[str, Any]]


async def _start(stub: RunnerServiceStub, server_spec: SpecWith, trial_id: str, **extra: Any) -> None:
    spec = server_spec(trial_id, fixture_server("shop", "mcp", "mcp_server.py", **extra))
    response = await stub.register_trial(register_request(spec))
    assert response.success, response.error
    assert {schema.name for schema in response.tool_schemas} >= {"echo", "crash", "fail", "set_balance"}


async def test_outcomes_are_classified(
    runner: RunnerHandle, stub: RunnerServiceStub, server_spec: SpecWith, call_tool: CallTool
) -> None:
    await _start(stub, server_spec, "mcp_outcomes:0")
    ok = await call_tool("mcp_outcomes:0", "echo", {"text": "hello"}, "c1")
    assert (ok.status, ok.output) == (ExecutionStatus.SUCCESS, "hello")
    failed = await call_tool("mcp_outcomes:0", "fail", {}, "c2")
    assert failed.status == ExecutionStatus.ERROR
    assert failed.tool_error is not None and failed.tool_error.category == ToolErrorCategory.EXECUTION_FAILED
    assert "on purpose" in failed.error_message
    refused = await call_tool("mcp_outcomes:0", "bad_params", {}, "c3")
    assert refused.status == ExecutionStatus.INVALID_ARGUMENTS
    assert (
        refused.tool_error is not None and refused.tool_error.category == ToolErrorCategory.INVALID_ARGUMENTS
    )
    assert json.loads(refused.tool_error.details_json)["jsonrpc_code"] == -32602
    history = runner.servicer.runner.registry.get("mcp_outcomes:0").history
    assert [r.error_category for r in history] == [None, "execution_failed", "invalid_arguments"]


async def test_a_crashing_server_is_process_crashed_and_restarted(
    runner: RunnerHandle, stub: RunnerServiceStub, server_spec: SpecWith, call_tool: CallTool
) -> None:
    await _start(stub, server_spec, "mcp_crash:0")
    assert (await call_tool("mcp_crash:0", "pid", {}, "c0")).status == ExecutionStatus.SUCCESS
    before = server_pid(runner, "mcp_crash:0")
    crashed = await call_tool("mcp_crash:0", "crash", {}, "c1")
    assert crashed.status == ExecutionStatus.ERROR
    assert crashed.tool_error is not None and crashed.tool_error.category == ToolErrorCategory.PROCESS_CRASHED
    after = await call_tool("mcp_crash:0", "pid", {}, "c2")
    assert after.status == ExecutionStatus.SUCCESS and server_pid(runner, "mcp_crash:0") != before


async def test_a_call_past_its_budget_times_out_and_the_server_is_rebuilt(
    runner: RunnerHandle, stub: RunnerServiceStub, server_spec: SpecWith, call_tool: CallTool
) -> None:
    await _start(stub, server_spec, "mcp_hang:0", timeout_s=1.0)
    assert (await call_tool("mcp_hang:0", "pid", {}, "c0")).status == ExecutionStatus.SUCCESS
    before = server_pid(runner, "mcp_hang:0")
    hung = await call_tool("mcp_hang:0", "hang", {}, "c1")
    assert hung.status == ExecutionStatus.TIMEOUT
    assert hung.tool_error is not None and hung.tool_error.category == ToolErrorCategory.TIMEOUT
    after = await call_tool("mcp_hang:0", "pid", {}, "c2")
    assert after.status == ExecutionStatus.SUCCESS and server_pid(runner, "mcp_hang:0") != before


async def test_writes_through_the_db_service_reach_the_mirror_and_reset_undoes_them(
    runner: RunnerHandle, stub: RunnerServiceStub, server_spec: SpecWith, call_tool: CallTool
) -> None:
    await _start(stub, server_spec, "mcp_state:0")
    written = await call_tool("mcp_state:0", "set_balance", {"balance": 7}, "c1")
    assert written.status == ExecutionStatus.SUCCESS, written.error_message
    trial = runner.servicer.runner.registry.get("mcp_state:0")
    assert trial.state.mirror.tables["wallet"]["me"] == {"balance": 7}  # reloaded: the version moved
    state = await stub.get_state(GetStateRequest(trial_id="mcp_state:0"))
    assert json.loads(state.state_json)["wallet"]["me"] == {"balance": 7}
    assert (await stub.reset_trial(ResetTrialRequest(trial_id="mcp_state:0"))).success
    state = await stub.get_state(GetStateRequest(trial_id="mcp_state:0"))
    assert json.loads(state.state_json)["wallet"]["me"] == {"balance": 42}


async def test_two_thousand_calls_to_a_chatty_server_stay_fast_and_cleanup_stops_it(
    stub: RunnerServiceStub, server_spec: SpecWith, call_tool: CallTool
) -> None:
    await _start(stub, server_spec, "mcp_chatty:0")
    latencies: list[float] = []
    for index in range(2000):  # each call logs 4 kB to stderr: 8 MB that must never fill a pipe
        started = time.perf_counter()
        response = await call_tool("mcp_chatty:0", "echo", {"text": str(index)}, f"c{index}")
        latencies.append(time.perf_counter() - started)
        assert response.output == str(index)
    first, last = statistics.median(latencies[:200]), statistics.median(latencies[-200:])
    assert last < first * 3 + 0.002, (first, last)
    assert (await stub.cleanup_trial(CleanupTrialRequest(trial_id="mcp_chatty:0"))).success
    assert not tool_processes()
