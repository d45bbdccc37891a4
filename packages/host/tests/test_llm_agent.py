"""The llm agent against a real local chat-completions server, on the embedded runner."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import pytest
import yaml
from aiohttp import web

from tolokaforge.host.agents import LLMAgentFactory
from tolokaforge.host.llm import DEFAULT_PRICES, ChatClient, ChatSettings, api_key_from_env
from tolokaforge.host.packs import load_pack
from tolokaforge.host.run.schedule import RunSettings, run_pack
from tolokaforge.host.users.router import UserRouter

if TYPE_CHECKING:
    from conftest import ChatServer, Replies, Responder

TASK = "write_cancel_processing_order"


def _script(r: Replies) -> Responder:
    async def respond(body: dict[str, Any], count: int) -> web.StreamResponse:
        return _step(r, body, count)

    return respond


def _step(r: Replies, body: dict[str, Any], count: int) -> web.StreamResponse:
    if count == 1:  # the very first request is throttled once
        return web.json_response({"error": "slow down"}, status=429, headers={"Retry-After": "0"})
    step = r.assistant_turns(body)
    if step == 0:  # malformed JSON arguments: the runner must refuse them, the transcript records {}
        return r.completion(r.tool_call("call_1", "get_order_details", '{"order_id": "O-50035"'))
    if step == 1:  # the provider reuses its id: the episode must make it unique
        return r.completion(r.tool_call("call_1", "get_order_details", '{"order_id": "O-50035"}'))
    if step == 2:  # the wrong reason: a real write, but not the golden one
        return r.completion(
            r.tool_call("call_3", "cancel_order", '{"order_id": "O-50035", "reason": "no_longer_needed"}')
        )
    return r.completion({"content": "Order O-50035 is cancelled; $168.00 goes back to your card."})


async def test_llm_agent_wrong_argument_fails_with_a_state_diff_and_retries_429(
    packs_dir: Path,
    tmp_path: Path,
    chat_server: Callable[[Responder], Awaitable[ChatServer]],
    monkeypatch: pytest.MonkeyPatch,
    replies: Replies,
) -> None:
    monkeypatch.setenv("TOLOKAFORGE_LLM_API_KEY", "test-key")
    server = await chat_server(_script(replies))
    pack = load_pack(packs_dir / "retail")
    async with aiohttp.ClientSession() as session:
        settings = ChatSettings(
            model="gpt-4o-mini", base_url=server.url, api_key=api_key_from_env(), backoff_base_s=0.01
        )
        agents = LLMAgentFactory(ChatClient(settings, session, DEFAULT_PRICES))
        summary = await run_pack(pack, agents, UserRouter(), RunSettings(output=tmp_path, task_ids=(TASK,)))

    folder = tmp_path / "trials" / TASK / "0"
    grade = yaml.safe_load((folder / "grade.yaml").read_text())
    trajectory = yaml.safe_load((folder / "trajectory.yaml").read_text())
    metrics = yaml.safe_load((folder / "metrics.yaml").read_text())

    assert trajectory["termination_reason"] == "user_stop"
    assert grade["graded"] and not grade["binary_pass"] and grade["score"] == 0.0
    assert grade["components"]["state_checks"] < 1.0 and grade["components"]["transcript_rules"] == 0.0
    assert grade["state_diff"] is not None and "O-50035" in str(grade["state_diff"])
    assert any("cancel_order" in reason or "cancel" in reason for reason in grade["reasons"])

    statuses = [(call["call_id"], call["status"]) for call in trajectory["tool_calls"]]
    assert statuses == [("call_1", "INVALID_ARGUMENTS"), ("call_1#1", "SUCCESS"), ("call_3", "SUCCESS")]
    assert trajectory["tool_calls"][0]["arguments"] == '{"order_id": "O-50035"'  # sent as the model wrote it
    first_call = trajectory["messages"][2]["tool_calls"][0]
    assert (first_call["id"], first_call["arguments"]) == ("call_1", {})  # recorded decodable
    users = [m["content"] for m in trajectory["messages"] if m["role"] == "user"]
    assert users[-2:] == ["Yes, please cancel it.", "###STOP###"]

    assert metrics["llm_retries"] == 1 and "HTTP 429" in metrics["retry_log"][0]
    assert metrics["llm_calls"] == 5 and len(server.requests) == 6
    assert (metrics["prompt_tokens"], metrics["completion_tokens"]) == (500, 100)
    assert metrics["cost_usd"] == pytest.approx((500 * 0.15 + 100 * 0.6) / 1e6)
    assert metrics["tool_calls_by_status"] == {"INVALID_ARGUMENTS": 1, "SUCCESS": 2}
    assert summary.pass_rate == 0.0 and summary.tokens == 600
    # The model was offered the runner's schemas, with the task's policy as system prompt.
    assert {tool["function"]["name"] for tool in server.requests[1]["tools"]} >= {"cancel_order"}
    assert server.requests[1]["messages"][0]["role"] == "system"


async def test_a_client_error_is_not_retried(
    packs_dir: Path, tmp_path: Path, chat_server: Callable[[Responder], Awaitable[ChatServer]]
) -> None:
    async def refuse(body: dict[str, Any], count: int) -> web.StreamResponse:
        return web.json_response({"error": "bad model"}, status=400)

    server = await chat_server(refuse)
    pack = load_pack(packs_dir / "retail")
    async with aiohttp.ClientSession() as session:
        settings = ChatSettings(model="gpt-4o-mini", base_url=server.url, api_key="test-key")
        agents = LLMAgentFactory(ChatClient(settings, session, DEFAULT_PRICES))
        await run_pack(pack, agents, UserRouter(), RunSettings(output=tmp_path, task_ids=(TASK,)))
    trajectory = yaml.safe_load((tmp_path / "trials" / TASK / "0" / "trajectory.yaml").read_text())
    grade = yaml.safe_load((tmp_path / "trials" / TASK / "0" / "grade.yaml").read_text())
    assert trajectory["termination_reason"] == "error" and "HTTP 400" in trajectory["error"]
    assert grade["graded"] is False and grade["score"] is None
    assert len(server.requests) == 1
