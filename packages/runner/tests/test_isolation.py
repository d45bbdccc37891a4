"""Pack code runs isolated: a misbehaving tool costs one call, never the runner (real workers, real runner)."""

from __future__ import annotations

import asyncio
import json
import math
import os
import time
from collections.abc import AsyncIterator
from typing import Any

import psutil
import pytest

from tolokaforge.contracts.runner import (
    CleanupTrialRequest,
    ExecuteToolRequest,
    ExecuteToolResponse,
    ExecutionStatus,
    GetStateRequest,
    GradeTrialRequest,
    HealthCheckRequest,
    RunnerServiceStub,
    ToolMetrics,
)
from tolokaforge.contracts.tool import ToolError, ToolErrorCategory
from tolokaforge.runner import RunnerHandle, RunnerSettings, start_runner
from tolokaforge.runner.calls.executor import MAX_BUDGET_S, clamp_budget

from .conftest import FIXTURES, make_spec, outer_pid, pid_namespace, register_request

STRING = {"type": "string"}


def hostile_tool(
    name: str, class_name: str, properties: dict[str, Any], *, timeout_s: float | None = None
) -> dict[str, Any]:
    tool: dict[str, Any] = {
        "name": name,
        "description": f"hostile fixture {name}",
        "parameters": {"type": "object", "properties": properties, "required": sorted(properties)},
        "source": {"module_path": "tools", "class_name": class_name},
    }
    if timeout_s is not None:
        tool["timeout_s"] = timeout_s
    return tool


HOSTILE_TOOLS = [
    hostile_tool("echo", "Echo", {"text": STRING}),
    hostile_tool("count", "Count", {}),
    hostile_tool("add_note", "AddNote", {"text": STRING}),
    hostile_tool("misbehave", "Misbehave", {"how": STRING}, timeout_s=1.0),
    hostile_tool("fork_linger", "ForkLinger", {}),
    hostile_tool("probe", "Probe", {"what": STRING, "arg": STRING}),
]


def hostile_spec(trial_id: str, secret: str = "", **task: Any) -> dict[str, Any]:
    spec = make_spec(
        trial_id,
        agent_tools=HOSTILE_TOOLS,
        user_tools=[],
        tool_code={"path": str(FIXTURES / "hostile")},
        initial_state={
            "tables": {"notes": [], "vault": [{"id": "v1", "secret": secret or f"{trial_id}-secret"}]}
        },
        **task,
    )
    return spec


