"""The retail pack driven turn by turn: observations, tool results, rewards equal to the CLI's grades."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tolokaforge.env import Environments, EpisodeResult, golden_call, golden_policy, rollouts

TASK = "lookup_order_tracking"
CLI = str(Path(sys.executable).with_name("tolokaforge"))


def _golden_actions(envs: Environments, task_id: str) -> list[Any]:
    checks = envs.tasks[task_id].task.grading.state_checks
    assert checks is not None
    return list(checks.golden_actions)


def _cli_grade(pack: Path, task_id: str, output: Path) -> dict[str, Any]:
    command = [CLI, "run", "--pack", str(pack), "--agent", "golden"]
    command += ["--task", task_id, "--output", str(output), "--isolation", "process"]
    subprocess.run(command, check=True, capture_output=True, text=True, timeout=300)
    return yaml.safe_load((output / "trials" / task_id / "0" / "grade.yaml").read_text())


async def test_reset_shows_the_system_prompt_the_tools_and_the_first_user_message(retail: Path) -> None:
    async with Environments.open(retail, isolation="process") as envs:
        env = envs.env()
        observation = await env.reset(TASK, seed=0)
        task = envs.tasks[TASK].task
        assert observation.system_prompt == task.system_prompt
        assert [m["role"] for m in observation.messages] == ["system", "user"]
        assert observation.messages[1]["content"] == task.initial_user_message
        names = {tool["function"]["name"] for tool in observation.tools}
        assert {action.tool_name for action in _golden_actions(envs, TASK)} <= names
        assert all(
            tool["type"] == "function" and "parameters" in tool["function"] for tool in observation.tools
        )
        assert not observation.done and env.trial_id == f"{TASK}:0"
        await env.close()


async def test_golden_steps_get_tool_results_and_the_reward_is_the_clis_grade(
    retail: Path, tmp_path: Path
) -> None:
    cli = _cli_grade(retail, TASK, tmp_path / "cli")
    async with Environments.open(retail, isolation="process") as envs:
        env = envs.env()
        observation = await env.reset(TASK, seed=0)
        names = [tool["function"]["name"] for tool in observation.tools]
        for number, action in enumerate(_golden_actions(envs, TASK), start=1):
            observation, done, info = await env.step(golden_call(action, number, names))
            assert not done and info.tool_statuses == ("SUCCESS",) and info.turn == number
            [result] = observation.messages
            assert result["role"] == "tool" and result["tool_call_id"] == f"golden-{number}"
            assert json.loads(result["content"])  # the tool's real answer
        final = envs.tasks[TASK].task.golden_response or "Done."
        done, info = False, None
        while not done:  # words go to the scripted user, who answers until its flow says stop
            observation, done, info = await env.step({"role": "assistant", "content": final})
            assert [m["role"] for m in observation.messages] == ["user"] and info.tool_statuses == ()
        assert info is not None and info.termination == "user_stop"
        reward = await env.reward()
        await env.close()
    assert reward.graded and reward.passed and reward.value == cli["score"] == 1.0
    assert dict(reward.components) == cli["components"]
    assert list(reward.reasons) == cli["reasons"]


async def test_a_wrong_action_is_rewarded_below_one_with_reasons(retail: Path) -> None:
    task_id = "write_cancel_processing_order"
    async with Environments.open(retail, isolation="process") as envs:
        assert task_id in envs.tasks
        env = envs.env()
        observation = await env.reset(task_id, seed=0)
        names = [tool["function"]["name"] for tool in observation.tools]
        wrong = _golden_actions(envs, task_id)[-1].model_copy(deep=True)
        wrong.arguments = {**wrong.arguments, "reason": "other"}  # the customer gave another reason
        observation, done, info = await env.step(golden_call(wrong, 1, names))
        assert not done and info.tool_statuses == ("SUCCESS",)
        bad = {
            "role": "assistant",
            "tool_calls": [{"id": "x", "function": {"name": names[0], "arguments": "{not json"}}],
        }
        observation, done, info = await env.step(bad)
        assert info.tool_statuses == ("INVALID_ARGUMENTS",) and observation.messages[0]["content"].startswith(
            "Error"
        )
        while not done:
            observation, done, info = await env.step(
                {"role": "assistant", "content": "Is there anything else?"}
            )
        reward = await env.reward()
        await env.close()
    assert reward.graded and not reward.passed and reward.value < 1.0
    assert reward.reasons and reward.components["state_checks"] is not None


async def test_32_golden_rollouts_at_concurrency_8_all_pass_and_land_in_the_run_folder(
    retail: Path, tmp_path: Path
) -> None:
    output = tmp_path / "run"
    results: list[EpisodeResult] = []
    async with Environments.open(retail, isolation="process", output=output) as envs:
        async for result in rollouts(envs, golden_policy(envs), episodes=32, concurrency=8):
            results.append(result)
    assert len(results) == 32
    assert all(result.reward.passed and result.reward.value == 1.0 for result in results)
    assert len({result.trial_id for result in results}) == 32
    assert sorted(result.seed for result in results) == list(range(32))
    summary = yaml.safe_load((output / "summary.yaml").read_text())
    assert summary["outcomes"]["passed"] == 32 and summary["trials"] == 32
    listed = {(entry["task_id"], entry["trial_index"]) for entry in summary["per_trial"]}
    assert listed == {(result.task_id, result.seed) for result in results}
    for result in results:
        grade = yaml.safe_load(
            (output / "trials" / result.task_id / str(result.seed) / "grade.yaml").read_text()
        )
        assert grade["score"] == result.reward.value
    report = subprocess.run([CLI, "report", str(output)], capture_output=True, text=True)
    assert report.returncode == 0, report.stderr
