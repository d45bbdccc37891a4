"""A task's golden replay is reused once two trials' replays agree (golden_memo.py), never before,
never when they disagree, and never with ``golden_replay="trial"``."""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from grpclib.client import Channel

from tolokaforge.contracts.runner import RegisterTrialRequest, RunnerServiceStub
from tolokaforge.core.protocol import ENGINE_PROTOCOL_VERSION
from tolokaforge.runner import RunnerHandle, RunnerSettings, start_runner

from .conftest import FIXTURES, Episode

PACK = FIXTURES / "golden_memo"


def _tool(name: str, class_name: str, properties: dict[str, Any]) -> dict[str, Any]:
    parameters = {
        "type": "object",
        "properties": properties,
        "required": sorted(properties),
        "additionalProperties": False,
    }
    return {
        "name": name,
        "description": name,
        "parameters": parameters,
        "source": {"module_path": "tools", "class_name": class_name},
    }


def _task(task_id: str, *golden: dict[str, Any]) -> tuple[str, str]:
    task: dict[str, Any] = {
        "task_id": task_id,
        "agent_tools": [_tool("mark", "Mark", {"text": {"type": "string"}}), _tool("stamp", "Stamp", {})],
        "tool_code": {"path": str(PACK)},
        "initial_state": {"tables": {"notes": []}},
        "grading": {
            "combine_method": "weighted",
            "weights": {"state_checks": 1.0},
            "pass_threshold": 1.0,
            "state_checks": {"hash_enabled": True, "golden_actions": list(golden)},
        },
    }
    text = json.dumps(task)
    return text, hashlib.sha256(text.encode()).hexdigest()


MARK_X = {"tool_name": "mark", "arguments": {"text": "x"}}


async def _open(settings: RunnerSettings) -> tuple[RunnerHandle, Channel]:
    handle = await start_runner(settings)
    return handle, handle.channel()


@pytest.fixture
async def memo_runner() -> AsyncIterator[tuple[RunnerHandle, RunnerServiceStub]]:
    handle, channel = await _open(RunnerSettings())
    yield handle, RunnerServiceStub(channel)
    channel.close()
    await handle.close()


@pytest.fixture
async def every_trial_runner() -> AsyncIterator[tuple[RunnerHandle, RunnerServiceStub]]:
    handle, channel = await _open(RunnerSettings(golden_replay="trial"))
    yield handle, RunnerServiceStub(channel)
    channel.close()
    await handle.close()


async def _trial(
    handle: RunnerHandle, stub: RunnerServiceStub, task: tuple[str, str], index: int, *calls: dict[str, Any]
) -> tuple[Any, list[str]]:
    """Register trial ``index`` of ``task`` (by digest after the first), make ``calls``, grade it;
    the grade and the lines of the trial's replays.log (what its tools, and any replay, logged)."""
    task_json, digest = task
    trial_id = f"{json.loads(task_json)['task_id']}:{index}"
    registered = await stub.register_trial(
        RegisterTrialRequest(
            trial_id=trial_id,
            trial_spec_json=json.dumps({"trial_id": trial_id, "trial_index": index}),
            engine_protocol_version=ENGINE_PROTOCOL_VERSION,
            task_json=task_json if index == 0 else "",
            task_digest=digest,
        )
    )
    assert registered.success, registered.error
    episode = Episode(stub, trial_id)
    for number, call in enumerate(calls):
        answer = await episode.call(call["tool_name"], call["arguments"], f"c{number}")
        assert not answer.error_message, answer.error_message
    episode.say("done")
    response = await episode.grade()
    assert response.success, response.error
    workspace = handle.servicer.runner.registry.get(trial_id).files.workspace
    assert workspace is not None
    log = Path(workspace) / "replays.log"
    return response.grade, log.read_text(encoding="utf-8").splitlines() if log.exists() else []


async def test_the_third_trial_reuses_the_outcome_two_replays_agreed_on(
    memo_runner: tuple[RunnerHandle, RunnerServiceStub],
) -> None:
    handle, stub = memo_runner
    task = _task("memo", MARK_X)
    first, first_log = await _trial(handle, stub, task, 0)
    second, second_log = await _trial(handle, stub, task, 1)
    third, third_log = await _trial(handle, stub, task, 2)
    # The first two replayed (the replay's call is in their workspaces); the third did not.
    assert first_log == second_log == ["mark x"]
    assert third_log == []
    # And it is graded alike: the same verdict, the same diff against the golden state.
    assert (first.score, second.score, third.score) == (0.0, 0.0, 0.0)
    assert third.state_diff_json == first.state_diff_json != ""
    assert "notes" in third.state_diff_json
    passing, passing_log = await _trial(handle, stub, task, 3, MARK_X)
    assert (passing.binary_pass, passing.score, passing.state_diff_json) == (True, 1.0, "")
    assert passing_log == ["mark x"]  # the agent's own call; no replay after it


async def test_replays_that_disagree_are_replayed_for_every_trial(
    memo_runner: tuple[RunnerHandle, RunnerServiceStub],
) -> None:
    handle, stub = memo_runner
    task = _task("random", {"tool_name": "stamp", "arguments": {}})
    logs = [(await _trial(handle, stub, task, index))[1] for index in range(4)]
    assert [len(log) for log in logs] == [1, 1, 1, 1]
    assert len({line for log in logs for line in log}) == 4  # four replays, four tokens


async def test_golden_replay_trial_replays_for_every_trial(
    every_trial_runner: tuple[RunnerHandle, RunnerServiceStub],
) -> None:
    handle, stub = every_trial_runner
    task = _task("strict", MARK_X)
    logs = [(await _trial(handle, stub, task, index))[1] for index in range(3)]
    assert logs == [["mark x"]] * 3


async def test_trusted_mode_reuses_the_outcome_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Trusted tools run in this process, in its working directory: their replays.log goes to tmp_path.
    monkeypatch.chdir(tmp_path)
    handle, channel = await _open(RunnerSettings(isolation="thread"))
    stub = RunnerServiceStub(channel)
    try:
        task = _task("trusted", MARK_X)
        grades = [(await _trial(handle, stub, task, index))[0] for index in range(2)]
        package = handle.servicer.runner.registry.get("trusted:0").files.code_package
        module = sys.modules[f"{package}.tools"]
        replayed = module.calls
        third, _ = await _trial(handle, stub, task, 2)
        assert module.calls == replayed >= 2  # the first two trials replayed; the third did not
        assert third.state_diff_json == grades[0].state_diff_json != ""
    finally:
        channel.close()
        await handle.close()


async def test_tasks_with_other_golden_paths_keep_their_own_outcomes(
    memo_runner: tuple[RunnerHandle, RunnerServiceStub],
) -> None:
    handle, stub = memo_runner
    x, y = _task("x", MARK_X), _task("y", {"tool_name": "mark", "arguments": {"text": "y"}})
    for index in range(2):
        await _trial(handle, stub, x, index)
        await _trial(handle, stub, y, index)
    grade_x, log_x = await _trial(handle, stub, x, 2, MARK_X)
    grade_y, log_y = await _trial(handle, stub, y, 2, MARK_X)
    assert (log_x, log_y) == (["mark x"], ["mark x"])  # neither replayed
    assert (grade_x.binary_pass, grade_y.binary_pass) == (True, False)
    assert '"y"' in grade_y.state_diff_json and '"x"' in grade_y.state_diff_json
