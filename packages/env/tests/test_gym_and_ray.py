"""The gymnasium wrapper passes gymnasium's own checker; rollouts on a local Ray cluster grade as embedded
ones, with many episodes' calls batched into one actor call per worker, each call's error its own."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from gymnasium.utils.env_checker import check_env

from tolokaforge.core.models import TaskDescription
from tolokaforge.env import Environments, GymEnv, Reward, golden_call, golden_policy, rollouts
from tolokaforge.env.environments import user_recipe
from tolokaforge.env.ray_envs import RayEnv, open_ray_pool
from tolokaforge.host import TrialSettings, load_pack


def test_the_gym_wrapper_passes_gymnasiums_env_checker(retail: Path) -> None:
    env = GymEnv(retail, isolation="process")
    try:
        check_env(env, skip_render_check=True)
        observation, info = env.reset(seed=7, options={"task_id": "lookup_order_tracking"})
        messages = json.loads(observation)
        assert [m["role"] for m in messages] == ["system", "user"] and info["trial_id"].startswith(
            "lookup_order_tracking:"
        )
        tools = {tool["function"]["name"] for tool in info["tools"]}
        call = {
            "id": "c1",
            "type": "function",
            "function": {"name": "get_order_details", "arguments": '{"order_id": "O-50064"}'},
        }
        assert "get_order_details" in tools
        observation, reward, terminated, truncated, details = env.step(
            json.dumps({"role": "assistant", "tool_calls": [call]})
        )
        assert details["tool_statuses"] == ["SUCCESS"] and json.loads(observation)[0]["role"] == "tool"
        assert (reward, terminated, truncated) == (0.0, False, False)
    finally:
        env.close()


@pytest.fixture(scope="module")
def ray_cluster(ray_turn: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """This module's local cluster (as ``--ray local`` starts one); stopped when the module ends."""
    from tolokaforge.host.run.ray.cluster import ray, start_local_cluster

    start_local_cluster(num_cpus=2, temp_dir=str(tmp_path_factory.mktemp("ray")))
    try:
        yield str(ray.get_runtime_context().gcs_address)
    finally:
        ray.shutdown()


@pytest.mark.ray
@pytest.mark.parametrize("batch", [True, False], ids=["batched", "one-call-each"])
async def test_a_ray_rollout_steps_on_workers_and_writes_the_same_grades(
    ray_cluster: str, retail: Path, tmp_path: Path, batch: bool
) -> None:
    output = tmp_path / "ray"
    async with Environments.open(
        retail, ray=ray_cluster, ray_batch=batch, isolation="process", output=output
    ) as envs:
        assert envs.recorder is not None
        results = [result async for result in rollouts(envs, golden_policy(envs), episodes=12, concurrency=6)]
    assert len(results) == 12 and all(result.reward.passed for result in results)
    assert all(result.messages[0]["role"] == "system" and result.steps >= 1 for result in results)
    manifest = yaml.safe_load((output / "run.yaml").read_text())
    assert manifest["runner"]["mode"] == "ray" and manifest["runner"]["workers"] == 2
    assert manifest["runner"]["batched_calls"] is batch
    summary = yaml.safe_load((output / "summary.yaml").read_text())
    assert summary["outcomes"]["passed"] == 12


@pytest.mark.ray
async def test_many_concurrent_episodes_on_ray_batched_grade_exactly_as_embedded(
    ray_cluster: str, retail: Path
) -> None:
    async def rewards(**how: Any) -> dict[tuple[str, int], Reward]:
        async with Environments.open(retail, isolation="process", **how) as envs:
            policy = golden_policy(envs)
            return {
                (r.task_id, r.seed): r.reward
                async for r in rollouts(envs, policy, episodes=40, concurrency=40)
            }

    embedded = await rewards()
    on_ray = await rewards(ray=ray_cluster)  # batched: the default
    assert len(embedded) == 40 and all(reward.passed for reward in embedded.values())
    assert on_ray == embedded


