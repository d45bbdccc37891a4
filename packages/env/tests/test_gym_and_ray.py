"""The gymnasium wrapper passes gymnasium's own checker; rollouts on a local Ray cluster grade as embedded ones."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from gymnasium.utils.env_checker import check_env

from tolokaforge.env import Environments, GymEnv, golden_policy, rollouts


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
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """This module's local cluster (as ``--ray local`` starts one); stopped when the module ends."""
    from tolokaforge.host.run.ray.cluster import ray, start_local_cluster

    start_local_cluster(num_cpus=2, temp_dir=str(tmp_path_factory.mktemp("ray")))
    try:
        yield str(ray.get_runtime_context().gcs_address)
    finally:
        ray.shutdown()


@pytest.mark.ray
async def test_a_ray_rollout_steps_on_workers_and_writes_the_same_grades(
    ray_cluster: str, retail: Path, tmp_path: Path
) -> None:
    output = tmp_path / "ray"
    async with Environments.open(retail, ray=ray_cluster, isolation="process", output=output) as envs:
        assert envs.recorder is not None
        results = [result async for result in rollouts(envs, golden_policy(envs), episodes=12, concurrency=6)]
    assert len(results) == 12 and all(result.reward.passed for result in results)
    assert all(result.messages[0]["role"] == "system" and result.steps >= 1 for result in results)
    manifest = yaml.safe_load((output / "run.yaml").read_text())
    assert manifest["runner"]["mode"] == "ray" and manifest["runner"]["workers"] == 2
    summary = yaml.safe_load((output / "summary.yaml").read_text())
    assert summary["outcomes"]["passed"] == 12
