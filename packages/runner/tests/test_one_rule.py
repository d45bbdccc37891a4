"""One rule for every tool source (docs/faults.md#one-rule-for-every-tool-source).

A call that fails, times out, crashes or answers something the wire cannot carry leaves the trial's
state exactly as it was (the full hash before equals the hash after, even after the next successful
call), a call past its budget answers within budget + 0.5 s, and CleanupTrial leaves none of a
source's processes alive, grandchildren included. Every source is real: tool workers, the trusted
thread mode, stdio MCP servers (writing through the DB service, or keeping their tables in-process)
and tool providers, all fixture scripts run as subprocesses of a real runner.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import psutil
import pytest

from tolokaforge.contracts.runner import (
    CleanupTrialRequest,
    ExecuteToolRequest,
    ExecuteToolResponse,
    ExecutionStatus,
    GetStateRequest,
    RunnerServiceStub,
)
from tolokaforge.contracts.tool import ToolErrorCategory
from tolokaforge.runner import RunnerHandle, RunnerSettings, start_runner

from .conftest import FIXTURES, fixture_server, make_spec, register_request, server_outer_pid, server_pid

BUDGET_S = 1.0
"""The budget of every misbehaving call; a timeout must answer before BUDGET_S + 0.5 s."""

FAIL, TIMEOUT, CRASH, GARBLE = "fail", "timeout", "crash", "garble"
EXPECTED = {
    FAIL: (ExecutionStatus.ERROR, ToolErrorCategory.EXECUTION_FAILED),
    TIMEOUT: (ExecutionStatus.TIMEOUT, ToolErrorCategory.TIMEOUT),
    CRASH: (ExecutionStatus.ERROR, ToolErrorCategory.PROCESS_CRASHED),
    GARBLE: (ExecutionStatus.ERROR, ToolErrorCategory.EXECUTION_FAILED),
}


@dataclass(frozen=True)
class Source:
    """How one kind of source is registered, made to misbehave, and called harmlessly."""

    isolation: str
    spec_extra: dict[str, Any]
    tool: str
    arguments: dict[str, dict[str, Any]]
    """failure mode -> the misbehaving call's arguments (each writes before it misbehaves, where it can)."""
    harmless: tuple[str, dict[str, Any]]


def _python_spec() -> dict[str, Any]:
    misbehave = {
        "name": "misbehave",
        "description": "writes a note, then misbehaves",
        "parameters": {"type": "object", "properties": {"how": {"type": "string"}}, "required": ["how"]},
        "source": {"module_path": "tools", "class_name": "Misbehave"},
    }
    echo = {
        "name": "echo",
        "description": "echo",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        "source": {"module_path": "tools", "class_name": "Echo"},
    }
    return {
        "agent_tools": [misbehave, echo],
        "user_tools": [],
        "tool_code": {"path": str(FIXTURES / "hostile")},
        "initial_state": {"tables": {"notes": [], "vault": [{"id": "v1", "secret": "s"}]}},
    }


def _server_spec(*servers: dict[str, Any]) -> dict[str, Any]:
    return {"agent_tools": [], "user_tools": [], "tool_servers": list(servers)}


PYTHON_CALLS = {
    FAIL: {"how": "exit"},
    TIMEOUT: {"how": "sleep"},
    CRASH: {"how": "hard_exit"},
    GARBLE: {"how": "surrogate"},
}
MCP_CALLS = {
    mode: {"how": how}
    for mode, how in [(FAIL, "fail"), (TIMEOUT, "hang"), (CRASH, "crash"), (GARBLE, "garble")]
}

SOURCES = {
    "worker": Source("process", _python_spec(), "misbehave", PYTHON_CALLS, ("echo", {"text": "hi"})),
    "thread": Source(
        "thread",
        _python_spec(),
        "misbehave",
        {mode: PYTHON_CALLS[mode] for mode in (FAIL, TIMEOUT, GARBLE)},  # a crash would take the runner
        ("echo", {"text": "hi"}),
    ),
    "mcp_db": Source(
        "process",
        _server_spec(fixture_server("shop", "mcp", "mcp_server.py")),
        "misbehave",
        MCP_CALLS,
        ("echo", {"text": "hi"}),
    ),
    "mcp_syncing": Source(
        "process",
        _server_spec(fixture_server("shop", "mcp", "mcp_server.py", "--syncing")),
        "misbehave",
        MCP_CALLS,
        ("echo", {"text": "hi"}),
    ),
    "provider": Source(
        "process",
        _server_spec(fixture_server("test", "provider", "provider.py")),
        "",
        {FAIL: {}, TIMEOUT: {}, CRASH: {}, GARBLE: {}},
        ("echo", {"text": "hi"}),
    ),
}
PROVIDER_OPERATIONS = {FAIL: "flaky_mutating", TIMEOUT: "hang", CRASH: "crash", GARBLE: "garble"}

