"""Three tool primitives (docs/protocol/runner.md#executetool-statuses): an error a tool reports itself
(a ReportedError, whose changes stand), ``validate_arguments: false`` (any JSON object reaches the
tool as is) and ``hidden`` tools (callable by the runner's own callers, never by the host).

Every test runs on each way a python tool runs: a sandboxed worker forked from its zygote, a worker
spawned afresh (outside the sandbox), and trusted mode on the runner's threads.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from tolokaforge.contracts.runner import (
    ExecuteToolRequest,
    ExecuteToolResponse,
    ExecutionStatus,
    GetStateRequest,
    GradeTrialRequest,
    RegisterTrialResponse,
    RunnerServiceStub,
)
from tolokaforge.contracts.tool import ToolErrorCategory
from tolokaforge.runner import RunnerHandle, RunnerSettings, start_runner

from .conftest import FIXTURES, register_request

PACK = FIXTURES / "tool_answers"

MODES = {
    "sandbox-forked": RunnerSettings(isolation="sandbox"),
    "process-spawned": RunnerSettings(isolation="process", fork_server=False),
    "thread": RunnerSettings(isolation="thread"),
}


def _tool(name: str, class_name: str, properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
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
        **extra,
    }


TEXT = {"text": {"type": "string"}}
AGENT_TOOLS = [
    _tool("refuse", "Refuse", {**TEXT, "message": {"type": "string"}}),
    _tool("explode", "Explode", TEXT),
    _tool("notes", "Notes", {}),
    _tool("add_note", "AddNote", TEXT),
    _tool("add_note_unchecked", "AddNote", TEXT, validate_arguments=False),
    _tool("seed", "Seed", TEXT, hidden=True),
]
USER_TOOLS = [_tool("user_notes", "Notes", {}), _tool("user_seed", "Seed", TEXT, hidden=True)]


def _spec(trial_id: str, **task: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "task_id": trial_id.split(":")[0],
        "agent_tools": AGENT_TOOLS,
        "user_tools": USER_TOOLS,
        "tool_code": {"path": str(PACK)},
        "initial_state": {"tables": {"notes": []}},
    }
    return {"trial_id": trial_id, "task": {**base, **task}}


@dataclass
class Trial:
    runner: RunnerHandle
    stub: RunnerServiceStub
    trial_id: str
    registered: RegisterTrialResponse

    async def call(
        self, tool: str, arguments: dict[str, Any] | str, call_id: str, executor: str = "agent"
    ) -> ExecuteToolResponse:
        return await self.stub.execute_tool(
            ExecuteToolRequest(
                trial_id=self.trial_id,
                tool_name=tool,
                arguments_json=arguments if isinstance(arguments, str) else json.dumps(arguments),
                executor=executor,
                call_id=call_id,
            )
        )

    async def notes(self) -> list[Any]:
        state = await self.stub.get_state(GetStateRequest(trial_id=self.trial_id))
        assert state.success, state.error
        return [note["text"] for note in json.loads(state.state_json)["notes"]]


@pytest.fixture(params=sorted(MODES))
async def runner(request: pytest.FixtureRequest) -> AsyncIterator[RunnerHandle]:
    handle = await start_runner(MODES[request.param])
    yield handle
    await handle.close()


@pytest.fixture
async def stub(runner: RunnerHandle) -> AsyncIterator[RunnerServiceStub]:
    channel = runner.channel()
    yield RunnerServiceStub(channel)
    channel.close()


async def _register(runner: RunnerHandle, stub: RunnerServiceStub, spec: dict[str, Any]) -> Trial:
    response = await stub.register_trial(register_request(spec))
    assert response.success, response.error
    return Trial(runner, stub, spec["trial_id"], response)


@pytest.fixture
async def trial(runner: RunnerHandle, stub: RunnerServiceStub) -> Trial:
    return await _register(runner, stub, _spec("answers:0"))


# --- a reported error -------------------------------------------------------------------------------


async def test_a_reported_error_commits_its_changes_and_answers_error(trial: Trial) -> None:
    response = await trial.call("refuse", {"text": "kept", "message": "flight HAT001 is full"}, "c1")
    assert response.status == ExecutionStatus.ERROR
    assert (response.output, response.error_message) == ("", "flight HAT001 is full")
    assert response.reported_by_tool
    assert response.tool_error is not None
    assert response.tool_error.category == ToolErrorCategory.EXECUTION_FAILED
    assert response.tool_error.message == "flight HAT001 is full" and not response.tool_error.retryable
    assert response.metrics is not None and response.metrics.state_mutations == 1
    assert await trial.notes() == ["kept"]
    # What runs the tools holds the change too: the next call sees it.
    seen = await trial.call("notes", {}, "c2")
    assert (seen.status, seen.output) == (ExecutionStatus.SUCCESS, "kept")
    record = trial.runner.servicer.runner.registry.get(trial.trial_id).history[0]
    assert (record.call_id, record.tool_name, record.status) == ("c1", "refuse", "error")
    assert record.arguments == {"text": "kept", "message": "flight HAT001 is full"}
    assert (record.output, record.error_message, record.error_category) == (
        "",
        "flight HAT001 is full",
        "execution_failed",
    )


async def test_a_reported_error_may_have_an_empty_message(trial: Trial) -> None:
    response = await trial.call("refuse", {"text": "kept", "message": ""}, "c1")
    assert (response.status, response.error_message, response.reported_by_tool) == (
        ExecutionStatus.ERROR,
        "",
        True,
    )
    assert await trial.notes() == ["kept"]


async def test_a_raised_error_is_not_reported_and_changes_nothing(trial: Trial) -> None:
    response = await trial.call("explode", {"text": "gone"}, "c1")
    assert (response.status, response.error_message) == (ExecutionStatus.ERROR, "ValueError: boom")
    assert not response.reported_by_tool
    assert await trial.notes() == []
    ok = await trial.call("add_note", {"text": "a"}, "c2")
    assert ok.status == ExecutionStatus.SUCCESS and not ok.reported_by_tool
    assert await trial.notes() == ["a"]


# --- validate_arguments: false -----------------------------------------------------------------------


async def test_unchecked_arguments_reach_the_tool_whose_own_error_is_the_answer(trial: Trial) -> None:
    checked = await trial.call("add_note", {"txt": "x"}, "c1")
    assert checked.status == ExecutionStatus.INVALID_ARGUMENTS
    unchecked = await trial.call("add_note_unchecked", {"txt": "x"}, "c2")
    assert unchecked.status == ExecutionStatus.ERROR
    assert unchecked.tool_error is not None
    assert unchecked.tool_error.category == ToolErrorCategory.EXECUTION_FAILED
    assert unchecked.error_message.startswith("TypeError: ")
    assert "unexpected keyword argument 'txt'" in unchecked.error_message
    # A value the schema refuses is the tool's business too.
    typed = await trial.call("add_note_unchecked", {"text": 7}, "c3")
    assert typed.status == ExecutionStatus.SUCCESS, typed.error_message
    assert await trial.notes() == [7]
    history = trial.runner.servicer.runner.registry.get(trial.trial_id).history
    assert history[1].arguments == {"txt": "x"}


@pytest.mark.parametrize("arguments", ["[1]", "{", '"text"', "null"])
async def test_unchecked_arguments_must_still_be_a_json_object(trial: Trial, arguments: str) -> None:
    response = await trial.call("add_note_unchecked", arguments, "c1")
    assert response.status == ExecutionStatus.INVALID_ARGUMENTS
    assert await trial.notes() == []


# --- hidden tools ------------------------------------------------------------------------------------


async def test_hidden_tools_are_not_offered(trial: Trial) -> None:
    schemas = trial.registered.tool_schemas
    agent = [schema.name for schema in schemas[: trial.registered.num_agent_tools]]
    user = [schema.name for schema in schemas[trial.registered.num_agent_tools :]]
    assert agent == ["refuse", "explode", "notes", "add_note", "add_note_unchecked"]
    assert user == ["user_notes"]
    assert trial.registered.num_user_tools == 1


@pytest.mark.parametrize(
    ("executor", "hidden", "unknown"),
    [
        ("agent", "seed", "nope"),
        ("user", "user_seed", "nope"),
        ("user", "seed", "nope"),
        ("agent", "user_seed", "nope"),
    ],
)
async def test_calling_a_hidden_tool_is_answered_as_calling_no_tool(
    trial: Trial, executor: str, hidden: str, unknown: str
) -> None:
    refused = await trial.call(hidden, {"text": "x"}, "c1", executor)
    absent = await trial.call(unknown, {"text": "x"}, "c2", executor)
    assert refused.status == absent.status == ExecutionStatus.TOOL_NOT_FOUND
    assert refused.tool_error is not None and absent.tool_error is not None
    assert refused.tool_error.category == absent.tool_error.category == ToolErrorCategory.NOT_FOUND
    # Word for word the same answer, but for the name asked for: no hint, no listing of hidden tools.
    assert refused.error_message.replace(repr(hidden), repr(unknown)) == absent.error_message
    assert "seed" not in refused.error_message.replace(repr(hidden), "")
    assert await trial.notes() == []
    history = trial.runner.servicer.runner.registry.get(trial.trial_id).history
    assert [(r.tool_name, r.status) for r in history] == [
        (hidden, "tool_not_found"),
        (unknown, "tool_not_found"),
    ]


async def test_a_hidden_tool_serves_initialization_actions(
    runner: RunnerHandle, stub: RunnerServiceStub
) -> None:
    initial_state: dict[str, Any] = {
        "tables": {"notes": []},
        "initialization_actions": [
            {"env_type": "assistant", "tool_name": "seed", "arguments": {"text": "agent side"}},
            {"env_type": "user", "tool_name": "user_seed", "arguments": {"text": "user side"}},
        ],
    }
    trial = await _register(runner, stub, _spec("init:0", initial_state=initial_state))
    assert await trial.notes() == ["agent side", "user side"]


def _graded_by_golden_seed(**task: Any) -> dict[str, Any]:
    grading = {
        "combine_method": "weighted",
        "weights": {"state_checks": 1.0},
        "pass_threshold": 1.0,
        "state_checks": {
            "hash_enabled": True,
            "golden_actions": [{"tool_name": "seed", "arguments": {"text": "golden"}}],
        },
    }
    return {"grading": grading, **task}


async def _grade(trial: Trial) -> float:
    response = await trial.stub.grade_trial(
        GradeTrialRequest(trial_id=trial.trial_id, termination_reason="agent_done")
    )
    assert response.success, response.error
    assert response.grade is not None
    return response.grade.score


@pytest.mark.parametrize("initialized", [False, True], ids=["raw", "initialized"])
async def test_a_hidden_tool_replays_golden_actions(
    runner: RunnerHandle, stub: RunnerServiceStub, initialized: bool
) -> None:
    extra: dict[str, Any] = {}
    if initialized:
        extra["initial_state"] = {
            "tables": {"notes": []},
            "initialization_actions": [{"tool_name": "seed", "arguments": {"text": "start"}}],
        }
    start = ["start"] if initialized else []
    # The agent reaches the golden state through an offered tool: a match, so the hidden one replayed.
    matching = await _register(runner, stub, _spec("gold:0", **_graded_by_golden_seed(**extra)))
    assert (await matching.call("add_note", {"text": "golden"}, "c1")).status == ExecutionStatus.SUCCESS
    assert await _grade(matching) == 1.0
    assert await matching.notes() == [*start, "golden"]
    # An agent that did nothing differs from it.
    idle = await _register(runner, stub, _spec("gold:1", **_graded_by_golden_seed(**extra)))
    assert await _grade(idle) == 0.0
    assert await idle.notes() == start
