"""A runner killed mid-run: the attempt ends trial_lost, is cleaned up, and a fresh attempt is graded."""

from __future__ import annotations

import asyncio
import shutil
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import pytest
import yaml
from aiohttp import web

from tolokaforge.core.credentials import new_token, write_token_file
from tolokaforge.host.agents import LLMAgentFactory
from tolokaforge.host.llm import DEFAULT_PRICES, ChatClient, ChatSettings
from tolokaforge.host.packs import load_pack
from tolokaforge.host.run.exit_status import verdict
from tolokaforge.host.run.schedule import RunSettings, run_pack
from tolokaforge.host.users.router import UserRouter

if TYPE_CHECKING:
    from conftest import ChatServer, Replies, Responder

TASK = "write_cancel_processing_order"


class RunnerProcess:
    """``tolokaforge-runner`` as a real subprocess on a fixed loopback port, with the same token file at
    every start (a runner started again is the same runner to the host)."""

    def __init__(self, port: int, token_file: Path) -> None:
        self.port = port
        self.token_file = token_file
        write_token_file(token_file, new_token())
        self.process: asyncio.subprocess.Process | None = None
        self.starts = 0

    async def start(self) -> None:
        executable = shutil.which("tolokaforge-runner")
        assert executable is not None
        self.process = await asyncio.create_subprocess_exec(
            executable,
            "--port",
            str(self.port),
            "--token-file",
            str(self.token_file),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), timeout=60)
        assert b"listening on" in line, line
        self.starts += 1

    async def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        await self.process.wait()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
async def runner_process(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RunnerProcess]:
    runner = RunnerProcess(_free_port(), tmp_path_factory.mktemp("tokens") / "runner.token")
    await runner.start()
    yield runner
    await runner.kill()


async def test_killed_runner_yields_trial_lost_then_a_clean_retry(
    packs_dir: Path,
    tmp_path: Path,
    runner_process: RunnerProcess,
    chat_server: Callable[[Responder], Awaitable[ChatServer]],
    replies: Replies,
) -> None:
    async def respond(body: dict[str, Any], count: int) -> web.StreamResponse:
        if count == 1:
            # The trial is registered on the first runner; replace that runner before its first tool call.
            await runner_process.kill()
            await runner_process.start()
        if replies.assistant_turns(body) == 0:
            return replies.completion(replies.tool_call("c1", "get_order_details", '{"order_id": "O-50035"}'))
        return replies.completion({"content": "Your order O-50035 is processing."})

    server = await chat_server(respond)
    pack = load_pack(packs_dir / "retail")
    async with aiohttp.ClientSession() as session:
        settings = ChatSettings(model="gpt-4o-mini", base_url=server.url, api_key="test-key")
        agents = LLMAgentFactory(ChatClient(settings, session, DEFAULT_PRICES))
        summary = await run_pack(
            pack,
            agents,
            UserRouter(),
            RunSettings(
                output=tmp_path,
                task_ids=(TASK,),
                runner=f"127.0.0.1:{runner_process.port}",
                runner_token_file=runner_process.token_file,
            ),
        )

    folder = tmp_path / "trials" / TASK / "0"
    trajectory = yaml.safe_load((folder / "trajectory.yaml").read_text())
    grade = yaml.safe_load((folder / "grade.yaml").read_text())
    metrics = yaml.safe_load((folder / "metrics.yaml").read_text())
    assert runner_process.starts == 2
    assert [lost["trial_id"] for lost in trajectory["lost_attempts"]] == [f"{TASK}:0"]
    assert "not found" in trajectory["lost_attempts"][0]["error"]
    assert trajectory["trial_id"] == grade["trial_id"] == f"{TASK}:0:a1"
    assert trajectory["termination_reason"] == "user_stop"
    assert [call["status"] for call in trajectory["tool_calls"]] == ["SUCCESS"]  # the retry is clean
    assert grade["graded"] is True and grade["score"] is not None
    assert metrics["attempts"] == 2
    assert summary.terminations() == {"user_stop": 1}


async def test_a_trial_lost_on_every_attempt_is_unfinished_and_the_run_exits_2(
    packs_dir: Path,
    tmp_path: Path,
    runner_process: RunnerProcess,
    chat_server: Callable[[Responder], Awaitable[ChatServer]],
    replies: Replies,
) -> None:
    async def respond(body: dict[str, Any], count: int) -> web.StreamResponse:
        if count == 1:
            await runner_process.kill()  # the runner holding the trial is gone, with no attempt left
            await runner_process.start()
        return replies.completion(replies.tool_call("c1", "get_order_details", '{"order_id": "O-50035"}'))

    server = await chat_server(respond)
    pack = load_pack(packs_dir / "retail")
    async with aiohttp.ClientSession() as session:
        settings = ChatSettings(model="gpt-4o-mini", base_url=server.url, api_key="test-key")
        summary = await run_pack(
            pack,
            LLMAgentFactory(ChatClient(settings, session, DEFAULT_PRICES)),
            UserRouter(),
            RunSettings(
                output=tmp_path,
                task_ids=(TASK,),
                runner=f"127.0.0.1:{runner_process.port}",
                runner_token_file=runner_process.token_file,
                max_attempts=1,
            ),
        )

    # Lost on its only attempt: never graded, so unfinished (no grade.yaml) and run again by --resume.
    assert summary.outcomes()["unfinished"] == 1
    [row] = summary.not_passed()
    assert row.kind == "unfinished" and "lost the trial on every attempt" in row.reason, row.reason
    assert not (tmp_path / "trials" / TASK / "0" / "grade.yaml").exists()
    result = verdict(summary)
    assert result.code == 2 and "1 of 1 trials unfinished by the infrastructure" in result.line, result.line
