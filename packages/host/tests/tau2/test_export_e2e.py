"""A τ² run end to end: run ``tau2:retail`` and ``tau2:airline`` (two trials per task) on the embedded
runner (``--isolation process``: the sandbox adds ~10 s here and nothing this test checks), export it, load it with τ²'s ``Results.load``, and check that τ²'s own evaluator gives every
simulation the reward and breakdown our grade gave and that τ²'s pass^k is ours (parity.py).

The agent is golden with planted variations, so the run has failures of each kind: a write left out
(DB 0), the communicated string left out (COMMUNICATE 0), failing calls before the golden ones (an
unknown tool, an argument the tool lacks: τ² replays their error texts), a user who stops at once
(user_stop), and plain golden trials.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tolokaforge.contracts.runner import ToolSchema
from tolokaforge.core.models import TaskDescription
from tolokaforge.core.transcript import Message
from tolokaforge.host.agents import GoldenAgent
from tolokaforge.host.cli import main
from tolokaforge.host.packs import load_pack
from tolokaforge.host.results.summary import RunSummary
from tolokaforge.host.results.tau2_export import export_tau2_results, tau2_results
from tolokaforge.host.run.schedule import RunSettings, run_pack
from tolokaforge.host.turns import AgentTurn, ProposedCall, UserTurn
from tolokaforge.host.users.router import UserRouter

from .parity import assert_tau2_parity, load_tau2_results, tau2_disagreements

pytest.importorskip("tau2.evaluator.evaluator")

PLANS: dict[str, dict[str, list[str]]] = {
    # task -> per trial, in the order trials start: what the agent does
    "retail": {
        "0": ["golden", "no_last_write"],
        "2": ["planted_errors", "golden"],
        "10": ["golden", "golden"],
    },
    "airline": {"3": ["golden", "silent"], "7": ["no_last_write", "golden"]},
}
USER_STOPS: dict[str, dict[str, list[bool]]] = {"airline": {"0": [False, True]}}
"""task -> per trial: whether the user ends the conversation at once (``###STOP###``)."""


class _Planted:
    """A golden agent with a few calls of its own first."""

    def __init__(self, golden: GoldenAgent, first: list[ProposedCall]) -> None:
        self._golden = golden
        self._first = first

    async def next_turn(self, messages: Sequence[Message], tools: Sequence[ToolSchema]) -> AgentTurn:
        if self._first:
            return AgentTurn(content="", tool_calls=(self._first.pop(0),))
        return await self._golden.next_turn(messages, tools)


@dataclass
class _Agents:
    plans: dict[str, list[str]]
    name: str = "scripted"
    model: str | None = None
    _given: dict[str, int] = field(default_factory=dict[str, int])

    def for_trial(self, task: TaskDescription) -> Any:
        order = self._given.get(task.task_id, 0)
        self._given[task.task_id] = order + 1
        plan = self.plans.get(task.task_id, [])
        kind = plan[order] if order < len(plan) else "golden"
        state_checks = task.grading.state_checks
        actions = list(state_checks.golden_actions if state_checks is not None else [])
        user_tools = [tool.name for tool in task.user_tools]
        response = task.golden_response
        if kind == "no_last_write":
            writes = [i for i, action in enumerate(actions) if _is_write(task, action.tool_name)]
            assert writes, f"task {task.task_id} has no write to leave out"
            del actions[writes[-1]]
        elif kind == "silent":
            assert response, f"task {task.task_id} has nothing to communicate"
            response = "I have done what you asked."
        golden = GoldenAgent(actions, response, user_tools)
        if kind == "planted_errors":
            first = actions[0]
            return _Planted(
                golden,
                [
                    ProposedCall("planted-1", "no_such_tool", json.dumps({"x": 1})),
                    ProposedCall(
                        "planted-2", first.tool_name, json.dumps({**first.arguments, "not_an_argument": 1})
                    ),
                ],
            )
        return golden


def _is_write(task: TaskDescription, name: str) -> bool:
    return any(tool.name == name and tool.category == "write" for tool in task.agent_tools)


class _User:
    def __init__(self, stops: bool) -> None:
        self._stops = stops

    async def next_turn(self, messages: Sequence[Message], tools: Sequence[ToolSchema]) -> UserTurn:
        if self._stops:
            return UserTurn(content="Never mind. ###STOP###", stop=True)
        return UserTurn(content="Hello, I need help with my booking.")


@dataclass
class _Users:
    stops: dict[str, list[bool]]
    _given: dict[str, int] = field(default_factory=dict[str, int])

    def for_trial(self, task: TaskDescription) -> _User:
        order = self._given.get(task.task_id, 0)
        self._given[task.task_id] = order + 1
        plan = self.stops.get(task.task_id, [])
        return _User(plan[order] if order < len(plan) else False)


@dataclass(frozen=True)
class _Run:
    domain: str
    output: Path
    summary: RunSummary


def _run(domain: str, output: Path) -> _Run:
    pack = load_pack(Path(f"tau2:{domain}"))
    tasks = sorted({*PLANS.get(domain, {}), *USER_STOPS.get(domain, {})})
    summary = asyncio.run(
        run_pack(
            pack,
            _Agents(PLANS.get(domain, {})),
            UserRouter(llm=_Users(USER_STOPS.get(domain, {}))),
            RunSettings(output=output, trials=2, concurrency=4, task_ids=tuple(tasks), isolation="process"),
        )
    )
    return _Run(domain, output, summary)


@pytest.fixture(scope="module", params=["retail", "airline"])
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> _Run:
    domain = str(request.param)
    return _run(domain, tmp_path_factory.mktemp(f"tau2-{domain}") / "run")


def test_tau2_evaluates_every_exported_simulation_as_we_graded_it(run: _Run, tmp_path: Path) -> None:
    out = export_tau2_results(run.output, tmp_path / "results.json")
    results = assert_tau2_parity(out, run.summary)
    tasks = {*PLANS.get(run.domain, {}), *USER_STOPS.get(run.domain, {})}
    assert len(results.simulations) == 2 * len(tasks)
    assert {task.id for task in results.tasks} == tasks  # airline and retail ids are τ²'s own
    assert results.info.num_trials == 2 and results.info.environment_info.domain_name == run.domain
    assert results.info.agent_info.implementation == "tolokaforge:scripted"
    assert not any(simulation.skipped for simulation in results.simulations)
    # the planted variations made both outcomes, so the comparison is not of golden runs alone
    rewards = sorted(simulation.reward_info.reward for simulation in results.simulations)
    assert rewards[0] == 0.0 and rewards[-1] == 1.0
    assert 0.0 < run.summary.pass_hat_ks()[1] < 1.0
    document = json.loads(out.read_text())
    assert document["tolokaforge"]["verified"] is True
    assert document["tolokaforge"]["tau2_version"] == document["tolokaforge"]["pack"]["version"]


def test_the_cli_writes_the_same_results(
    run: _Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cli.json"
    with pytest.raises(SystemExit) as done:
        main(["export", "--format", "tau2", str(run.output), str(out)])
    assert done.value.code == 0, capsys.readouterr().err
    api = tau2_results(run.output).results
    loaded = load_tau2_results(out)
    assert [s.model_dump(exclude={"timestamp"}) for s in loaded.simulations] == [
        s.model_dump(exclude={"timestamp"}) for s in api.simulations
    ]


def test_a_tampered_record_is_exported_as_a_skipped_sample(
    run: _Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(run.output, copy)  # the key is found by run id: a copy verifies as the original
    task_id = sorted(PLANS[run.domain])[0]
    grade = copy / "trials" / task_id / "0" / "grade.yaml"
    edited = yaml.safe_load(grade.read_text())
    edited.update(score=1.0, binary_pass=True)
    grade.write_text(yaml.safe_dump(edited))
    out = tmp_path / "tampered.json"
    with pytest.raises(SystemExit) as done:
        main(["export", "--format", "tau2", str(copy), str(out)])
    err = capsys.readouterr().err
    assert done.value.code == 1 and f"trial {task_id}/0: record tampered" in err
    results = load_tau2_results(out)
    skipped = [s for s in results.simulations if s.skipped]
    assert [(s.task_id, s.trial, s.reward_info.reward, s.messages) for s in skipped] == [
        (task_id, 0, 0.0, [])
    ]
    assert len(results.simulations) == len(run.summary.rows)  # still counted: a trial that failed
    # τ² scores a failed sample 0, as the export says
    assert tau2_disagreements(results.model_copy(update={"simulations": skipped})) == []


def test_a_run_without_its_key_is_refused_unless_asked(
    run: _Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = tmp_path / "keys"
    elsewhere.mkdir(mode=0o700)
    monkeypatch.setenv("TOLOKAFORGE_RUN_KEY_DIR", str(elsewhere))
    out = tmp_path / "unverified.json"
    with pytest.raises(SystemExit) as done:
        main(["export", "--format", "tau2", str(run.output), str(out)])
    err = capsys.readouterr().err
    assert done.value.code == 2 and "NOT VERIFIED" in err and "--unverified" in err and not out.exists()
    with pytest.raises(SystemExit) as done:
        main(["export", "--format", "tau2", "--unverified", str(run.output), str(out)])
    assert done.value.code == 1 and "NOT VERIFIED" in capsys.readouterr().err
    document = json.loads(out.read_text())
    assert document["tolokaforge"]["verified"] is False
    assert len(document["simulations"]) == len(run.summary.rows)
