"""The ``bash`` operation over gRPC in process (grpclib.testing.ChannelFor), with real bash shells.

Persistence within a trial, isolation between trials, the deadline (kill the group, fresh shell next),
the output cap, exit statuses as answers, and release leaving no process behind.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from grpclib.testing import ChannelFor
from tolokaforge_provider_exec.service import ExecProvider
from tolokaforge_provider_exec.shell import HEAD_BYTES, TAIL_BYTES

from tolokaforge.contracts.tool import (
    CallContext,
    InvokeRequest,
    InvokeResponse,
    ToolError,
    ToolErrorCategory,
    ToolProviderServiceStub,
)


class Session:
    """One provider, called as the runner calls it: a trial id and its workspace on every call."""

    def __init__(self, provider: ExecProvider, stub: ToolProviderServiceStub) -> None:
        self.provider = provider
        self.stub = stub

    async def events(
        self, workspace: Path, command: Any, *, trial: str = "t:0", budget: float = 10.0
    ) -> list[InvokeResponse]:
        request = InvokeRequest(
            operation="bash",
            arguments_json=json.dumps({"command": command}),
            call_context=CallContext(
                trial_id=trial, working_directory=str(workspace), timeout_seconds=budget, attempt=1
            ),
        )
        return [event async for event in self.stub.invoke(request)]

    async def bash(
        self, workspace: Path, command: str, *, trial: str = "t:0", budget: float = 10.0
    ) -> dict[str, Any]:
        events = await self.events(workspace, command, trial=trial, budget=budget)
        result = events[-1].result
        assert result is not None, events[-1]
        output: dict[str, Any] = json.loads(result.output_json)
        status = events[-2].exit_status
        assert status is not None and status.code == output["exit_code"], events
        output["text"] = result.text
        return output

    async def error(
        self, workspace: Path, command: Any, *, trial: str = "t:0", budget: float = 10.0
    ) -> ToolError:
        events = await self.events(workspace, command, trial=trial, budget=budget)
        assert events[-1].error is not None, events[-1]
        return events[-1].error


@pytest.fixture
async def session() -> AsyncIterator[Session]:
    provider = ExecProvider(1)
    async with ChannelFor([provider]) as channel:
        try:
            yield Session(provider, ToolProviderServiceStub(channel))
        finally:
            await provider.shells.release_all()


async def _gone(pid: int) -> bool:
    """Whether ``pid`` is dead, giving a killed process a moment to be scheduled and die."""
    for _ in range(100):
        if not _alive(pid):
            return True
        await asyncio.sleep(0.05)
    return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes: nothing runs.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(") ")[1][0] != "Z"


async def test_directory_variables_and_functions_persist_between_calls(
    session: Session, tmp_path: Path
) -> None:
    first = await session.bash(
        tmp_path, 'mkdir -p a/b && cd a/b && export GREETING=hello && shout() { echo "$1!"; }'
    )
    assert first["exit_code"] == 0 and first["shell_restarted"] is False
    second = await session.bash(tmp_path, "pwd; echo $GREETING; shout hey; echo data > note.txt")
    assert second["stdout"] == f"{tmp_path}/a/b\nhello\nhey!\n"
    assert (tmp_path / "a" / "b" / "note.txt").read_text() == "data\n"


async def test_the_first_call_starts_in_the_workspace(session: Session, tmp_path: Path) -> None:
    assert (await session.bash(tmp_path, "pwd"))["stdout"] == f"{tmp_path}\n"


async def test_two_trials_never_share_a_shell(session: Session, tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    await session.bash(one, "export SECRET=one-only; cd /", trial="a:0")
    other = await session.bash(two, 'echo "[$SECRET]"; pwd', trial="b:0")
    assert other["stdout"] == f"[]\n{two}\n"
    again = await session.bash(one, 'echo "[$SECRET]"; pwd', trial="a:0")
    assert again["stdout"] == "[one-only]\n/\n"
    pids = session.provider.shells.pids()
    assert set(pids) == {"a:0", "b:0"} and pids["a:0"] != pids["b:0"]


async def test_a_non_zero_status_is_an_answer_with_stdout_and_stderr(
    session: Session, tmp_path: Path
) -> None:
    output = await session.bash(tmp_path, "echo out; echo err >&2; exit_with() { return $1; }; exit_with 3")
    assert (output["exit_code"], output["stdout"], output["stderr"]) == (3, "out\n", "err\n")
    assert output["text"] == "out\n[stderr]\nerr\n[exit code: 3]"
    missing = await session.bash(tmp_path, "no-such-command-here")
    assert missing["exit_code"] == 127 and "no-such-command-here" in missing["stderr"]


async def test_output_without_a_final_newline_and_a_syntax_error(session: Session, tmp_path: Path) -> None:
    assert (await session.bash(tmp_path, "printf 'no newline'"))["stdout"] == "no newline"
    broken = await session.bash(tmp_path, "if then")
    assert broken["exit_code"] == 2 and "syntax error" in broken["stderr"]
    # The shell survived its command's syntax error.
    assert (await session.bash(tmp_path, "echo still here"))["stdout"] == "still here\n"


async def test_the_command_reads_no_input_of_the_shell(session: Session, tmp_path: Path) -> None:
    # A command reading stdin gets end of file at once instead of swallowing the shell's next calls.
    assert (await session.bash(tmp_path, "cat; echo done"))["stdout"] == "done\n"
    assert (await session.bash(tmp_path, "echo next"))["stdout"] == "next\n"


async def test_exit_ends_the_shell_and_the_next_call_gets_a_fresh_one(
    session: Session, tmp_path: Path
) -> None:
    await session.bash(tmp_path, "export KEPT=1; mkdir -p sub; cd sub")
    ended = await session.bash(tmp_path, "echo bye; exit 7")
    assert (ended["exit_code"], ended["stdout"], ended["shell_restarted"]) == (7, "bye\n", True)
    assert "next command starts a fresh shell" in ended["text"]
    fresh = await session.bash(tmp_path, 'echo "[$KEPT]"; pwd')
    assert fresh["stdout"] == f"[]\n{tmp_path}\n" and fresh["shell_restarted"] is False


async def test_the_deadline_kills_the_group_and_the_next_call_gets_a_fresh_shell(
    session: Session, tmp_path: Path
) -> None:
    await session.bash(tmp_path, "export KEPT=1; mkdir -p sub; cd sub")
    shell = session.provider.shells.pids()["t:0"]
    error = await session.error(
        tmp_path, "sleep 300 & echo $! > ../child.pid; echo started; sleep 300", budget=1.5
    )
    assert error.category == ToolErrorCategory.TIMEOUT and error.retryable
    assert "next call starts a fresh shell" in error.message
    details = json.loads(error.details_json)
    assert details["stdout"] == "started\n" and details["deadline_seconds"] == pytest.approx(1.35)
    child = int((tmp_path / "child.pid").read_text())
    assert await _gone(child), "a background child of the timed-out command survived"
    assert await _gone(shell), "the timed-out shell survived"
    fresh = await session.bash(tmp_path, 'echo "[$KEPT]"; pwd')
    assert fresh["stdout"] == f"[]\n{tmp_path}\n"
    assert session.provider.shells.pids()["t:0"] != shell


async def test_output_is_cut_in_the_middle_and_says_so(session: Session, tmp_path: Path) -> None:
    size = HEAD_BYTES + TAIL_BYTES + 10_000
    output = await session.bash(
        tmp_path,
        f"printf 'A%.0s' $(seq {HEAD_BYTES}); head -c {size - HEAD_BYTES - TAIL_BYTES} /dev/zero | tr '\\0' M; "
        f"printf 'Z%.0s' $(seq {TAIL_BYTES}); echo small >&2",
    )
    stdout: str = output["stdout"]
    assert output["truncated"] == {"stdout": True, "stderr": False}
    assert stdout == "A" * HEAD_BYTES + "\n[... 10000 bytes cut ...]\n" + "Z" * TAIL_BYTES
    assert output["stderr"] == "small\n"
    assert "[output cut in the middle: stdout;" in output["text"]
    # Exactly at the cap nothing is cut.
    whole = await session.bash(tmp_path, f"head -c {HEAD_BYTES + TAIL_BYTES} /dev/zero | tr '\\0' q")
    assert whole["truncated"]["stdout"] is False and whole["stdout"] == "q" * (HEAD_BYTES + TAIL_BYTES)


async def test_bad_arguments_are_invalid_arguments(session: Session, tmp_path: Path) -> None:
    for command in ("", "   ", 7, ["ls"], "echo \x00", "echo \ud800"):
        error = await session.error(tmp_path, command)
        assert error.category == ToolErrorCategory.INVALID_ARGUMENTS, (command, error)
    request = InvokeRequest(
        operation="bash",
        arguments_json=json.dumps({"command": "ls", "cwd": "/"}),
        call_context=CallContext(
            trial_id="t:0", working_directory=str(tmp_path), timeout_seconds=5, attempt=1
        ),
    )
    extra = [event async for event in session.stub.invoke(request)]
    assert extra[-1].error is not None and extra[-1].error.category == ToolErrorCategory.INVALID_ARGUMENTS


async def test_a_call_without_a_workspace_is_refused(session: Session, tmp_path: Path) -> None:
    error = await session.error(tmp_path / "missing", "ls")
    assert error.category == ToolErrorCategory.PERMISSION_DENIED


async def test_release_kills_the_shell_and_everything_it_started(session: Session, tmp_path: Path) -> None:
    await session.bash(tmp_path, "sleep 300 & echo $! > child.pid", trial="gone:0")
    await session.bash(tmp_path, "true", trial="kept:0")
    pids = session.provider.shells.pids()
    child = int((tmp_path / "child.pid").read_text())
    assert _alive(child) and _alive(pids["gone:0"])
    await session.provider.shells.release("gone:0")
    assert await _gone(child) and await _gone(pids["gone:0"])
    assert _alive(pids["kept:0"]), "releasing one trial touched another's shell"
    assert (await session.bash(tmp_path, "echo ok", trial="kept:0"))["stdout"] == "ok\n"


async def test_a_cancelled_call_ends_its_command_and_the_next_call_gets_a_fresh_shell(
    session: Session, tmp_path: Path
) -> None:
    # What the kernel does when it abandons a call: the Invoke is cancelled mid-command.
    shells = session.provider.shells
    await shells.run("t:0", str(tmp_path), "export KEPT=1; echo $$ > shell.pid", 10.0)
    running = asyncio.ensure_future(
        shells.run("t:0", str(tmp_path), "sleep 300 & echo $! > child.pid; wait", 10.0)
    )
    while not (tmp_path / "child.pid").exists():
        await asyncio.sleep(0.02)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert await _gone(int((tmp_path / "child.pid").read_text()))
    after = await shells.run("t:0", str(tmp_path), 'echo "[$KEPT]"', 10.0)
    assert (after.exit_code, after.stdout.text()) == (0, "[]\n")
