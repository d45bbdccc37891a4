"""The LLM user simulator against a real local chat-completions server, on the embedded runner."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import yaml
from aiohttp import web

from tolokaforge.host.agents import LLMAgentFactory
from tolokaforge.host.llm import DEFAULT_PRICES, ChatClient, ChatSettings
from tolokaforge.host.packs import load_pack
from tolokaforge.host.run.schedule import RunSettings, run_pack
from tolokaforge.host.users.llm import LLMUserFactory
from tolokaforge.host.users.router import UserRouter

if TYPE_CHECKING:
    from conftest import ChatServer, Replies, Responder

TASK = "dc_airplane_mode_no_service"


async def test_llm_user_fixes_the_phone_with_its_own_tools_and_stops(
    pack_copy: Callable[[str], Path],
    tmp_path: Path,
    chat_server: Callable[[Responder], Awaitable[ChatServer]],
    replies: Replies,
) -> None:
    pack_dir = pack_copy("dual_control")
    task_file = pack_dir / "tasks" / TASK / "task.yaml"
    task_file.write_text(task_file.read_text().replace("mode: scripted", "mode: llm"))

    turns = {"agent": 0, "customer": 0}
    customer_requests: list[dict[str, Any]] = []

    async def respond(body: dict[str, Any], count: int) -> web.StreamResponse:
        # One server plays both models; the customer's system prompt says who is asked.
        role = "customer" if body["messages"][0]["content"].startswith("You are a customer") else "agent"
        step = turns[role]
        turns[role] += 1
        if role == "agent":
            if step == 0:
                return replies.completion(
                    replies.tool_call("a1", "get_network_status", '{"line_id": "L-1003"}')
                )
            if step == 1:
                return replies.completion(
                    {"content": "The plane icon means airplane mode is on: please turn airplane mode off."}
                )
            return replies.completion({"content": "Great, you are all set."})
        customer_requests.append(body)
        if step == 0:  # the customer acts on the phone with a user-side tool
            arguments = '{"line_id": "L-1003", "enabled": false}'
            return replies.completion(replies.tool_call("u1", "toggle_airplane_mode", arguments))
        if step == 1:
            return replies.completion({"content": "Done, the plane icon is gone and I have signal."})
        return replies.completion({"content": "###STOP###"})

    server = await chat_server(respond)
    pack = load_pack(pack_dir)
    async with aiohttp.ClientSession() as session:
        client = ChatClient(
            ChatSettings(model="gpt-4o-mini", base_url=server.url, api_key="test-key"),
            session,
            DEFAULT_PRICES,
        )
        users = UserRouter(llm=LLMUserFactory(client))
        out = tmp_path / "run"
        summary = await run_pack(
            pack, LLMAgentFactory(client), users, RunSettings(output=out, task_ids=(TASK,))
        )

    folder = out / "trials" / TASK / "0"
    grade = yaml.safe_load((folder / "grade.yaml").read_text())
    trajectory = yaml.safe_load((folder / "trajectory.yaml").read_text())
    assert trajectory["termination_reason"] == "user_stop"
    user_calls = [call for call in trajectory["tool_calls"] if call["executor"] == "user"]
    assert [(call["name"], call["status"]) for call in user_calls] == [("toggle_airplane_mode", "SUCCESS")]
    stored_in = trajectory["messages"][user_calls[0]["output_in_message"]]  # the output is stored once
    assert stored_in["content"] == "Airplane mode is now off."
    # The phone was repaired by the user's own tool call, which the custom check accepts.
    assert grade["binary_pass"], grade["reasons"]
    assert summary.pass_rate == 1.0

    assert turns == {"agent": 3, "customer": 3}
    first = customer_requests[0]
    system = first["messages"][0]
    assert system["role"] == "system" and "Persona: cooperative" in system["content"]
    assert "###STOP###" in system["content"] and "airplane mode" in system["content"].lower()
    # The customer model is offered the user-side tools only, never the agent's.
    offered = {tool["function"]["name"] for tool in first["tools"]}
    assert offered == {"check_status_bar", "toggle_airplane_mode", "restart_device"}
    # It sees the conversation from the customer's side: the agent's words arrive as the other party's.
    assert any(m["role"] == "user" for m in first["messages"][1:])
    # The result of its own tool call reached it on the next request.
    assert any(
        m["role"] == "tool" and m.get("tool_call_id") == "u1" for m in customer_requests[1]["messages"]
    )