CASES = [(name, mode) for name, source in SOURCES.items() for mode in source.arguments]


class Client:
    def __init__(self, stub: RunnerServiceStub) -> None:
        self.stub = stub
        self.calls = 0

    async def register(self, trial_id: str, extra: dict[str, Any]) -> None:
        response = await self.stub.register_trial(register_request(make_spec(trial_id, **extra)))
        assert response.success, response.error

    async def call(
        self, trial_id: str, tool: str, arguments: dict[str, Any], timeout: float = 0.0
    ) -> ExecuteToolResponse:
        self.calls += 1
        return await self.stub.execute_tool(
            ExecuteToolRequest(
                trial_id=trial_id,
                tool_name=tool,
                arguments_json=json.dumps(arguments),
                executor="agent",
                call_id=f"c{self.calls}",
                timeout_seconds=timeout,
            )
        )

    async def full_hash(self, trial_id: str) -> str:
        state = await self.stub.get_state(GetStateRequest(trial_id=trial_id))
        assert state.success, state.error
        return state.full_hash

    async def tables(self, trial_id: str) -> dict[str, Any]:
        state = await self.stub.get_state(GetStateRequest(trial_id=trial_id))
        return json.loads(state.state_json)


@pytest.fixture
async def client(stub: RunnerServiceStub) -> Client:
    return Client(stub)


@pytest.mark.parametrize(("source_name", "mode"), CASES)
async def test_a_failed_call_leaves_the_state_as_it_was_and_answers_in_its_band(
    source_name: str, mode: str
) -> None:
    source = SOURCES[source_name]
    handle = await start_runner(RunnerSettings(isolation=source.isolation))  # pyright: ignore[reportArgumentType]
    channel = handle.channel()
    client = Client(RunnerServiceStub(channel))
    trial_id = f"rule_{source_name}_{mode}:0"
    try:
        await client.register(trial_id, source.spec_extra)
        before = await client.full_hash(trial_id)
        tool = source.tool or PROVIDER_OPERATIONS[mode]
        started = time.perf_counter()
        response = await client.call(trial_id, tool, source.arguments[mode], timeout=BUDGET_S)
        elapsed = time.perf_counter() - started
        assert response.tool_error is not None, response
        assert (response.status, response.tool_error.category) == EXPECTED[mode], response.error_message
        if mode == TIMEOUT:
            # The protocol's band: the answer, the kill and the restore all fit in half a second.
            assert elapsed < BUDGET_S + 0.5, elapsed
        assert await client.full_hash(trial_id) == before
        # The source still works, and what it holds now is the trial's pre-call state: a successful
        # call (which a syncing server's tables follow into the store) changes nothing either.
        harmless = await client.call(trial_id, *source.harmless)
        assert harmless.status == ExecutionStatus.SUCCESS, harmless.error_message
        assert await client.full_hash(trial_id) == before
        assert (await client.stub.cleanup_trial(CleanupTrialRequest(trial_id=trial_id))).success
    finally:
        channel.close()
        await handle.close()


@pytest.mark.parametrize("syncing", [False, True])
async def test_a_successful_server_call_is_kept(client: Client, syncing: bool) -> None:
    trial_id = f"rule_kept_{syncing}:0"
    args = ("--syncing",) if syncing else ()
    await client.register(trial_id, _server_spec(fixture_server("shop", "mcp", "mcp_server.py", *args)))
    before = await client.full_hash(trial_id)
    response = await client.call(trial_id, "misbehave", {"how": "ok"})
    assert response.status == ExecutionStatus.SUCCESS, response.error_message
    assert await client.full_hash(trial_id) != before
    assert (await client.tables(trial_id))["wallet"]["me"] == {"balance": 0}


