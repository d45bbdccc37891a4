"""Workers forked from a per-code zygote keep every guarantee of spawned ones (real runner, real processes)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from tolokaforge.contracts.runner import (
    CleanupTrialRequest,
    ExecutionStatus,
    HealthCheckRequest,
    RunnerServiceStub,
)
from tolokaforge.contracts.tool import ToolErrorCategory
from tolokaforge.runner import RunnerHandle, RunnerSettings, start_runner
from tolokaforge.runner.workers.worker import ToolWorker
from tolokaforge.runner.workers.zygotes import Zygotes

from .conftest import FIXTURES, make_spec, outer_pid, pid_namespace, register_request
from .test_isolation import HOSTILE_TOOLS, Trials, hostile_tool

HOSTILE = [*HOSTILE_TOOLS, hostile_tool("remember", "Remember", {"text": {"type": "string"}})]


def _zygotes(runner: RunnerHandle) -> Zygotes:
    zygotes = runner.servicer.runner.registry.executor.isolated.zygotes
    assert zygotes is not None, "the runner forks its workers"
    return zygotes


def _worker(runner: RunnerHandle, trial_id: str) -> ToolWorker:
    workers = runner.servicer.runner.registry.get(trial_id).processes.workers
    assert workers is not None
    return workers.live()[0]


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def _until(condition: str, check: Callable[[], bool]) -> None:
    """Wait (bounded) for ``check()`` to hold: the runner notices a death on its event loop."""
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"never: {condition}")


class Hostile(Trials):
    async def register(self, trial_id: str, **task: Any) -> None:
        spec = make_spec(
            trial_id,
            agent_tools=HOSTILE,
            user_tools=[],
            tool_code={"path": str(FIXTURES / "hostile")},
            initial_state={"tables": {"notes": [], "vault": []}},
            **task,
        )
        response = await self.stub.register_trial(register_request(spec))
        assert response.success, response.error


@pytest.fixture(params=[True, False], ids=["forked", "spawned"])
async def any_runner(request: pytest.FixtureRequest) -> AsyncIterator[RunnerHandle]:
    """A runner whose workers are forked from a zygote, and one whose workers are spawned (the fallback)."""
    handle = await start_runner(RunnerSettings(fork_server=request.param))
    yield handle
    await handle.close()


@pytest.fixture
async def hostile(runner: RunnerHandle) -> AsyncIterator[Hostile]:
    channel = runner.channel()
    yield Hostile(RunnerServiceStub(channel))
    channel.close()


@pytest.fixture
async def any_hostile(any_runner: RunnerHandle) -> AsyncIterator[Hostile]:
    channel = any_runner.channel()
    yield Hostile(RunnerServiceStub(channel))
    channel.close()


async def test_a_worker_forked_from_the_zygote_runs_a_tool(hostile: Hostile, runner: RunnerHandle) -> None:
    await hostile.register("forked:0")
    worker = _worker(runner, "forked:0")
    [zygote] = _zygotes(runner).pids()
    assert worker.forked
    assert psutil.Process(worker.child.pid).ppid() == zygote  # forked, not spawned by the runner
    # The zygote is the runner's descendant (through bubblewrap, when sandboxed).
    assert os.getpid() in [parent.pid for parent in psutil.Process(zygote).parents()]
    assert os.getpgid(worker.child.pid) == worker.child.pid  # a group (and session) of its own
    assert (await hostile.call("forked:0", "echo", text="hi")).output == "hi"
    assert (await hostile.call("forked:0", "add_note", text="kept")).status == ExecutionStatus.SUCCESS
    assert await hostile.notes("forked:0") == [{"text": "kept"}]
    await hostile.register("forked:1")
    assert _zygotes(runner).pids() == [zygote]  # one zygote per code


async def test_a_forked_worker_holds_only_its_socket_and_stdio(
    hostile: Hostile, runner: RunnerHandle
) -> None:
    await hostile.register("fds:0")
    fds = json.loads((await hostile.call("fds:0", "probe", what="fds", arg="")).output)
    assert sorted(fds, key=int)[:3] == ["0", "1", "2"] and fds["0"] == os.devnull
    assert len(fds) == 4, fds  # stdio and the worker's socket; nothing of the zygote's
    assert [target for target in fds.values() if target.startswith("socket:")] == [fds[max(fds, key=int)]]
    assert fds["1"] == fds["2"] and fds["2"].endswith(".worker.log")


async def test_forked_workers_get_their_limits_and_no_network(hostile: Hostile, runner: RunnerHandle) -> None:
    await hostile.register("net:0")
    await hostile.register("net:1")
    adapters = (await hostile.stub.health_check(HealthCheckRequest())).available_adapters
    assert "limit:cpu_time=3600" in adapters  # set in the worker, not left to the zygote
    first = (await hostile.call("net:0", "probe", what="netns", arg="")).output
    second = (await hostile.call("net:1", "probe", what="netns", arg="")).output
    [zygote] = _zygotes(runner).pids()
    if "limit:network=namespace" in adapters or "limit:network=user+network namespace" in adapters:
        # The zygote's namespace (no interface up), never the runner's.
        assert first == second == os.readlink(f"/proc/{zygote}/ns/net") != os.readlink("/proc/self/ns/net")
        network = (await hostile.call("net:0", "probe", what="connect", arg=runner.address)).output
        assert network.startswith("refused"), network
    env = (await hostile.call("net:0", "probe", what="env", arg="HOME")).output
    assert env == str(runner.servicer.runner.registry.get("net:0").files.workspace)


async def test_two_trials_never_share_module_globals(hostile: Hostile, runner: RunnerHandle) -> None:
    await hostile.register("globals:0")
    await hostile.register("globals:1")
    assert (await hostile.call("globals:0", "remember", text="a")).output == "a"
    assert (await hostile.call("globals:1", "remember", text="b")).output == "b"
    assert _worker(runner, "globals:0").forked and _worker(runner, "globals:1").forked
    assert (await hostile.call("globals:0", "remember", text="c")).output == "a,c"
    await hostile.register("globals:2")
    assert (await hostile.call("globals:2", "remember", text="d")).output == "d"


async def test_a_timeout_kills_the_worker_and_a_grandchild_that_left_its_group(
    any_hostile: Hostile, any_runner: RunnerHandle
) -> None:
    await any_hostile.register("grand:0")
    worker = _worker(any_runner, "grand:0")
    namespace = pid_namespace(worker.child.pid)
    response = await any_hostile.call("grand:0", "misbehave", how="fork_sleep")
    assert response.status == ExecutionStatus.TIMEOUT, response
    workspace = any_runner.servicer.runner.registry.get("grand:0").files.workspace
    assert workspace is not None
    # The tool wrote the pid its sandbox's namespace gave the grandchild.
    inner = int(Path(workspace, "grandchild.pid").read_text())
    await _until(
        "the grandchild is dead", lambda: (found := outer_pid(namespace, inner)) is None or _gone(found)
    )
    assert _gone(worker.child.pid)
    assert (await any_hostile.call("grand:0", "echo", text="fresh")).output == "fresh"
    assert _worker(any_runner, "grand:0") is not worker


@pytest.mark.parametrize(
    ("how", "code", "name"), [("segfault", -11, "SIGSEGV"), ("hard_exit", 3, "exit code 3")]
)
async def test_a_crash_is_classified_with_its_exit_status(
    any_hostile: Hostile, any_runner: RunnerHandle, how: str, code: int, name: str
) -> None:
    await any_hostile.register("crash:0")
    response = await any_hostile.call("crash:0", "misbehave", how=how)
    assert (
        response.tool_error is not None and response.tool_error.category == ToolErrorCategory.PROCESS_CRASHED
    )
    assert name in response.tool_error.message
    assert response.metrics is not None and response.metrics.exit_code == code
    assert (await any_hostile.call("crash:0", "echo", text="again")).output == "again"


async def test_a_zygote_killed_with_sigkill_is_replaced(hostile: Hostile, runner: RunnerHandle) -> None:
    await hostile.register("before:0")
    worker = _worker(runner, "before:0")
    [zygote] = _zygotes(runner).pids()
    os.kill(zygote, signal.SIGKILL)
    await _until("the zygote is noticed dead", lambda: zygote not in _zygotes(runner).pids())
    await _until("its worker is noticed dead", lambda: not worker.alive)
    # The trial whose worker died with the zygote gets a fresh one; a new trial a new zygote.
    assert (await hostile.call("before:0", "echo", text="still")).output == "still"
    await hostile.register("after:0")
    assert (await hostile.call("after:0", "echo", text="served")).output == "served"
    [replacement] = _zygotes(runner).pids()
    assert replacement != zygote
    assert psutil.Process(_worker(runner, "after:0").child.pid).ppid() == replacement


async def test_code_whose_import_starts_a_thread_is_spawned_not_forked(
    hostile: Hostile, runner: RunnerHandle
) -> None:
    spec = make_spec(
        "threaded:0",
        agent_tools=[hostile_tool("echo", "Echo", {"text": {"type": "string"}})],
        user_tools=[],
        tool_code={"path": str(FIXTURES / "threaded")},
    )
    assert (await hostile.stub.register_trial(register_request(spec))).success
    assert not _worker(runner, "threaded:0").forked
    assert any("thread" in why for why in _zygotes(runner).unforkable.values())
    assert (await hostile.call("threaded:0", "echo", text="spawned")).output == "spawned"


async def test_an_idle_zygote_is_stopped_and_the_runner_stops_the_rest() -> None:
    runner = await start_runner(RunnerSettings())
    channel = runner.channel()
    try:
        hostile = Hostile(RunnerServiceStub(channel))
        zygotes = _zygotes(runner)
        zygotes.idle_s = 0.2
        await hostile.register("idle:0")
        [zygote] = zygotes.pids()
        assert (await hostile.stub.cleanup_trial(CleanupTrialRequest(trial_id="idle:0"))).success
        await _until("the idle zygote is stopped", lambda: _gone(zygote) and not zygotes.pids())
        zygotes.idle_s = 3600.0
        await hostile.register("idle:1")
        assert (await hostile.call("idle:1", "echo", text="x")).output == "x"  # started again on the need
        [again] = zygotes.pids()
        worker = _worker(runner, "idle:1").child.pid
    finally:
        channel.close()
        await runner.close()
    assert _gone(again) and _gone(worker)


async def test_tasks_using_other_tools_of_the_same_modules_share_a_zygote(
    hostile: Hostile, runner: RunnerHandle
) -> None:
    await hostile.register("all:0")
    [zygote] = _zygotes(runner).pids()
    echo_only = make_spec(
        "echo:0",
        agent_tools=[hostile_tool("echo", "Echo", {"text": {"type": "string"}})],
        user_tools=[],
        tool_code={"path": str(FIXTURES / "hostile")},
        initial_state={"tables": {"notes": [], "vault": []}},  # all:0's: a zygote holds one initial state
    )
    assert (await hostile.stub.register_trial(register_request(echo_only))).success
    assert (await hostile.call("echo:0", "echo", text="x")).output == "x"
    assert _worker(runner, "echo:0").forked and _zygotes(runner).pids() == [zygote]
    # A class the module lacks is the trial's problem, found in its worker as a spawned one finds it.
    missing = make_spec(
        "nope:0",
        agent_tools=[hostile_tool("nope", "Nope", {})],
        user_tools=[],
        tool_code={"path": str(FIXTURES / "hostile")},
        initial_state={"tables": {"notes": [], "vault": []}},
    )
    response = await hostile.stub.register_trial(register_request(missing))
    assert not response.success and "has no class 'Nope'" in response.error, response.error
    assert _zygotes(runner).pids() == [zygote] and not _zygotes(runner).unforkable


async def test_a_module_that_cannot_import_is_reported_as_before(
    hostile: Hostile, runner: RunnerHandle
) -> None:
    spec = make_spec(
        "broken:0",
        agent_tools=[
            {
                **hostile_tool("echo", "Echo", {"text": {"type": "string"}}),
                "source": {"module_path": "absent", "class_name": "Echo"},
            }
        ],
        user_tools=[],
        tool_code={"path": str(FIXTURES / "hostile")},
    )
    response = await hostile.stub.register_trial(register_request(spec))
    assert not response.success and "module 'absent' not found in the task's code" in response.error
    assert any("absent" in why for why in _zygotes(runner).unforkable.values())
