"""Tool-provider plugins through a real runner: handshake, Invoke, and the kernel's reactions.

Every provider here is a real subprocess (fixtures/servers/provider.py) that misbehaves on demand.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import psutil

from tolokaforge.contracts.runner import ExecuteToolResponse, ExecutionStatus, RunnerServiceStub
from tolokaforge.contracts.tool import ToolErrorCategory
from tolokaforge.runner import RunnerHandle

from .conftest import fixture_server, register_request, server_pid

CallTool = Callable[..., Awaitable[ExecuteToolResponse]]
SpecWith = Callable[..., dict[str, Any]]


def _details(response: ExecuteToolResponse) -> dict[str, Any]:
    assert response.tool_error is not None
    return json.loads(response.tool_error.details_json) if response.tool_error.details_json else {}


async def _start(
    stub: RunnerServiceStub, server_spec: SpecWith, trial_id: str, *args: str, **extra: Any
) -> None:
    spec = server_spec(trial_id, fixture_server("test", "provider", "provider.py", *args, **extra))
    response = await stub.register_trial(register_request(spec))
    assert response.success, response.error
    names = [schema.name for schema in response.tool_schemas]
    assert "echo" in names and "crash" in names


async def test_handshake_schema_and_a_successful_call(
    runner: RunnerHandle, stub: RunnerServiceStub, server_spec: SpecWith, call_tool: CallTool
) -> None:
    await _start(stub, server_spec, "prov_ok:0")
    response = await call_tool("prov_ok:0", "echo", {"text": "hi"}, "c1")
    assert response.status == ExecutionStatus.SUCCESS
    assert json.loads(response.output) == {"value": "hi"}
    record = runner.servicer.runner.registry.get("prov_ok:0").history[-1]
    assert (record.status, record.attempts, record.error_category) == ("success", 1, None)


async def test_a_provider_exiting_mid_invoke_is_process_crashed_and_restarted(
    runner: RunnerHandle, stub: RunnerServiceStub, server_spec: SpecWith, call_tool: CallTool
) -> None:
    await _start(stub, server_spec, "prov_crash:0")
    before = await _pid(runner, call_tool, "prov_crash:0", "c0")
    response = await call_tool("prov_crash:0", "crash", {}, "c1")
    assert response.status == ExecutionStatus.ERROR
    assert response.tool_error is not None
    assert response.tool_error.category == ToolErrorCategory.PROCESS_CRASHED
    assert _details(response)["exit_code"] == 3
    assert response.metrics is not None and response.metrics.exit_code == 3
    record = runner.servicer.runner.registry.get("prov_crash:0").history[-1]
    assert record.error_category == "process_crashed"
    # The next call runs on a fresh process.
    after = await _pid(runner, call_tool, "prov_crash:0", "c2")
    assert after != before and not psutil.pid_exists(before)


async def test_a_hanging_provider_times_out_and_is_replaced(
    runner: RunnerHandle, stub: RunnerServiceStub, server_spec: SpecWith, call_tool: CallTool
) -> None:
    await _start(stub, server_spec, "prov_hang:0", timeout_s=1.0)
    before = await _pid(runner, call_tool, "prov_hang:0", "c0")
    response = await call_tool("prov_hang:0", "hang", {}, "c1")
    assert response.status == ExecutionStatus.TIMEOUT
    assert response.tool_error is not None and response.tool_error.category == ToolErrorCategory.TIMEOUT
    assert not psutil.pid_exists(before)  # killed at the timeout, not at the next call
    after = await _pid(runner, call_tool, "prov_hang:0", "c2")
    assert after != before


async def test_output_violating_the_output_schema_is_never_passed_on(
    stub: RunnerServiceStub, server_spec: SpecWith, call_tool: CallTool
) -> None:
    await _start(stub, server_spec, "prov_schema:0")
    response = await call_tool("prov_schema:0", "bad_output", {}, "c1")
    assert response.status == ExecutionStatus.ERROR and response.output == ""
    assert response.tool_error is not None and response.tool_error.category == ToolErrorCategory.UNKNOWN
    assert "output_schema" in _details(response)["protocol_violation"]
    assert "42" in _details(response)["raw"]


async def test_retryable_failures_are_retried_only_behind_the_idempotent_gate(
    runner: RunnerHandle, stub: RunnerServiceStub, server_spec: SpecWith, call_tool: CallTool
) -> None:
    await _start(stub, server_spec, "prov_retry:0")
    history = runner.servicer.runner.registry.get("prov_retry:0").history

    retried = await call_tool("prov_retry:0", "flaky_idempotent", {}, "c1")
    assert retried.status == ExecutionStatus.SUCCESS
    assert (len(history), history[-1].attempts, history[-1].status) == (1, 2, "success")

    for index, operation in enumerate(("flaky_mutating", "flaky_interactive")):
        surfaced = await call_tool("prov_retry:0", operation, {}, f"c{index + 2}")
        assert surfaced.status == ExecutionStatus.ERROR
        assert surfaced.tool_error is not None
        assert surfaced.tool_error.category == ToolErrorCategory.EXECUTION_FAILED
        assert surfaced.tool_error.retryable
        assert (history[-1].attempts, history[-1].error_category) == (1, "execution_failed")


async def test_concurrency_conflict_is_retried_serialized(
    runner: RunnerHandle, stub: RunnerServiceStub, server_spec: SpecWith, call_tool: CallTool
) -> None:
    await _start(stub, server_spec, "prov_conflict:0")
    response = await call_tool("prov_conflict:0", "conflict", {"key": "k1"}, "c1")
    assert response.status == ExecutionStatus.SUCCESS
    assert runner.servicer.runner.registry.get("prov_conflict:0").history[-1].attempts == 2


async def test_cancelled_is_not_shown_as_a_failure(
    runner: RunnerHandle, stub: RunnerServiceStub, server_spec: SpecWith, call_tool: CallTool
) -> None:
    await _start(stub, server_spec, "prov_cancel:0")
    response = await call_tool("prov_cancel:0", "cancel", {}, "c1")
    assert response.status == ExecutionStatus.SUCCESS and response.tool_error is None
    assert "cancelled" in response.output
    assert runner.servicer.runner.registry.get("prov_cancel:0").history[-1].error_category == "cancelled"


async def test_protocol_violations_are_unknown_with_details(
    stub: RunnerServiceStub, server_spec: SpecWith, call_tool: CallTool
) -> None:
    await _start(stub, server_spec, "prov_violate:0")
    stray = await call_tool("prov_violate:0", "stray_exit_status", {}, "c1")
    assert stray.tool_error is not None and stray.tool_error.category == ToolErrorCategory.UNKNOWN
    assert "exit_status" in _details(stray)["protocol_violation"]
    claimed = await call_tool("prov_violate:0", "claims_crash", {}, "c2")
    # process_crashed is the kernel's word only: a provider saying it is a protocol violation.
    assert claimed.tool_error is not None and claimed.tool_error.category == ToolErrorCategory.UNKNOWN
    assert "process_crashed" in _details(claimed)["protocol_violation"]


async def test_recurring_crashes_open_the_circuit_breaker(
    stub: RunnerServiceStub, server_spec: SpecWith, call_tool: CallTool
) -> None:
    await _start(stub, server_spec, "prov_breaker:0")
    for index in range(3):
        crashed = await call_tool("prov_breaker:0", "crash", {}, f"c{index}")
        assert _details(crashed)["consecutive_crashes"] == index + 1
    # Open: even a harmless call fails fast, without starting the provider again.
    blocked = await call_tool("prov_breaker:0", "echo", {"text": "x"}, "c9")
    assert blocked.tool_error is not None
    assert blocked.tool_error.category == ToolErrorCategory.PROCESS_CRASHED
    assert _details(blocked)["circuit_breaker"] == "open"


async def test_a_protocol_version_mismatch_fails_registration_and_leaves_no_process(
    stub: RunnerServiceStub, server_spec: SpecWith
) -> None:
    spec = server_spec("prov_version:0", fixture_server("test", "provider", "provider.py", "--version", "2"))
    response = await stub.register_trial(register_request(spec))
    assert not response.success and "protocol version 2" in response.error
    assert not psutil.Process().children(recursive=True)


async def test_cleanup_stops_the_provider(
    runner: RunnerHandle, stub: RunnerServiceStub, server_spec: SpecWith, call_tool: CallTool
) -> None:
    from tolokaforge.contracts.runner import CleanupTrialRequest

    await _start(stub, server_spec, "prov_cleanup:0", "--chatty")
    pid = await _pid(runner, call_tool, "prov_cleanup:0", "c0")
    for index in range(200):  # a provider logging 2 kB per call never blocks on its stderr pipe
        assert (
            await call_tool("prov_cleanup:0", "echo", {"text": "x"}, f"c{index + 1}")
        ).status == ExecutionStatus.SUCCESS
    assert (await stub.cleanup_trial(CleanupTrialRequest(trial_id="prov_cleanup:0"))).success
    assert not psutil.pid_exists(pid)


async def _pid(runner: RunnerHandle, call_tool: CallTool, trial_id: str, call_id: str) -> int:
    """The provider's pid as the runner sees it, once it answered a call (its own pid is its sandbox's)."""
    answered = await call_tool(trial_id, "pid", {}, call_id)
    assert answered.status == ExecutionStatus.SUCCESS, answered.error_message
    return server_pid(runner, trial_id)