class _Golden:
    """One episode's golden play: the task's golden actions as tool calls, then its golden response."""

    def __init__(self, env: RayEnv, task: TaskDescription, tools: list[dict[str, Any]]) -> None:
        checks = task.grading.state_checks
        self.env = env
        self.actions = [
            a for a in (checks.golden_actions if checks is not None else []) if a.executor != "user"
        ]
        self.names = [tool["function"]["name"] for tool in tools]
        self.response = task.golden_response or "Done."
        self.made = 0

    def message(self) -> dict[str, Any]:
        self.made += 1
        if self.made <= len(self.actions):
            return golden_call(self.actions[self.made - 1], self.made, self.names)
        return {"role": "assistant", "content": self.response}

    async def finish(self) -> Reward:
        while not self.env.done:
            await self.env.step(self.message())
        return await self.env.reward()


@pytest.mark.ray
async def test_a_failing_or_cancelled_step_in_a_batch_is_its_episodes_alone(
    ray_cluster: str, retail: Path
) -> None:
    pack = load_pack(retail)
    indices = itertools.count()
    settings = TrialSettings(run_id="batch", max_attempts=1, default_max_turns=30)
    async with open_ray_pool(
        ray_cluster, pack, settings, "process", user_recipe(None, pack), lambda _task, _seed: next(indices)
    ) as pool:
        envs = [pool.env() for _ in range(12)]
        tasks = [pack.tasks[n % len(pack.tasks)] for n in range(12)]
        observations = await asyncio.gather(
            *(env.reset(task.task_id, seed) for seed, (env, task) in enumerate(zip(envs, tasks, strict=True)))
        )
        plays = [
            _Golden(env, task.task, observation.tools)
            for env, task, observation in zip(envs, tasks, observations, strict=True)
        ]
        broken = {"role": "assistant", "tool_calls": "not a list"}
        # All 12 steps asked in one turn of the loop: one batch per worker, the broken one among them.
        steps = [asyncio.ensure_future(envs[0].step(broken))]
        steps += [asyncio.ensure_future(play.env.step(play.message())) for play in plays[1:]]
        answers = await asyncio.gather(*steps, return_exceptions=True)
        error = answers[0]
        assert isinstance(error, AttributeError), answers[0]
        assert "raised on a Ray env worker" in "\n".join(getattr(error, "__notes__", []))
        assert all(isinstance(answer, tuple) for answer in answers[1:]), answers
        # A caller cancelled while its batch is out: the batch's other answers still arrive.
        cancelled = asyncio.ensure_future(plays[1].env.step(plays[1].message()))
        rest = [asyncio.ensure_future(play.env.step(play.message())) for play in plays[2:]]
        for _ in range(3):
            await asyncio.sleep(0)  # the callers' turn, then the flush's: the batch is on its way
        cancelled.cancel()
        assert all(isinstance(answer, tuple) for answer in await asyncio.gather(*rest))
        rewards = await asyncio.gather(*(play.finish() for play in plays[2:]))
        assert all(reward.passed for reward in rewards), [reward.reasons for reward in rewards]
        # A close cancelled before its batch is sent still goes: the trial is released all the same.
        closing = [asyncio.ensure_future(env.close()) for env in envs[:2]]
        await asyncio.sleep(0)  # the closes are asked; their batch is not sent yet
        for close in closing:
            close.cancel()
        await asyncio.gather(*closing, return_exceptions=True)
        counts = [await worker.counts.remote() for worker in pool.workers]
        for _ in range(1200):  # the finishes are on their way (up to a minute on a loaded machine)
            if not any(count["episodes"] for count in counts):
                break
            await asyncio.sleep(0.05)
            counts = [await worker.counts.remote() for worker in pool.workers]
        assert [count["episodes"] for count in counts] == [0, 0]
        assert sum(count["calls"] for count in counts) > sum(count["batches"] for count in counts)