class Trials:
    def __init__(self, stub: RunnerServiceStub) -> None:
        self.stub = stub
        self.calls = 0

    async def register(self, trial_id: str, **task: Any) -> None:
        response = await self.stub.register_trial(register_request(hostile_spec(trial_id, **task)))
        assert response.success, response.error

    async def call(
        self, trial_id: str, tool: str, timeout: float = 0.0, **arguments: Any
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

    async def notes(self, trial_id: str) -> list[Any]:
        state = await self.stub.get_state(GetStateRequest(trial_id=trial_id))
        return json.loads(state.state_json)["notes"]


@pytest.fixture
async def trials(stub: RunnerServiceStub) -> Trials:
    return Trials(stub)


def _error(response: ExecuteToolResponse) -> ToolError:
    assert response.tool_error is not None, response
    return response.tool_error


def _metrics(response: ExecuteToolResponse) -> ToolMetrics:
    assert response.metrics is not None, response
    return response.metrics


def _worker_pids(runner: RunnerHandle, trial_id: str) -> list[int]:
    workers = runner.servicer.runner.registry.get(trial_id).processes.workers
    assert workers is not None
    return workers.pids()


@pytest.mark.parametrize(
    ("how", "category"),
    [
        ("exit", ToolErrorCategory.EXECUTION_FAILED),
        ("keyboard_interrupt", ToolErrorCategory.EXECUTION_FAILED),
        ("base_exception", ToolErrorCategory.EXECUTION_FAILED),
        ("memory", ToolErrorCategory.EXECUTION_FAILED),  # MemoryError under RLIMIT_AS
        ("open_files", ToolErrorCategory.EXECUTION_FAILED),  # EMFILE under RLIMIT_NOFILE
        ("hard_exit", ToolErrorCategory.PROCESS_CRASHED),
        ("segfault", ToolErrorCategory.PROCESS_CRASHED),
        ("sigkill_self", ToolErrorCategory.PROCESS_CRASHED),
    ],
)
async def test_a_tool_that_exits_crashes_or_raises_costs_one_call(
    trials: Trials, stub: RunnerServiceStub, how: str, category: ToolErrorCategory
) -> None:
    await trials.register("bad:0")
    assert (await trials.call("bad:0", "add_note", text="kept")).status == ExecutionStatus.SUCCESS
    response = await trials.call("bad:0", "misbehave", how=how)
    assert response.status == ExecutionStatus.ERROR, response
    assert _error(response).category == category, _error(response).message
    assert await trials.notes("bad:0") == [{"text": "kept"}]  # nothing of the failed call landed
    again = await trials.call("bad:0", "add_note", text="after")
    assert again.status == ExecutionStatus.SUCCESS, again.error_message
    assert await trials.notes("bad:0") == [{"text": "kept"}, {"text": "after"}]
    assert (await stub.health_check(HealthCheckRequest())).status == "healthy"


async def test_a_crash_reports_the_signal_and_exit_code(trials: Trials) -> None:
    await trials.register("crash:0")
    response = await trials.call("crash:0", "misbehave", how="segfault")
    assert "SIGSEGV" in _error(response).message
    assert _metrics(response).exit_code == -11
    hard = await trials.call("crash:0", "misbehave", how="hard_exit")
    assert "exit code 3" in _error(hard).message and _metrics(hard).exit_code == 3


async def test_a_call_past_its_budget_kills_its_worker_and_changes_nothing(
    trials: Trials, runner: RunnerHandle
) -> None:
    await trials.register("slow:0")
    [pid] = _worker_pids(runner, "slow:0")
    started = time.perf_counter()
    response = await trials.call("slow:0", "misbehave", how="sleep")
    elapsed = time.perf_counter() - started
    assert (
        response.status == ExecutionStatus.TIMEOUT and _error(response).category == ToolErrorCategory.TIMEOUT
    )
    assert elapsed < 1.0 + 2.0, (
        elapsed
    )  # the declared 1 s budget (the band itself is measured in tools/bench)
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert await trials.notes("slow:0") == []
    assert (await trials.call("slow:0", "echo", text="alive")).output == "alive"
    assert _worker_pids(runner, "slow:0") != [pid]  # a fresh worker, rebuilt from the store


async def test_a_cancelled_call_never_answers_the_next_one(trials: Trials) -> None:
    await trials.register("cancel:0")
    request = ExecuteToolRequest(
        trial_id="cancel:0",
        tool_name="misbehave",
        arguments_json=json.dumps({"how": "nap"}),
        executor="agent",
        call_id="napping",
    )
    with pytest.raises(asyncio.TimeoutError):
        await trials.stub.execute_tool(request, timeout=0.2)  # the client gives up mid-call
    await asyncio.sleep(0.6)  # the tool has answered by now, to a call nobody waits for
    assert (await trials.call("cancel:0", "echo", text="fresh")).output == "fresh"
    assert await trials.notes("cancel:0") == []


async def test_children_a_tool_forks_die_with_its_trial(
    trials: Trials, stub: RunnerServiceStub, runner: RunnerHandle
) -> None:
    await trials.register("fork:0")
    namespace = pid_namespace(_worker_pids(runner, "fork:0")[0])
    response = await trials.call("fork:0", "fork_linger")
    assert response.status == ExecutionStatus.SUCCESS, response.error_message
    # The tool names its child in the sandbox's pid namespace.
    found = outer_pid(namespace, int(response.output))
    assert found is not None
    child = psutil.Process(found)
    assert child.is_running()
    assert (await trials.call("fork:0", "echo", text="next")).output == "next"
    assert (await stub.cleanup_trial(CleanupTrialRequest(trial_id="fork:0"))).success
    child.wait(timeout=5)
    assert not child.is_running()


async def test_module_state_is_fresh_per_trial(trials: Trials) -> None:
    await trials.register("count:0")
    await trials.register("count:1")
    assert [(await trials.call("count:0", "count")).output for _ in range(3)] == ["1", "2", "3"]
    assert (await trials.call("count:1", "count")).output == "1"


async def test_a_tool_sees_neither_other_trials_nor_the_runner(
    trials: Trials, runner: RunnerHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOLOKAFORGE_TEST_API_KEY", "sk-must-not-leak")
    await trials.register("victim:0", secret="victim-secret")
    await trials.register("spy:0")
    assert (await trials.call("spy:0", "probe", what="snoop", arg="victim-secret")).output == "absent"
    assert (await trials.call("spy:0", "probe", what="snoop", arg="spy:0-secret")).output == "found"
    assert (
        await trials.call("spy:0", "probe", what="env", arg="TOLOKAFORGE_TEST_API_KEY")
    ).output == "<unset>"
    workspace = runner.servicer.runner.registry.get("spy:0").files.workspace
    assert (await trials.call("spy:0", "probe", what="cwd", arg="")).output == str(workspace)
    network = (await trials.call("spy:0", "probe", what="connect", arg=runner.address)).output
    health = await trials.stub.health_check(HealthCheckRequest())
    if "limit:network=allowed" not in health.available_adapters and any(
        a.startswith("limit:network=namespace") for a in health.available_adapters
    ):
        assert network.startswith("refused"), network


async def test_a_tool_cannot_replace_the_grader(trials: Trials, stub: RunnerServiceStub) -> None:
    golden = [{"tool_name": "add_note", "arguments": {"text": "expected"}}]
    grading = {
        "combine_method": "weighted",
        "weights": {"state_checks": 1.0},
        "pass_threshold": 1.0,
        "state_checks": {"hash_enabled": True, "golden_actions": golden},
    }
    await trials.register("cheat:0", grading=grading)
    await trials.register("honest:0", grading=grading)
    assert (await trials.call("cheat:0", "probe", what="patch_grader", arg="")).output == "patched"
    await trials.call("honest:0", "add_note", text="wrong")
    response = await stub.grade_trial(GradeTrialRequest(trial_id="honest:0", termination_reason="agent_done"))
    assert response.success, response.error
    assert response.grade is not None and response.grade.score == 0.0


async def test_seventy_wedged_trials_leave_a_normal_trial_answering(
    trials: Trials, stub: RunnerServiceStub
) -> None:
    await trials.register("normal:0")
    wedged = [f"wedged:{index}" for index in range(70)]
    await asyncio.gather(*(trials.register(trial_id) for trial_id in wedged))
    sleeping = [asyncio.create_task(trials.call(trial_id, "misbehave", how="sleep")) for trial_id in wedged]
    await asyncio.sleep(0.2)
    started = time.perf_counter()
    for index in range(20):
        response = await trials.call("normal:0", "echo", text=str(index))
        assert response.output == str(index), response.error_message
    assert time.perf_counter() - started < 10.0
    assert {r.status for r in await asyncio.gather(*sleeping)} == {ExecutionStatus.TIMEOUT}
    assert (await trials.call("normal:0", "echo", text="after")).output == "after"
    assert (await stub.health_check(HealthCheckRequest())).status == "healthy"


async def test_a_spinning_tool_does_not_stop_another_trial(trials: Trials) -> None:
    await trials.register("spin:0")
    await trials.register("calm:0")
    spinning = asyncio.create_task(trials.call("spin:0", "misbehave", how="spin"))
    await asyncio.sleep(0.1)
    for index in range(20):
        assert (await trials.call("calm:0", "echo", text=str(index))).output == str(index)
    assert (await spinning).status == ExecutionStatus.TIMEOUT


def test_non_finite_and_absurd_budgets_are_clamped_to_the_ceiling() -> None:
    for value in (math.inf, -math.inf, math.nan, 1e308, MAX_BUDGET_S + 1, 0.0, -1.0):
        assert clamp_budget(value) == MAX_BUDGET_S
    assert clamp_budget(2.5) == 2.5


async def test_non_finite_budgets_on_the_wire_still_band_the_call(trials: Trials) -> None:
    await trials.register("inf:0", secret="")
    assert (await trials.call("inf:0", "echo", timeout=math.inf, text="ok")).output == "ok"
    assert (await trials.call("inf:0", "echo", timeout=math.nan, text="ok")).output == "ok"


# --- trusted mode -------------------------------------------------------------------------------


@pytest.fixture
async def trusted() -> AsyncIterator[tuple[RunnerHandle, Trials]]:
    handle = await start_runner(RunnerSettings(isolation="thread", max_tool_threads=4))
    channel = handle.channel()
    yield handle, Trials(RunnerServiceStub(channel))
    channel.close()
    await handle.close()


async def test_trusted_mode_replaces_abandoned_threads_and_says_degraded(
    trusted: tuple[RunnerHandle, Trials],
) -> None:
    _, trials = trusted
    await trials.register("t:0")
    health = await trials.stub.health_check(HealthCheckRequest())
    assert health.status == "healthy" and "isolation:thread" in health.available_adapters
    # More wedged calls than the pool has threads: each abandoned thread is replaced at once.
    for _ in range(6):
        assert (await trials.call("t:0", "misbehave", how="sleep")).status == ExecutionStatus.TIMEOUT
    assert (await trials.call("t:0", "echo", text="still here")).output == "still here"
    health = await trials.stub.health_check(HealthCheckRequest())
    assert health.status == "degraded" and "abandoned_tool_threads:6" in health.available_adapters
    assert await trials.notes("t:0") == []


@pytest.mark.parametrize("how", ["exit", "keyboard_interrupt", "base_exception"])
async def test_trusted_mode_survives_base_exceptions(trusted: tuple[RunnerHandle, Trials], how: str) -> None:
    _, trials = trusted
    await trials.register("t:0")
    response = await trials.call("t:0", "misbehave", how=how)
    assert (
        response.status == ExecutionStatus.ERROR
        and _error(response).category == ToolErrorCategory.EXECUTION_FAILED
    )
    assert (await trials.call("t:0", "echo", text="ok")).output == "ok"
    assert os.getpid() == psutil.Process().pid  # the test process (the runner) is alive


async def test_health_says_what_holds_before_any_trial(stub: RunnerServiceStub) -> None:
    adapters = (await stub.health_check(HealthCheckRequest())).available_adapters
    assert "isolation:sandbox" in adapters
    network = [a for a in adapters if a.startswith("limit:network=")]
    assert network == ["limit:network=namespace (bubblewrap)"]
    assert "sandbox:uid=65534" in adapters or os.geteuid() != 0
    assert any(a.startswith("limit:address_space=") for a in adapters)