@pytest.mark.parametrize(
    ("script", "protocol", "spawn"),
    [("mcp_server.py", "mcp", "spawn"), ("provider.py", "provider", "spawn")],
)
async def test_cleanup_leaves_no_descendant_of_a_server(
    client: Client, runner: RunnerHandle, script: str, protocol: str, spawn: str
) -> None:
    trial_id = f"rule_tree_{protocol}:0"
    await client.register(trial_id, _server_spec(fixture_server("srv", protocol, script)))
    response = await client.call(trial_id, spawn, {})
    assert response.status == ExecutionStatus.SUCCESS, response.error_message
    text = response.output
    if protocol == "provider":
        text = json.loads(text)["value"]
    # The server names them in its sandbox's pid namespace.
    pids = [server_outer_pid(runner, trial_id, int(pid)) for pid in text.split(",")]
    grandchildren = [psutil.Process(pid) for pid in pids]
    assert all(child.is_running() for child in grandchildren)
    assert (await client.stub.cleanup_trial(CleanupTrialRequest(trial_id=trial_id))).success
    # SIGKILL was sent during CleanupTrial; the kernel may take a moment to deliver and reap it.
    _, alive = psutil.wait_procs(grandchildren, timeout=10)
    assert [p for p in alive if p.status() != psutil.STATUS_ZOMBIE] == []


async def test_a_daemon_holding_a_servers_pipes_delays_no_answer(
    client: Client, runner: RunnerHandle
) -> None:
    trial_id = "rule_daemon:0"
    await client.register(trial_id, _server_spec(fixture_server("shop", "mcp", "mcp_server.py")))
    forked = await client.call(trial_id, "daemonize", {})
    assert forked.status == ExecutionStatus.SUCCESS, forked.error_message
    daemon = psutil.Process(server_outer_pid(runner, trial_id, int(forked.output)))
    before = await client.full_hash(trial_id)
    started = time.perf_counter()
    response = await client.call(trial_id, "misbehave", {"how": "hang"}, timeout=BUDGET_S)
    elapsed = time.perf_counter() - started
    assert response.status == ExecutionStatus.TIMEOUT, response.error_message
    assert elapsed < BUDGET_S + 0.5, elapsed  # the server's pipes are still open in the daemon
    assert await client.full_hash(trial_id) == before
    assert (await client.call(trial_id, "pid", {})).status == ExecutionStatus.SUCCESS
    assert (await client.stub.cleanup_trial(CleanupTrialRequest(trial_id=trial_id))).success
    daemon.wait(timeout=10)  # out of every kill's reach (docs/faults.md): it ends on its own


@pytest.mark.parametrize("how", ["reply_then_exit", "reply_then_exit_later"])
async def test_a_server_that_exits_after_replying_is_restarted_for_the_next_call(
    client: Client, runner: RunnerHandle, how: str
) -> None:
    trial_id = f"rule_exit_{how}:0"
    await client.register(trial_id, _server_spec(fixture_server("shop", "mcp", "mcp_server.py")))
    pids: set[int] = set()
    for _ in range(3):
        replied = await client.call(trial_id, "misbehave", {"how": how})
        assert replied.status == ExecutionStatus.SUCCESS, replied.error_message
        # The next call never reached the server that exited: it runs on a fresh one, not blamed.
        answered = await client.call(trial_id, "pid", {})
        assert answered.status == ExecutionStatus.SUCCESS, answered.error_message
        pids.add(server_pid(runner, trial_id))
    assert len(pids) == 3
    assert (await client.tables(trial_id))["wallet"]["me"] == {"balance": 0}


@pytest.mark.parametrize("how", ["reply_then_exit", "reply_then_exit_later"])
async def test_a_syncing_server_that_exits_after_replying_loses_that_call_only(
    client: Client, how: str
) -> None:
    trial_id = f"rule_sync_exit_{how}:0"
    spec = _server_spec(fixture_server("shop", "mcp", "mcp_server.py", "--syncing"))
    await client.register(trial_id, spec)
    before = await client.full_hash(trial_id)
    # Its tables died with it before the runner could read them back: the call cannot be kept.
    replied = await client.call(trial_id, "misbehave", {"how": how})
    assert replied.tool_error is not None
    assert replied.tool_error.category == ToolErrorCategory.PROCESS_CRASHED, replied.error_message
    assert await client.full_hash(trial_id) == before
    answered = await client.call(trial_id, "echo", {"text": "fresh"})
    assert answered.status == ExecutionStatus.SUCCESS, answered.error_message
    assert await client.full_hash(trial_id) == before
