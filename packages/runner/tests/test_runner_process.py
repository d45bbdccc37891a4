"""The standalone runner as a real process: after hostile tools, SIGTERM ends it within 5 s, leaving no
child and no temporary directory -- in isolated mode and in trusted mode."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest
from grpclib.client import Channel

from tolokaforge.contracts.runner import ExecuteToolRequest, ExecutionStatus, RunnerServiceStub
from tolokaforge.core.credentials import authorize_channel, new_token, write_token_file

from .conftest import register_request
from .test_isolation import hostile_spec


async def _start(tmp: Path, isolation: str, token_file: Path) -> tuple[asyncio.subprocess.Process, str]:
    env = {**os.environ, "TMPDIR": str(tmp), "TOLOKAFORGE_RUNNER_ISOLATION": isolation}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "from tolokaforge.runner.edge.cli import main; main()",
        "--port",
        "0",
        "--token-file",
        str(token_file),
        "--tool-timeout",
        "1",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert process.stdout is not None
    line = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
    assert "listening on" in line, line
    return process, line.rsplit(" ", 1)[1].strip()


@pytest.mark.parametrize(
    ("isolation", "misbehaviours"),
    [
        ("process", ["sleep", "exit", "hard_exit", "segfault", "keyboard_interrupt", "base_exception"]),
        # Trusted mode cannot survive os._exit or a segfault (that is what isolation is for).
        ("thread", ["sleep", "sleep", "exit", "keyboard_interrupt", "base_exception"]),
    ],
)
async def test_sigterm_ends_the_runner_after_hostile_tools(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, isolation: str, misbehaviours: list[str]
) -> None:
    token = new_token()
    token_file = tmp_path_factory.mktemp("tokens") / "runner.token"  # not in tmp_path: it must end empty
    write_token_file(token_file, token)
    process, address = await _start(tmp_path, isolation, token_file)
    host, port = address.rsplit(":", 1)
    channel = Channel(host, int(port))
    authorize_channel(channel, token)
    stub = RunnerServiceStub(channel)
    try:
        spec = hostile_spec("p:0")
        assert (await stub.register_trial(register_request(spec))).success
        calls = [("misbehave", {"how": how}) for how in misbehaviours]
        if isolation == "process":
            calls.append(("fork_linger", {}))
        for index, (tool, arguments) in enumerate(calls):
            response = await stub.execute_tool(
                ExecuteToolRequest(
                    trial_id="p:0",
                    tool_name=tool,
                    arguments_json=json.dumps(arguments),
                    executor="agent",
                    call_id=f"c{index}",
                )
            )
            expected = ExecutionStatus.SUCCESS if tool == "fork_linger" else None
            assert expected is None or response.status == expected, response
            assert response.status != ExecutionStatus.SUCCESS or tool == "fork_linger", response
        descendants = psutil.Process(process.pid).children(recursive=True)
        assert isolation == "thread" or descendants  # the trial's worker, the forked child
    finally:
        channel.close()
    started = time.perf_counter()
    process.send_signal(signal.SIGTERM)
    code = await asyncio.wait_for(process.wait(), 5.0)
    assert time.perf_counter() - started < 5.0 and code == 0
    _, alive = psutil.wait_procs(descendants, timeout=2)
    assert not alive, [p.pid for p in alive]  # no worker, no child a tool forked
    assert list(tmp_path.iterdir()) == []  # the runner's temporary work directory is gone
