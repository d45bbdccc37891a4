"""Model access as the ecosystem expects: OPENAI_BASE_URL / OPENAI_API_KEY, --llm-timeout, --llm-max-retries,
and retries recorded with their causes even when they run out."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from aiohttp import web

if TYPE_CHECKING:
    from conftest import ChatServer, Replies, Responder

TASK = "lookup_order_tracking"


def _is_preflight(body: dict[str, Any]) -> bool:
    return body.get("max_completion_tokens") == 1 and "tools" not in body


async def _cli(args: list[str], env: dict[str, str], timeout: float) -> tuple[int, str, str]:
    """The real command in a subprocess, while this event loop serves the fake endpoint."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "from tolokaforge.host.cli import main; main()",
        *args,
        env={"PATH": os.environ["PATH"], **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=timeout)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_openai_base_url_and_key_reach_a_local_server(
    packs_dir: Path,
    tmp_path: Path,
    chat_server: Callable[[Responder], Awaitable[ChatServer]],
    replies: Replies,
) -> None:
    async def respond(body: dict[str, Any], count: int) -> web.StreamResponse:
        if replies.assistant_turns(body) == 0:
            return replies.completion(replies.tool_call("c1", "get_order_details", '{"order_id": "O-50064"}'))
        return replies.completion({"content": "Tracking 1Z1749276956, arriving 2026-03-19."})

    server = await chat_server(respond)  # it asserts "Authorization: Bearer test-key" on every request
    output = tmp_path / "run"
    code, _out, err = await _cli(
        ["run", "--pack", str(packs_dir / "retail"), "--task", TASK, "--agent", "llm", "--model", "gpt-4o-mini",
         "--output", str(output)],
        {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "test-key"},
        timeout=120,
    )  # fmt: skip
    assert code == 0, err
    preflight, *trial = server.requests  # the preflight's one-token call, then the trial's turns
    assert _is_preflight(preflight) and preflight["model"] == "gpt-4o-mini"
    assert trial and not any(_is_preflight(body) for body in trial)
    manifest = yaml.safe_load((output / "run.yaml").read_text())
    assert manifest["llm_endpoint_host"] == server.url.split("/")[2]  # 127.0.0.1:<port>, never the key
    assert manifest["options"]["llm_base_url"] == server.url
    summary = yaml.safe_load((output / "summary.yaml").read_text())
    assert summary["models"]["gpt-4o-mini"]["llm_calls"] == len(trial)  # the preflight is no trial's
    assert summary["models"]["gpt-4o-mini"]["prompt_tokens"] == 100 * len(trial)


async def test_a_hung_endpoint_gives_up_after_llm_timeout_and_records_each_retry(
    packs_dir: Path,
    tmp_path: Path,
    chat_server: Callable[[Responder], Awaitable[ChatServer]],
    replies: Replies,
) -> None:
    release = asyncio.Event()

    async def hang(body: dict[str, Any], count: int) -> web.StreamResponse:
        if _is_preflight(body):
            return replies.completion({"content": "O"})
        await release.wait()  # never answers while the run is on
        return web.Response(status=503)

    server = await chat_server(hang)
    output = tmp_path / "run"
    try:
        code, out, err = await _cli(
            ["run", "--pack", str(packs_dir / "retail"), "--task", TASK, "--agent", "llm", "--model", "m",
             "--output", str(output)],
            {"TOLOKAFORGE_LLM_BASE_URL": server.url, "TOLOKAFORGE_LLM_API_KEY": "test-key",
             "TOLOKAFORGE_LLM_TIMEOUT": "1", "TOLOKAFORGE_LLM_MAX_RETRIES": "1"},
            timeout=60,  # with the old 6 x 120 s this would take 12 minutes
        )  # fmt: skip
    finally:
        release.set()
    # No answer past the retries is the provider's failure, not the agent's: unfinished, exit 2.
    assert code == 2, err
    assert out.strip().splitlines()[-1] == (
        "exit 2: 1 of 1 trials unfinished by the infrastructure (--resume runs them again); "
        "pass rate 0.000 (0/1 passed)"
    )
    assert len(server.requests) == 3  # the preflight, then the trial's first try and one retry
    folder = output / "trials" / TASK / "0"
    assert not (folder / "grade.yaml").exists()
    metrics = yaml.safe_load((folder / "metrics.yaml").read_text())
    assert metrics["llm_retries"] == 1  # counted although the turn gave up
    assert metrics["retry_log"][0].startswith("no answer within --llm-timeout 1s; retried after")
    assert metrics["retry_log"][1] == "no answer within --llm-timeout 1s; gave up (no retries left)"
    trajectory = yaml.safe_load((folder / "trajectory.yaml").read_text())
    assert trajectory["termination_reason"] == "error"
    assert "failed after 2 attempt(s) (1 retries, --llm-max-retries 1)" in trajectory["error"]


async def test_an_interrupted_run_exits_130_and_resumes(
    packs_dir: Path,
    tmp_path: Path,
    chat_server: Callable[[Responder], Awaitable[ChatServer]],
    replies: Replies,
) -> None:
    asked = asyncio.Event()
    release = asyncio.Event()

    async def hang(body: dict[str, Any], count: int) -> web.StreamResponse:
        if _is_preflight(body):
            return replies.completion({"content": "O"})
        asked.set()
        await release.wait()
        return web.Response(status=503)

    server = await chat_server(hang)
    output = tmp_path / "run"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "from tolokaforge.host.cli import main; main()",
        "run", "--pack", str(packs_dir / "retail"), "--task", TASK, "--agent", "llm", "--model", "m",
        "--output", str(output),
        env={"PATH": os.environ["PATH"], "OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "test-key"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        await asyncio.wait_for(asked.wait(), timeout=60)  # a trial is in flight
        process.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(process.communicate(), timeout=60)
    finally:
        release.set()
    assert process.returncode == 130
    assert (
        err.decode().strip().splitlines()[-1]
        == "tolokaforge: interrupted (exit 130); --resume continues the run"
    )
    manifest = yaml.safe_load((output / "run.yaml").read_text())
    assert manifest["finished_at"] is None and not (output / "trials" / TASK / "0" / "grade.yaml").exists()
