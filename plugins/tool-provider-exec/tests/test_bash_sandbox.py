"""``bash`` through the runner's real path: its exec provider in the OS sandbox (bubblewrap, seccomp,
Landlock, the trial's cgroup), one provider and one shell per trial.

What a command sees is the trial's workspace (also at /env/fs/agent-visible) and the system: not the
machine's secrets, not another trial's workspace; and cleanup leaves none of its processes behind.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tolokaforge.contracts.runner import (
    CleanupTrialRequest,
    ExecuteToolRequest,
    ExecutionStatus,
    RegisterTrialRequest,
)
from tolokaforge.core.protocol import ENGINE_PROTOCOL_VERSION
from tolokaforge.runner import RunnerHandle, RunnerSettings, start_runner

EXEC = [sys.executable, "-m", "tolokaforge_provider_exec.server"]


@pytest.fixture
async def runner(tmp_path: Path) -> AsyncIterator[RunnerHandle]:
    handle = await start_runner(RunnerSettings(work_dir=tmp_path, isolation="sandbox"), serve=False)
    try:
        yield handle
    finally:
        await handle.close()


@pytest.fixture(params=["process", "sandbox"])
async def any_runner(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[RunnerHandle]:
    handle = await start_runner(RunnerSettings(work_dir=tmp_path, isolation=request.param), serve=False)
    try:
        yield handle
    finally:
        await handle.close()


async def _register(runner: RunnerHandle, trial_id: str, **server_fields: Any) -> None:
    stub = runner.servicer
    server = {"name": "exec", "protocol": "provider", "command": EXEC, "enabled": ["bash"], **server_fields}
    spec = {
        "trial_id": trial_id,
        "task": {
            "task_id": trial_id.split(":")[0],
            "agent_tools": [],
            "user_tools": [],
            "tool_servers": [server],
        },
    }
    registered = await stub.register_trial(
        RegisterTrialRequest(
            trial_id=trial_id,
            trial_spec_json=json.dumps(spec),
            engine_protocol_version=ENGINE_PROTOCOL_VERSION,
        )
    )
    assert registered.success, registered.error
    assert [schema.name for schema in registered.tool_schemas] == ["bash"]


async def _bash(runner: RunnerHandle, trial_id: str, command: str) -> str:
    reply = await runner.servicer.execute_tool(
        ExecuteToolRequest(
            trial_id=trial_id,
            tool_name="bash",
            arguments_json=json.dumps({"command": command}),
            executor="agent",
            call_id=secrets.token_hex(4),
        )
    )
    assert reply.status == ExecutionStatus.SUCCESS, reply
    return reply.output


async def test_the_shell_sees_its_workspace_and_nothing_it_should_not(runner: RunnerHandle) -> None:
    await _register(runner, "a:0")
    await _register(runner, "b:0")
    workspace_a = runner.servicer.runner.registry.get("a:0").files.workspace
    workspace_b = runner.servicer.runner.registry.get("b:0").files.workspace
    assert workspace_a is not None and workspace_b is not None
    assert await _bash(runner, "a:0", "pwd") == str(workspace_a)
    # The shell's own files are not in the workspace, where graders would read them.
    assert await _bash(runner, "a:0", "mktemp > /dev/null; ls -A") == "[no output]"
    # The public packs' name for the workspace leads to the same files.
    await _bash(runner, "a:0", "echo mine > /env/fs/agent-visible/note.txt")
    assert (workspace_a / "note.txt").read_text() == "mine\n"
    assert await _bash(runner, "a:0", "cat note.txt") == "mine"
    # Another trial's workspace does not exist in this sandbox, at its real path or any other.
    other = await _bash(runner, "b:0", f"cat {workspace_a}/note.txt; cat /env/fs/agent-visible/note.txt")
    assert "No such file or directory" in other and "mine" not in other, other
    assert "[exit code: 1]" in other
    # The machine's secrets and the home of whoever runs the runner are not there either.
    secrets_text = await _bash(runner, "b:0", "cat /etc/shadow; ls /root; id -u")
    assert "cat: /etc/shadow: No such file or directory" in secrets_text, secrets_text
    # /root exists only as the way to the interpreter, bound in read-only; Landlock refuses a listing.
    assert "ls: cannot open directory '/root'" in secrets_text, secrets_text
    assert secrets_text.startswith("65534"), secrets_text
    # The provider (the shell's parent, same user, same sandbox) holds the runner's token in memory.
    provider = await _bash(runner, "b:0", "cat /proc/$PPID/environ; head -c 1 /proc/$PPID/mem")
    assert provider.count("Permission denied") == 2, provider
    # Writing outside the workspace fails: the system is read-only.
    system = await _bash(runner, "b:0", "touch /usr/escape")
    assert "[exit code: 1]" in system and not Path("/usr/escape").exists(), system


async def test_cleanup_leaves_no_process_of_the_trial(any_runner: RunnerHandle) -> None:
    # Without the sandbox too: no pid namespace or cgroup ends the shell there, the provider does.
    stub = any_runner.servicer
    await _register(any_runner, "c:0")
    # An odd duration marks this trial's sleepers among the machine's processes.
    await _bash(any_runner, "c:0", "export A=1; (sleep 4242 &) ; sleep 4243 & echo started")
    assert await _bash(any_runner, "c:0", "echo $A") == "1"  # the same shell for the trial's second call
    assert _sleepers(), "the commands did not start"
    await stub.cleanup_trial(CleanupTrialRequest(trial_id="c:0"))
    for _ in range(100):  # a killed process may need a moment to be scheduled and die
        if not _sleepers():
            break
        await asyncio.sleep(0.05)
    assert _sleepers() == [], "a process the trial's shell started outlived the trial"


def _sleepers() -> list[int]:
    found: list[int] = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline: list[str] = process.info["cmdline"] or []
        if cmdline[:1] == ["sleep"] and cmdline[1:] in (["4242"], ["4243"]):
            found.append(process.pid)
    return found


async def test_the_tool_servers_timeout_is_the_commands_deadline(runner: RunnerHandle) -> None:
    # bash declares no timeout of its own: the server's (a terminal task's loader sets one) applies.
    await _register(runner, "d:0", timeout_s=1.5)
    await _bash(runner, "d:0", "cd /tmp && export KEPT=1")
    reply = await runner.servicer.execute_tool(
        ExecuteToolRequest(
            trial_id="d:0",
            tool_name="bash",
            arguments_json=json.dumps({"command": "echo begun; sleep 30"}),
            executor="agent",
            call_id="slow",
        )
    )
    assert reply.status == ExecutionStatus.TIMEOUT, reply
    assert reply.tool_error is not None and "deadline of 1.35s" in reply.tool_error.message
    assert json.loads(reply.tool_error.details_json)["stdout"] == "begun\n"
    # The next call gets a fresh shell, in the workspace, in the same sandbox.
    workspace = runner.servicer.runner.registry.get("d:0").files.workspace
    assert await _bash(runner, "d:0", 'echo "[$KEPT]"; pwd') == f"[]\n{workspace}"
