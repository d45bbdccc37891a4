"""The verifiers adapter in process: verifiers' own rollout loop against a local chat server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from openai import AsyncOpenAI
from verifiers.clients import OpenAIChatCompletionsClient  # pyright: ignore[reportMissingTypeStubs]

from tolokaforge.env import Environments
from tolokaforge.env.adapters.verifiers_env import TolokaforgeEnv, load_environment

TASK = "write_update_shipping_address"


@pytest.fixture
async def lookup_model() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    """A chat server that always asks for the customer's details; yields its URL and the requests it got."""
    requests: list[dict[str, Any]] = []

    async def answer(request: web.Request) -> web.Response:
        requests.append(json.loads(await request.text()))
        call = {
            "id": "c1",
            "type": "function",
            "function": {"name": "get_customer_details", "arguments": '{"customer_id": "C-105"}'},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
        return web.json_response(
            {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]}
        )

    app = web.Application()
    app.router.add_post("/v1/chat/completions", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}/v1", requests
    await runner.cleanup()


def _quiet(*_args: Any) -> None:
    """Replaces verifiers' progress bar."""


async def test_the_dataset_is_the_packs_tasks_and_the_prompt_comes_from_the_reset(
    retail: Path, lookup_model: tuple[str, list[dict[str, Any]]]
) -> None:
    url, requests = lookup_model
    async with Environments.open(retail) as envs:
        env = load_environment(envs)
        assert isinstance(env, TolokaforgeEnv)
        assert len(env.get_eval_dataset()) == len(envs.task_ids)  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        one = load_environment(envs, [TASK], max_turns=2)
        client = OpenAIChatCompletionsClient(AsyncOpenAI(base_url=url, api_key="local"))
        await one.evaluate(client, "m", on_start=_quiet, on_progress=_quiet)  # pyright: ignore[reportUnknownMemberType]
    first, second = requests
    # The model saw the trial's own system prompt and first user message, and the task's tools.
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert first["messages"][1]["content"] == envs.tasks[TASK].task.initial_user_message
    assert "update_shipping_address" in {tool["function"]["name"] for tool in first["tools"]}
    # Its tool call ran through the runner: the second request carries the tool's answer.
    assert second["messages"][-1]["role"] == "tool" and "C-105" in second["messages"][-1]["content"]


async def test_a_rollout_verifiers_cuts_short_scores_zero_and_releases_its_trial(
    retail: Path, tmp_path: Path, lookup_model: tuple[str, list[dict[str, Any]]]
) -> None:
    url, _requests = lookup_model
    async with Environments.open(retail, output=tmp_path / "run") as envs:
        env = load_environment(envs, [TASK], max_turns=1)
        client = OpenAIChatCompletionsClient(AsyncOpenAI(base_url=url, api_key="local"))
        results = await env.evaluate(  # pyright: ignore[reportUnknownMemberType]
            client, "m", state_columns=["tolokaforge_grade"], on_start=_quiet, on_progress=_quiet
        )
    [out] = results["outputs"]
    assert out["reward"] == 0.0
    assert out["metrics"]["tolokaforge_passed"] == 0.0
    assert "verifiers stopped the rollout (max_turns_reached)" in out["tolokaforge_grade"]["reasons"][0]
    summary = yaml.safe_load((tmp_path / "run" / "summary.yaml").read_text())
    assert summary["ran"] == 1 and summary["passed"] == 0
