"""The embedded runner behind the Runner interface: typed objects in and out, typed errors, no wire."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tolokaforge.contracts.runner import (
    ExecutionStatus,
    GetStateRequest,
    GradeReasonVerdict,
    RegistrationErrorKind,
)
from tolokaforge.contracts.tool import ToolErrorCategory
from tolokaforge.core.models import TrialSpec
from tolokaforge.core.runner_api import (
    GradeRequest,
    InvalidRequestError,
    RegistrationFailedError,
    Runner,
    ToolCallRequest,
    TrialLostError,
)
from tolokaforge.core.termination import TerminationReason
from tolokaforge.runner import LocalRunner, RunnerHandle, RunnerSettings, start_runner

from .conftest import make_spec


@pytest.fixture
async def served_nowhere() -> AsyncIterator[RunnerHandle]:
    handle = await start_runner(RunnerSettings(isolation="thread"), serve=False)
    try:
        yield handle
    finally:
        await handle.close()


def _spec(trial_id: str, **task: Any) -> TrialSpec:
    return TrialSpec.model_validate(make_spec(trial_id, **task))


def _call(trial_id: str, tool: str, arguments: dict[str, Any], call_id: str = "c1") -> ToolCallRequest:
    return ToolCallRequest(trial_id, call_id, tool, json.dumps(arguments), "agent")


async def test_a_runner_not_served_listens_nowhere_and_is_called_directly(
    served_nowhere: RunnerHandle,
) -> None:
    assert served_nowhere.port == 0
    runner: Runner = served_nowhere.runner
    assert (await runner.health()).status == "healthy"
    registered = await runner.register(_spec("t:0"))
    assert [tool.name for tool in registered.agent_tools][:2] == ["who_am_i", "get_order"]
    assert [tool.name for tool in registered.user_tools] == ["check_balance"]
    result = await runner.execute(_call("t:0", "set_status", {"order_id": "O-1", "status": "paid"}))
    assert result.status == ExecutionStatus.SUCCESS and result.failure is None, result
    state = await served_nowhere.servicer.get_state(GetStateRequest(trial_id="t:0"))
    assert json.loads(state.state_json)["orders"][0]["status"] == "paid"
    await runner.release("t:0")
    with pytest.raises(TrialLostError):
        await runner.execute(_call("t:0", "who_am_i", {}, "c2"))


async def test_trials_of_one_task_object_share_what_the_runner_learnt_about_it(
    served_nowhere: RunnerHandle,
) -> None:
    runner = served_nowhere.runner
    first = _spec("t:0")
    second = first.model_copy(update={"trial_id": "t:1"})  # the same task object, as the host builds them
    other = _spec("t:2")  # an equal task, but another object
    for spec in (first, second, other):
        await runner.register(spec)
    registry = runner.registry
    assert len(registry.tasks) == 2
    a, b, c = (registry.get(trial_id) for trial_id in ("t:0", "t:1", "t:2"))
    assert a.state.initial_tables is b.state.initial_tables
    # The equal task shares the first one's copy once the store has hashed its tables.
    assert c.state.initial_tables is a.state.initial_tables


async def test_what_cannot_be_done_is_a_typed_error(served_nowhere: RunnerHandle) -> None:
    runner = served_nowhere.runner
    await runner.register(_spec("t:0"))
    with pytest.raises(RegistrationFailedError) as duplicate:
        await runner.register(_spec("t:0"))
    assert duplicate.value.kind == RegistrationErrorKind.DUPLICATE_TRIAL and not duplicate.value.retryable
    with pytest.raises(InvalidRequestError, match="call_id is empty"):
        await runner.execute(_call("t:0", "who_am_i", {}, call_id=""))
    with pytest.raises(InvalidRequestError, match="executor must be one of"):
        await runner.execute(ToolCallRequest("t:0", "c1", "who_am_i", "{}", "robot"))  # type: ignore[arg-type]
    with pytest.raises(TrialLostError, match="not found"):
        await runner.grade(GradeRequest("nobody:0", [], TerminationReason.AGENT_DONE))
    unknown = await runner.execute(_call("t:0", "no_such_tool", {}))
    assert unknown.status == ExecutionStatus.TOOL_NOT_FOUND
    assert unknown.failure is not None and unknown.failure.category == ToolErrorCategory.NOT_FOUND


async def test_a_grade_says_its_reasons_typed_beside_the_joined_text(served_nowhere: RunnerHandle) -> None:
    runner = served_nowhere.runner
    golden = [{"tool_name": "set_status", "arguments": {"order_id": "O-1", "status": "paid"}}]
    grading = {
        "combine_method": "weighted",
        "weights": {"state_checks": 1.0},
        "pass_threshold": 1.0,
        "state_checks": {"hash_enabled": True, "golden_actions": golden},
    }
    await runner.register(_spec("t:0", grading=grading))
    await runner.execute(_call("t:0", "set_status", {"order_id": "O-2", "status": "paid"}))
    result = await runner.grade(GradeRequest("t:0", None, TerminationReason.AGENT_DONE, release=True))
    grade = result.grade
    assert result.released and not grade.binary_pass
    assert grade.reasons == " | ".join(reason.message for reason in grade.reason_items)
    state = [reason for reason in grade.reason_items if reason.kind == "hash"]
    assert len(state) == 1 and state[0].verdict == GradeReasonVerdict.FAILED, grade.reason_items
    assert isinstance(served_nowhere.runner, LocalRunner)
