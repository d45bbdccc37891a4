"""The built-in fs and exec providers (plugins/) run by a real runner in the trial's workspace."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tolokaforge.contracts.runner import (
    ExecuteToolRequest,
    ExecuteToolResponse,
    ExecutionStatus,
    RunnerServiceStub,
)
from tolokaforge.contracts.tool import ToolErrorCategory
from tolokaforge.runner import RunnerHandle

from .conftest import register_request

CallTool = Callable[..., Awaitable[ExecuteToolResponse]]
SpecWith = Callable[..., dict[str, Any]]


def _provider(name: str, module: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "protocol": "provider", "command": [sys.executable, "-m", module], **extra}


@pytest.fixture
async def workspace(runner: RunnerHandle, stub: RunnerServiceStub, server_spec: SpecWith) -> Path:
    spec = server_spec(
        "builtin:0",
        _provider("fs", "tolokaforge_provider_fs.server", prefix="fs_"),
        _provider("exec", "tolokaforge_provider_exec.server", prefix="exec_", timeout_s=3.0),
    )
    response = await stub.register_trial(register_request(spec))
    assert response.success, response.error
    names = {schema.name for schema in response.tool_schemas}
    assert names == {
        "fs_read",
        "fs_write",
        "fs_list",
        "fs_read_file",
        "fs_write_file",
        "fs_list_dir",
        "fs_append_file",
        "fs_copy_file",
        "fs_move_file",
        "fs_delete_file",
        "fs_grep_workspace",
        "fs_replace_lines",
        "exec_run",
        "exec_bash",
        "exec_calculator",
    }
    path = runner.servicer.runner.registry.get("builtin:0").files.workspace
    assert path is not None
    return path


def _category(response: ExecuteToolResponse) -> ToolErrorCategory | None:
    return response.tool_error.category if response.tool_error is not None else None


async def test_fs_reads_writes_and_lists_inside_the_workspace(workspace: Path, call_tool: CallTool) -> None:
    written = await call_tool("builtin:0", "fs_write", {"path": "notes/a.txt", "content": "hi"}, "c1")
    assert written.status == ExecutionStatus.SUCCESS, written.error_message
    assert (workspace / "notes" / "a.txt").read_text() == "hi"
    read = await call_tool("builtin:0", "fs_read", {"path": "notes/a.txt"}, "c2")
    assert json.loads(read.output) == {"path": "notes/a.txt", "content": "hi"}
    listed = await call_tool("builtin:0", "fs_list", {}, "c3")
    assert json.loads(listed.output)["entries"] == [{"name": "notes", "type": "dir"}]
    missing = await call_tool("builtin:0", "fs_read", {"path": "nope.txt"}, "c4")
    assert _category(missing) == ToolErrorCategory.NOT_FOUND


async def test_fs_refuses_escapes_and_symlinks_out_of_the_workspace(
    workspace: Path, call_tool: CallTool, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    (workspace / "link").symlink_to(secret)
    (workspace / "dirlink").symlink_to(tmp_path, target_is_directory=True)
    attempts = [
        ("fs_read", {"path": "../secret.txt"}),
        ("fs_read", {"path": str(secret)}),
        ("fs_read", {"path": "link"}),
        ("fs_read", {"path": "dirlink/secret.txt"}),
        ("fs_write", {"path": "link", "content": "pwned"}),
        ("fs_write", {"path": "../../escaped.txt", "content": "pwned"}),
        ("fs_list", {"path": ".."}),
    ]
    for index, (tool, arguments) in enumerate(attempts):
        response = await call_tool("builtin:0", tool, arguments, f"c{index}")
        assert _category(response) == ToolErrorCategory.PERMISSION_DENIED, (tool, arguments, response)
    assert secret.read_text() == "top secret"


async def test_exec_runs_in_the_workspace_with_exit_status_and_deadline(
    workspace: Path, call_tool: CallTool
) -> None:
    (workspace / "here.txt").write_text("x")
    listed = await call_tool("builtin:0", "exec_run", {"command": ["ls"]}, "c1")
    assert listed.status == ExecutionStatus.SUCCESS, listed.error_message
    assert json.loads(listed.output)["stdout"] == "here.txt\n"
    assert listed.metrics is not None and listed.metrics.exit_code == 0
    failed = await call_tool(
        "builtin:0", "exec_run", {"command": ["sh", "-c", "echo oops >&2; exit 3"]}, "c2"
    )
    assert _category(failed) == ToolErrorCategory.EXECUTION_FAILED
    assert failed.tool_error is not None
    details = json.loads(failed.tool_error.details_json)
    assert details["exit_code"] == 3 and details["stderr"] == "oops\n"
    assert "output_tail" not in details  # the output is stored once: in the provider's own details
    assert failed.metrics is not None and failed.metrics.exit_code == 3
    slow = await call_tool(
        "builtin:0", "exec_run", {"command": ["sleep", "30"], "timeout_seconds": 0.5}, "c3"
    )
    assert slow.status == ExecutionStatus.TIMEOUT and _category(slow) == ToolErrorCategory.TIMEOUT
    absent = await call_tool("builtin:0", "exec_run", {"command": ["no-such-command-here"]}, "c4")
    assert _category(absent) == ToolErrorCategory.NOT_FOUND


async def test_exec_a_command_longer_than_ten_seconds_runs_to_its_declared_budget(
    workspace: Path, call_tool: CallTool
) -> None:
    # exec_run declares a 30 s budget; the Invoke once carried the setup RPCs' fixed 10 s deadline,
    # which ended this call as process_crashed.
    slow = await call_tool("builtin:0", "exec_run", {"command": ["sh", "-c", "sleep 15; echo done"]}, "c1")
    assert slow.status == ExecutionStatus.SUCCESS, (_category(slow), slow.error_message)
    assert json.loads(slow.output)["stdout"] == "done\n"


async def test_exec_past_the_calls_budget_is_timeout_not_a_crash(
    workspace: Path, stub: RunnerServiceStub
) -> None:
    request = ExecuteToolRequest(
        trial_id="builtin:0",
        tool_name="exec_run",
        arguments_json=json.dumps({"command": ["sh", "-c", "echo started; sleep 30"]}),
        executor="agent",
        call_id="c1",
        timeout_seconds=1.5,
    )
    started = time.monotonic()
    response = await stub.execute_tool(request)
    assert time.monotonic() - started < 3.0
    assert response.status == ExecutionStatus.TIMEOUT and _category(response) == ToolErrorCategory.TIMEOUT
    assert response.tool_error is not None
    details = json.loads(response.tool_error.details_json)
    assert details["stdout"] == "started\n" and "output_tail" not in details
    again = await stub.execute_tool(
        ExecuteToolRequest(
            trial_id="builtin:0",
            tool_name="exec_run",
            arguments_json=json.dumps({"command": ["true"]}),
            executor="agent",
            call_id="c2",
        )
    )
    assert again.status == ExecutionStatus.SUCCESS, again.error_message


async def test_exec_output_is_capped_and_stored_once(workspace: Path, call_tool: CallTool) -> None:
    size = 3 * 1024 * 1024
    loud = await call_tool("builtin:0", "exec_run", {"command": ["head", "-c", str(size), "/dev/zero"]}, "c1")
    assert loud.status == ExecutionStatus.SUCCESS, loud.error_message
    output = json.loads(loud.output)
    assert len(output["stdout"]) == 1024 * 1024 and output["truncated"] == {"stdout": True, "stderr": False}
    script = f"head -c {size} /dev/zero >&2; exit 1"
    failed = await call_tool("builtin:0", "exec_run", {"command": ["sh", "-c", script]}, "c2")
    assert failed.tool_error is not None and _category(failed) == ToolErrorCategory.EXECUTION_FAILED
    details = json.loads(failed.tool_error.details_json)
    assert len(details["stderr"]) == 1024 * 1024 and details["truncated"]["stderr"]
    assert "output_tail" not in details
