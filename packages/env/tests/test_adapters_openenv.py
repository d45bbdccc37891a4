"""The OpenEnv adapter in process: OpenEnv's server over an open Environments, its sessions, its sync API."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import yaml

from tolokaforge.env import Environments, golden_call
from tolokaforge.env.adapters.openenv_env import (
    ChatAction,
    ChatObservation,
    TolokaforgeClient,
    TolokaforgeEnvironment,
    serve,
)

TASK = "write_update_shipping_address"


def _golden_moves(envs: Environments, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The task's golden play as assistant messages: its tool calls, then its golden response."""
    task = envs.tasks[TASK].task
    checks = task.grading.state_checks
    assert checks is not None
    offered = [str(tool["function"]["name"]) for tool in tools]
    calls = [golden_call(action, n + 1, offered) for n, action in enumerate(checks.golden_actions)]
    return [*calls, {"role": "assistant", "content": task.golden_response}]


async def test_served_by_openenvs_server_with_this_envs_schemas(retail: Path) -> None:
    async with Environments.open(retail) as envs, serve(envs) as url, httpx.AsyncClient(base_url=url) as http:
        health = await http.get("/health")
        schema = (await http.get("/schema")).json()
        # OpenEnv's stateless reset: a throwaway environment, its trial released when the request ends.
        reset = (await http.post("/reset", json={"task_id": TASK, "seed": 1})).json()
    assert health.status_code == 200
    assert [m["role"] for m in reset["observation"]["messages"]] == ["system", "user"]
    assert "message" in schema["action"]["properties"]
    assert {"system_prompt", "tools", "messages", "passed", "reasons"} <= set(
        schema["observation"]["properties"]
    )


async def test_a_session_plays_an_episode_and_gets_the_grade_on_its_last_step(
    retail: Path, tmp_path: Path
) -> None:
    async with Environments.open(retail, output=tmp_path / "run") as envs, serve(envs) as url:
        client = TolokaforgeClient(base_url=url)
        try:
            first = await client.reset(task_id=TASK, seed=3)
            observation = first.observation
            assert observation.system_prompt and observation.tools
            assert [m["role"] for m in observation.messages] == ["system", "user"]
            assert (await client.state()).task_id == TASK
            results = [
                await client.step(ChatAction(message=move)) for move in _golden_moves(envs, observation.tools)
            ]
            # A tool-call step answers with the tool's result and no reward yet.
            assert results[0].observation.messages[0]["role"] == "tool" and results[0].reward is None
            while not results[-1].done:
                results.append(
                    await client.step(ChatAction(message={"role": "assistant", "content": "Anything else?"}))
                )
            last = results[-1]
        finally:
            await client.close()
    grade = yaml.safe_load(next((tmp_path / "run").glob(f"trials/{TASK}/*/grade.yaml")).read_text())
    assert last.reward == grade["score"] == 1.0
    assert last.observation.passed is True and last.observation.reasons == grade["reasons"]
    assert last.observation.termination is not None


async def test_the_sync_api_works_from_another_thread_and_close_releases_the_trial(
    retail: Path, tmp_path: Path
) -> None:
    async with Environments.open(retail, output=tmp_path / "run") as envs:
        env = TolokaforgeEnvironment(envs, asyncio.get_running_loop(), task_id=TASK)
        first = await asyncio.to_thread(env.reset)
        move = _golden_moves(envs, first.tools)[0]
        stepped: ChatObservation = await asyncio.to_thread(env.step, ChatAction(message=move))
        assert stepped.messages[0]["role"] == "tool" and not stepped.done
        assert env.state.step_count == 1 and env.state.task_id == TASK
        # Closed mid-episode, as OpenEnv closes a dropped session (from a worker thread).
        await asyncio.to_thread(env.close)
    summary = yaml.safe_load((tmp_path / "run" / "summary.yaml").read_text())
    assert summary["ran"] == 1 and summary["passed"] == 0
