"""Telecom trajectories with planted mistakes, graded here and by τ²'s own evaluator in the same run.

A deterministic sample of telecom tasks (those whose reward includes ACTION, and as many that are env
assertions only) runs with golden agents that each make one mistake: the last user-side device action
left out (the phone stays broken: ENV_ASSERTION 0), an agent action's argument changed (ACTION 0, and τ²'s
tool answers an error), a tool that does not exist called first (answered, the episode goes on), or none.
The run is exported and τ²'s ``evaluate_simulation`` must give every trial our reward and breakdown.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tolokaforge.core.models import GoldenAction, TaskDescription
from tolokaforge.host.agents import GoldenAgent
from tolokaforge.host.packs import Pack, load_pack
from tolokaforge.host.results.tau2_export import export_tau2_results
from tolokaforge.host.run.schedule import RunSettings, run_pack
from tolokaforge.host.turns import AgentTurn, ProposedCall
from tolokaforge.host.users.router import UserRouter

from .parity import assert_tau2_parity

pytest.importorskip("tau2.evaluator.evaluator")

MISTAKES = ("golden", "no_last_user_action", "changed_argument", "unknown_tool_first")
SAMPLE = 3
"""Tasks per kind (ACTION in the basis, env assertions only): each runs every mistake once."""


def _sample(pack: Pack) -> tuple[str, ...]:
    with_actions = [t.task_id for t in pack.tasks if t.task.grading.tau2_actions is not None]
    env_only = [t.task_id for t in pack.tasks if t.task.grading.tau2_actions is None]
    return (*with_actions[:SAMPLE], *env_only[:SAMPLE])


def _planted(task: TaskDescription, mistake: str) -> list[GoldenAction]:
    state_checks = task.grading.state_checks
    actions = list(state_checks.golden_actions if state_checks is not None else [])
    if mistake == "no_last_user_action":
        user_side = [i for i, action in enumerate(actions) if action.executor == "user"]
        if user_side:
            del actions[user_side[-1]]
    elif mistake == "changed_argument":
        agent_side = [
            i for i, action in enumerate(actions) if action.executor == "agent" and action.arguments
        ]
        if agent_side:
            action = actions[agent_side[0]]
            key = sorted(action.arguments)[0]
            actions[agent_side[0]] = action.model_copy(
                update={"arguments": {**action.arguments, key: "X-planted"}}
            )
    return actions


class _UnknownFirst:
    def __init__(self, golden: GoldenAgent) -> None:
        self._golden = golden
        self._said = False

    async def next_turn(self, messages: object, tools: object) -> AgentTurn:
        if not self._said:
            self._said = True
            return AgentTurn(
                content="", tool_calls=(ProposedCall("planted-1", "no_such_tool", json.dumps({})),)
            )
        return await self._golden.next_turn(messages, tools)  # pyright: ignore[reportArgumentType]


@dataclass
class _Agents:
    name: str = "scripted"
    model: str | None = None
    _given: dict[str, int] = field(default_factory=dict[str, int])

    def for_trial(self, task: TaskDescription) -> object:
        order = self._given.get(task.task_id, 0)
        self._given[task.task_id] = order + 1
        mistake = MISTAKES[order % len(MISTAKES)]
        golden = GoldenAgent(_planted(task, mistake), task.golden_response, [t.name for t in task.user_tools])
        return _UnknownFirst(golden) if mistake == "unknown_tool_first" else golden


def test_planted_telecom_mistakes_score_as_tau2_scores_them(tmp_path: Path) -> None:
    pack = load_pack(Path("tau2:telecom"), split="full")
    tasks = _sample(pack)
    assert len(tasks) == 2 * SAMPLE
    summary = asyncio.run(
        run_pack(
            pack,
            _Agents(),  # pyright: ignore[reportArgumentType]
            UserRouter(stand_in=True),
            # concurrency 1: trials start in order, so each task's n-th trial makes the n-th mistake
            RunSettings(output=tmp_path / "run", trials=len(MISTAKES), concurrency=1, task_ids=tasks),
        )
    )
    results = assert_tau2_parity(export_tau2_results(tmp_path / "run", tmp_path / "results.json"), summary)
    rewards = [simulation.reward_info.reward for simulation in results.simulations]
    assert len(rewards) == len(tasks) * len(MISTAKES)
    assert 0.0 in rewards and 1.0 in rewards  # the mistakes cost rewards; golden trials keep them
