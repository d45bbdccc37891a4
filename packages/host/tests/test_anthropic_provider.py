"""Anthropic's Messages API, natively: a local server speaking it drives a real CLI run with the llm agent
through a tool call; --gen settings reach each provider's wire and run.yaml; one price table for both."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from aiohttp import web

from tolokaforge.host.agents import GoldenAgentFactory
from tolokaforge.host.cli.run_command import judge_model_config
from tolokaforge.host.errors import ConfigError
from tolokaforge.host.llm import DEFAULT_PRICES, load_prices
from tolokaforge.host.llm.generation import Generation, parse_generation
from tolokaforge.host.llm.pricing import price_for
from tolokaforge.host.packs import load_pack
from tolokaforge.host.run.config_file import read_run_config
from tolokaforge.host.run.schedule import RunSettings, run_pack
from tolokaforge.host.users.router import UserRouter

if TYPE_CHECKING:
    from conftest import ChatServer, Replies, Responder

TASK = "lookup_order_tracking"
MODEL = "anthropic/claude-sonnet-4-5"


@dataclass
class MessagesServer:
    """A Messages API endpoint on loopback; it refuses a request without the key and version headers."""

    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    reply: Callable[[dict[str, Any]], web.Response] | None = None
    """Answers a request body; None plays the retail agent looking an order up."""


def _message(*blocks: dict[str, Any]) -> web.Response:
    return web.json_response(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": list(blocks),
            "stop_reason": "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn",
            "usage": {"input_tokens": 1000, "output_tokens": 200},
        }
    )


@pytest.fixture
async def messages_server() -> AsyncIterator[MessagesServer]:
    server = MessagesServer()

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.headers.get("x-api-key") != "test-key" or "anthropic-version" not in request.headers:
            return web.json_response({"type": "error", "error": {"type": "authentication_error"}}, status=401)
        body = json.loads(await request.text())
        server.requests.append(body)
        if server.reply is not None:
            return server.reply(body)
        if not body.get("tools"):  # the preflight's one call
            return _message({"type": "text", "text": "OK"})
        if not any(turn["role"] == "assistant" for turn in body["messages"]):
            return _message(
                {"type": "text", "text": "Let me look that up."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_order_details",
                    "input": {"order_id": "O-50064"},
                },
            )
        return _message({"type": "text", "text": "Tracking 1Z1749276956, arriving 2026-03-19."})

    app = web.Application()
    app.router.add_post("/v1/messages", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    server.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    yield server
    await runner.cleanup()


async def _cli(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
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
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_an_anthropic_model_runs_a_task_through_a_tool_call(
    packs_dir: Path, tmp_path: Path, messages_server: MessagesServer
) -> None:
    output = tmp_path / "run"
    code, out, err = await _cli(
        ["run", "--pack", str(packs_dir / "retail"), "--task", TASK, "--agent", "llm", "--model", MODEL,
         "--gen", "agent.temperature=0.3", "--gen", "agent.max_tokens=512", "--output", str(output)],
        {"ANTHROPIC_BASE_URL": messages_server.url, "ANTHROPIC_API_KEY": "test-key"},
    )  # fmt: skip
    assert code == 0, out + err
    turns = [body for body in messages_server.requests if body.get("tools")]
    assert len(turns) >= 2  # the lookup, the answer, and one more per line the scripted user adds
    first, second = turns[:2]
    assert first["model"] == "claude-sonnet-4-5"  # the prefix chose the provider and is not sent
    assert (first["temperature"], first["max_tokens"]) == (0.3, 512)
    assert isinstance(first["system"], str) and first["system"]
    assert all(turn["role"] != "system" for turn in first["messages"])
    tool = next(spec for spec in first["tools"] if spec["name"] == "get_order_details")
    assert tool["input_schema"]["type"] == "object"
    # The agent's tool_use goes back as the assistant's block and its result as a user tool_result block.
    assistant = next(turn for turn in second["messages"] if turn["role"] == "assistant")
    assert {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "get_order_details",
        "input": {"order_id": "O-50064"},
    } in (assistant["content"])
    result = second["messages"][-1]
    assert result["role"] == "user" and result["content"][0]["type"] == "tool_result"
    assert (
        result["content"][0]["tool_use_id"] == "toolu_1" and "1Z1749276956" in result["content"][0]["content"]
    )
    manifest = yaml.safe_load((output / "run.yaml").read_text())
    assert manifest["models"]["agent"] == MODEL
    assert manifest["options"]["gen"] == {"agent": {"temperature": 0.3, "max_tokens": 512}}
    assert manifest["options"]["anthropic_base_url"] == messages_server.url
    summary = yaml.safe_load((output / "summary.yaml").read_text())
    assert summary["passed"] == 1  # the state the tool call reached grades as the golden path's
    usage = summary["models"][MODEL]
    calls = len(turns)
    assert (usage["llm_calls"], usage["prompt_tokens"], usage["completion_tokens"]) == (
        calls,
        1000 * calls,
        200 * calls,
    )
    assert usage["cost_usd"] == pytest.approx(calls * (1000 * 3.0 + 200 * 15.0) / 1e6)


async def test_a_seed_for_an_anthropic_model_is_refused_before_any_call(
    packs_dir: Path, tmp_path: Path, messages_server: MessagesServer
) -> None:
    code, out, err = await _cli(
        ["run", "--pack", str(packs_dir / "retail"), "--task", TASK, "--agent", "llm", "--model", MODEL,
         "--gen", "agent.seed=7", "--output", str(tmp_path / "run")],
        {"ANTHROPIC_BASE_URL": messages_server.url, "ANTHROPIC_API_KEY": "test-key"},
    )  # fmt: skip
    assert code == 2, out + err
    assert "--gen agent.seed" in out + err and "no seed" in out + err
    assert messages_server.requests == [] and not (tmp_path / "run").exists()


async def test_generation_settings_reach_an_openai_compatible_server_per_role(
    packs_dir: Path,
    tmp_path: Path,
    chat_server: Callable[[Responder], Awaitable[ChatServer]],
    replies: Replies,
) -> None:
    async def respond(body: dict[str, Any], count: int) -> web.StreamResponse:
        if body.get("tools") and replies.assistant_turns(body) == 0:
            return replies.completion(replies.tool_call("c1", "get_order_details", '{"order_id": "O-50064"}'))
        return replies.completion({"content": "Tracking 1Z1749276956, arriving 2026-03-19."})

    server = await chat_server(respond)
    output = tmp_path / "run"
    code, out, err = await _cli(
        ["run", "--pack", str(packs_dir / "retail"), "--task", TASK, "--agent", "llm", "--model", "openai/gpt-4o",
         "--gen", "agent.seed=7", "--gen", "agent.max_tokens=300", "--gen", "agent.reasoning_effort=low",
         "--gen", "agent.temperature=0", "--output", str(output)],
        {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "test-key"},
    )  # fmt: skip
    assert code == 0, out + err
    turns = [body for body in server.requests if body.get("tools")]
    assert turns and all(body["model"] == "gpt-4o" for body in turns)
    for body in turns:
        assert (
            body["seed"],
            body["max_completion_tokens"],
            body["reasoning_effort"],
            body["temperature"],
        ) == (
            7,
            300,
            "low",
            0.0,
        )
    manifest = yaml.safe_load((output / "run.yaml").read_text())
    assert manifest["options"]["gen"] == {
        "agent": {"temperature": 0.0, "seed": 7, "max_tokens": 300, "reasoning_effort": "low"}
    }
    # openai/gpt-4o is priced from the table's gpt-4o row.
    usage = yaml.safe_load((output / "summary.yaml").read_text())["models"]["openai/gpt-4o"]
    assert usage["cost_usd"] == pytest.approx(
        usage["prompt_tokens"] * 2.5e-6 + usage["completion_tokens"] * 1e-5
    )


def test_gen_values_are_parsed_per_role_and_every_wrong_one_is_named() -> None:
    assert parse_generation(["agent.temperature=0.2", "judge.seed=3", "user.reasoning_effort=high"]) == {
        "agent": Generation(temperature=0.2),
        "judge": Generation(seed=3),
        "user": Generation(reasoning_effort="high"),
    }
    with pytest.raises(ConfigError) as raised:
        parse_generation(["agent.temprature=1", "critic.seed=1", "agent.max_tokens=0", "user.seed=x", "seed"])
    message = str(raised.value)
    for part in (
        "'agent.temprature=1'",
        "role 'critic'",
        "max_tokens must be > 0",
        "'user.seed=x'",
        "ROLE.KEY",
    ):
        assert part in message


def test_one_price_table_prices_both_providers_and_a_file_extends_it(tmp_path: Path) -> None:
    assert price_for(DEFAULT_PRICES, "openai/gpt-4o") == price_for(DEFAULT_PRICES, "gpt-4o") is not None
    dated = price_for(DEFAULT_PRICES, "anthropic/claude-sonnet-4-5-20250929")
    assert dated is not None and (dated.prompt_per_million, dated.completion_per_million) == (3.0, 15.0)
    assert price_for(DEFAULT_PRICES, "claude-sonnet-4-5") is None  # bare means OpenAI-compatible
    prices = tmp_path / "prices.yaml"
    prices.write_text(
        "openai/gpt-9: {prompt: 1, completion: 2}\nanthropic/claude-next: {prompt: 4, completion: 8}\n"
    )
    table = load_prices(prices)
    assert price_for(table, "gpt-9") == price_for(table, "openai/gpt-9") is not None
    found = price_for(table, "anthropic/claude-next")
    assert found is not None and found.cost(1_000_000, 1_000_000) == 12.0


async def test_an_anthropic_judge_gets_its_settings_and_reports_through_tool_use(
    packs_dir: Path, tmp_path: Path, messages_server: MessagesServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.delenv("TOLOKAFORGE_JUDGE_API_KEY", raising=False)
    report: dict[str, Any] = {"reasons": "price stated and accepted before the purchase"}
    for criterion in ("price_before_purchase", "new_cap_confirmed", "plain_words"):
        report[f"{criterion}_justification"] = "seen in the transcript\nVERDICT: MET"
        report[criterion] = True if criterion != "plain_words" else 1.0
    messages_server.reply = lambda body: _message(
        {"type": "tool_use", "id": "toolu_r", "name": "submit_report", "input": report}
    )
    judge = judge_model_config(
        "anthropic/claude-haiku-4-5", messages_server.url, None, Generation(temperature=0.1, max_tokens=800)
    )
    assert judge is not None and judge.api_key_env == ["TOLOKAFORGE_JUDGE_API_KEY", "ANTHROPIC_API_KEY"]
    output = tmp_path / "run"
    settings = RunSettings(output=output, task_ids=("dc_data_addon_judged",), judge_model=judge)
    await run_pack(load_pack(packs_dir / "dual_control"), GoldenAgentFactory(), UserRouter(), settings)

    [request] = messages_server.requests
    assert (request["model"], request["temperature"], request["max_tokens"]) == ("claude-haiku-4-5", 0.1, 800)
    assert "submit_report" in {tool["name"] for tool in request["tools"]} and request["system"]
    grade = yaml.safe_load((output / "trials" / "dc_data_addon_judged" / "0" / "grade.yaml").read_text())
    assert grade["judge_status"] == "completed" and grade["components"]["llm_judge"] == 1.0
    assert grade["judge"]["cost_usd"] == pytest.approx((1000 * 1.0 + 200 * 5.0) / 1e6)


def test_a_judge_seed_for_an_anthropic_model_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"--gen judge\.seed"):
        judge_model_config("anthropic/claude-haiku-4-5", "http://127.0.0.1:9", None, Generation(seed=1))


def _run_config(tmp_path: Path, agent: dict[str, Any]) -> Path:
    path = tmp_path / "run_config.yaml"
    document = {
        "models": {"agent": agent},
        "evaluation": {"task_packs": ["packs/a"], "output_dir": "results/a"},
    }
    path.write_text(yaml.safe_dump(document))
    return path


def test_a_run_config_maps_provider_and_generation_keys_or_refuses_them_by_path(tmp_path: Path) -> None:
    block = {"provider": "anthropic", "name": "claude-sonnet-4-5", "temperature": 0.2, "max_tokens": 900}
    [model] = read_run_config(_run_config(tmp_path, block)).agent_models
    assert model.name == MODEL and model.generation == Generation(temperature=0.2, max_tokens=900)
    openai = {"provider": "openai", "name": "o4-mini", "seed": 5, "reasoning": "high", "max_tokens": 64}
    [model] = read_run_config(_run_config(tmp_path, openai)).agent_models
    assert model.name == "o4-mini"
    assert model.generation == Generation(temperature=0.0, seed=5, max_tokens=64, reasoning_effort="high")
    with pytest.raises(ConfigError) as raised:
        read_run_config(_run_config(tmp_path, {**block, "seed": 1, "reasoning": "low", "top_p": 0.9}))
    message = str(raised.value)
    for part in (
        "models.agent.seed: not supported for provider anthropic",
        "models.agent.reasoning:",
        "models.agent.top_p:",
    ):
        assert part in message
