"""τ²-style grading end to end on a real runner: tau2_actions, tau2_communicate, env_assertions,
zero_unless_ended_by, golden_errors and user-side golden actions (docs/grading.md)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tolokaforge.contracts.runner import (
    ExecutionStatus,
    GetStateRequest,
    GradeErrorKind,
    GradeTrialRequest,
    RegisterTrialRequest,
    RunnerServiceStub,
)
from tolokaforge.runner import RunnerHandle

from .conftest import FIXTURES, Episode

PACK = FIXTURES / "tau2_grading"
SpecFactory = Callable[..., dict[str, Any]]
RequestFor = Callable[..., RegisterTrialRequest]

_ORDER = {"order_id": {"type": "string"}}


def _tool(name: str, class_name: str, properties: dict[str, Any], *, hidden: bool = False) -> dict[str, Any]:
    parameters = {
        "type": "object",
        "properties": properties,
        "required": sorted(properties),
        "additionalProperties": False,
    }
    tool: dict[str, Any] = {
        "name": name,
        "description": name,
        "parameters": parameters,
        "source": {"module_path": "tools", "class_name": class_name},
    }
    if hidden:
        tool["hidden"] = True
    return tool


AGENT_TOOLS = [
    _tool("set_status", "SetStatus", {**_ORDER, "status": {"type": "string"}}),
    _tool("refund_order", "RefundOrder", _ORDER),
    _tool("explode", "Explode", {}),
    _tool("order_status_is", "OrderStatusIs", {**_ORDER, "status": {"type": "string"}}, hidden=True),
    _tool("order_summary", "OrderSummary", _ORDER, hidden=True),
    _tool("stamp", "Stamp", _ORDER, hidden=True),
    _tool("plain", "Plain", {}, hidden=True),
]
USER_TOOLS = [
    _tool("toggle_airplane", "ToggleAirplane", {}),
    _tool("airplane_is", "AirplaneIs", {"on": {"type": "boolean"}}, hidden=True),
]


def _tables() -> dict[str, Any]:
    return {
        "orders": {"O-1": {"status": "open", "total": 10.5}, "O-2": {"status": "paid", "total": 3}},
        "phone": {"device": {"airplane": True}},
    }


def grading(**components: Any) -> dict[str, Any]:
    """A τ²-shaped grading: fold ``all`` at 1.0 (the product of 0/1 components)."""
    return {"combine_method": "all", "pass_threshold": 1.0, **components}


@pytest.fixture
def register(
    stub: RunnerServiceStub, spec_factory: SpecFactory, request_for: RequestFor
) -> Callable[..., Any]:
    async def _register(trial_id: str, grading_config: dict[str, Any]) -> None:
        spec = spec_factory(
            trial_id,
            agent_tools=AGENT_TOOLS,
            user_tools=USER_TOOLS,
            tool_code={"path": str(PACK)},
            initial_state={"tables": _tables()},
            grading=grading_config,
        )
        response = await stub.register_trial(request_for(spec))
        assert response.success, response.error

    return _register


async def _state(stub: RunnerServiceStub, trial_id: str) -> tuple[str, str]:
    state = await stub.get_state(GetStateRequest(trial_id=trial_id, include_unstable=True))
    return state.state_json, state.full_hash


def _items(grade: Any, component: str) -> list[tuple[str, bool]]:
    return [(row.label, row.met) for row in grade.component_items if row.component == component]


# --- tau2_actions and tau2_communicate ------------------------------------------------------------


async def test_actions_and_communicate_fold_all_to_their_product(register: Any, episode: Any) -> None:
    await register(
        "t:0",
        grading(
            tau2_actions={
                "actions": [
                    {
                        "action_id": "pay",
                        "name": "set_status",
                        "arguments": {"order_id": "O-1", "status": "paid"},
                    },
                    {"name": "toggle_airplane"},
                ]
            },
            tau2_communicate={"info": ["O-1 is paid", "airplane mode"]},
        ),
    )
    ep: Episode = episode("t:0")
    await ep.call("set_status", {"order_id": "O-1", "status": "paid"}, "c1")
    await ep.call("toggle_airplane", {}, "c2", executor="user")
    ep.say("Done: Order O-1, is paid. Airplane Mode is off now.")  # commas are dropped, case ignored
    response = await ep.grade()
    assert response.success, response.error
    grade = response.grade
    assert (grade.binary_pass, grade.score) == (True, 1.0)
    components = grade.components
    assert (components.tau2_actions, components.tau2_communicate, components.env_assertions) == (
        1.0,
        1.0,
        None,
    )
    assert components.state_checks == -1.0 and components.trace_checks is None
    assert _items(grade, "tau2_actions") == [("pay", True), ("toggle_airplane", True)]
    assert _items(grade, "tau2_communicate") == [("O-1 is paid", True), ("airplane mode", True)]
    matched = next(row for row in grade.component_items if row.label == "toggle_airplane")
    assert json.loads(matched.details_json) == {"call_id": "c2", "requestor": "user"}
    said = next(row for row in grade.component_items if row.label == "O-1 is paid")
    assert json.loads(said.details_json) == {"message_index": 6}
    assert "Tau2 actions: all 2 met" in grade.reasons and "Tau2 communicate: all 2 met" in grade.reasons


async def test_one_unmet_item_zeroes_its_component_and_the_product(register: Any, episode: Any) -> None:
    await register(
        "t:0",
        grading(
            tau2_actions={
                "actions": [{"name": "set_status", "arguments": {"order_id": "O-1", "status": "paid"}}]
            },
            tau2_communicate={"info": ["refunded"]},
        ),
    )
    ep: Episode = episode("t:0")
    await ep.call("set_status", {"order_id": "O-1", "status": "cancelled"}, "c1")
    ep.say("All set.")
    response = await ep.grade()
    assert response.success, response.error
    grade = response.grade
    assert (grade.binary_pass, grade.score) == (False, 0.0)
    assert (grade.components.tau2_actions, grade.components.tau2_communicate) == (0.0, 0.0)
    assert "action 'set_status': no call of set_status matches" in grade.reasons
    assert "the agent did not communicate 'refunded'" in grade.reasons
    unmet = next(row for row in grade.component_items if row.component == "tau2_actions")
    assert json.loads(unmet.details_json) == {"calls_of_tool": 1}


async def test_erroring_calls_and_calls_to_unknown_tools_count_as_actions(
    register: Any, episode: Any
) -> None:
    await register(
        "t:0",
        grading(
            tau2_actions={
                "actions": [
                    {"name": "explode"},
                    {"name": "no_such_tool", "arguments": {"x": 1}},
                    {"name": "refund_order", "arguments": {"order_id": "O-1"}},
                    {"name": "order_status_is", "arguments": {"order_id": "O-1", "status": "open"}},
                ]
            }
        ),
    )
    ep: Episode = episode("t:0")
    assert (await ep.call("explode", {}, "c1")).status == ExecutionStatus.ERROR
    assert (await ep.call("no_such_tool", {"x": 1}, "c2")).status == ExecutionStatus.TOOL_NOT_FOUND
    refused = await ep.call("refund_order", {"order_id": "O-1"}, "c3")
    assert refused.status == ExecutionStatus.ERROR and refused.reported_by_tool
    # A hidden tool is not offered: the host's call is answered TOOL_NOT_FOUND, and still counts.
    hidden = await ep.call("order_status_is", {"order_id": "O-1", "status": "open"}, "c4")
    assert hidden.status == ExecutionStatus.TOOL_NOT_FOUND
    response = await ep.grade()
    assert response.success, response.error
    assert response.grade.components.tau2_actions == 1.0, response.grade.reasons


async def test_communicate_needs_the_transcript_and_actions_read_the_record(
    register: Any, episode: Any
) -> None:
    await register(
        "t:0",
        grading(
            tau2_actions={
                "actions": [
                    {"name": "set_status", "arguments": {"status": "paid"}, "compare_args": ["status"]}
                ]
            },
            tau2_communicate={"info": ["paid"]},
        ),
    )
    ep: Episode = episode("t:0")
    await ep.call("set_status", {"order_id": "O-2", "status": "paid"}, "c1")
    ep.say("It is paid.")
    response = await ep.grade(transcript=False)
    assert response.success, response.error
    grade = response.grade
    assert grade.components.tau2_actions == 1.0 and grade.components.tau2_communicate is None
    assert "skipped: no transcript messages (tau2_communicate)" in grade.reasons


# --- zero_unless_ended_by ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ending", "expected"),
    [
        ("agent_done", None),
        ("user_stop", None),
        ("max_turns", "ended by max_turns; this task scores 0 unless it ends by agent_done or user_stop"),
        (
            "too_many_errors",
            "ended by too_many_errors; this task scores 0 unless it ends by agent_done or user_stop",
        ),
        ("", "reported no termination reason; this task scores 0 unless it ends by agent_done or user_stop"),
    ],
)
async def test_an_unplanned_ending_scores_zero_with_its_components_reported(
    register: Any, episode: Any, ending: str, expected: str | None
) -> None:
    await register(
        "t:0",
        grading(
            tau2_communicate={"info": ["paid"]},
            zero_unless_ended_by=["agent_done", "user_stop"],
        ),
    )
    ep: Episode = episode("t:0")
    ep.say("It is paid.")
    response = await ep.grade(ending)
    assert response.success, response.error
    grade = response.grade
    assert grade.components.tau2_communicate == 1.0  # computed and reported either way
    if expected is None:
        assert (grade.binary_pass, grade.score) == (True, 1.0)
        assert "scores 0 unless" not in grade.reasons
    else:
        assert (grade.binary_pass, grade.score) == (False, 0.0)
        assert grade.reasons.endswith(expected)


# --- env_assertions ---------------------------------------------------------------------------------


async def test_env_assertions_see_the_agents_final_state_and_leave_it_unchanged(
    register: Any, episode: Any, stub: RunnerServiceStub, runner: RunnerHandle
) -> None:
    pay = {"tool_name": "set_status", "arguments": {"order_id": "O-1", "status": "paid"}}
    await register(
        "t:0",
        grading(
            state_checks={"hash_enabled": True, "golden_actions": [pay]},
            env_assertions={
                "assertions": [
                    # writes: later assertions see it, the trial never does
                    {"tool_name": "stamp", "arguments": {"order_id": "O-2"}, "expected": True},
                    {
                        "tool_name": "order_status_is",
                        "arguments": {"order_id": "O-2", "status": "stamped"},
                        "expected": True,
                    },
                    {
                        "tool_name": "order_status_is",
                        "arguments": {"order_id": "O-1", "status": "cancelled"},
                        "expected": True,
                    },
                    {
                        "tool_name": "order_summary",
                        "arguments": {"order_id": "O-2"},
                        "expected": {"status": "stamped", "total": 3.0},
                    },
                    {
                        "tool_name": "airplane_is",
                        "arguments": {"on": False},
                        "executor": "user",
                        "expected": True,
                        "message": "the phone is reachable",
                    },
                ]
            },
        ),
    )
    ep: Episode = episode("t:0")
    await ep.call("set_status", {"order_id": "O-1", "status": "cancelled"}, "c1")
    await ep.call("toggle_airplane", {}, "c2", executor="user")
    before = await _state(stub, "t:0")
    response = await ep.grade()
    assert response.success, response.error
    grade = response.grade
    assert grade.components.env_assertions == 1.0, grade.reasons
    assert grade.components.state_checks == 0.0  # the golden path pays O-1; the agent cancelled it
    assert "Env assertions: all 5 hold" in grade.reasons
    labels = _items(grade, "env_assertions")
    assert labels[-1] == ("the phone is reachable", True) and all(met for _, met in labels)
    assert await _state(stub, "t:0") == before
    # The trial's tools work on its own state again.
    written = await ep.call("set_status", {"order_id": "O-2", "status": "open"}, "c3")
    assert written.status == ExecutionStatus.SUCCESS, written.error_message
    state = json.loads((await _state(stub, "t:0"))[0])
    assert state["orders"]["O-2"]["status"] == "open" and state["orders"]["O-1"]["status"] == "cancelled"
    assert runner.servicer.runner.registry.get("t:0").state.mirror.tables == state


async def test_an_assertion_that_does_not_hold_scores_zero_naming_what_it_got(
    register: Any, episode: Any
) -> None:
    await register(
        "t:0",
        grading(
            env_assertions={
                "assertions": [
                    {
                        "tool_name": "order_status_is",
                        "arguments": {"order_id": "O-1", "status": "paid"},
                        "expected": True,
                    },
                    {
                        "tool_name": "order_summary",
                        "arguments": {"order_id": "O-2"},
                        "expected": {"status": "paid", "total": "3"},
                    },
                    {
                        "tool_name": "airplane_is",
                        "arguments": {"on": True},
                        "executor": "user",
                        "expected": 1,
                    },
                ]
            },
        ),
    )
    response = await episode("t:0").grade()
    assert response.success, response.error
    grade = response.grade
    assert (grade.binary_pass, grade.score, grade.components.env_assertions) == (False, 0.0, 0.0)
    assert _items(grade, "env_assertions") == [
        ("order_status_is", False),
        ("order_summary", False),
        ("airplane_is", False),  # true is not 1 as JSON
    ]
    assert "[0] order_status_is: expected true, got false" in grade.reasons
    first = grade.component_items[0]
    assert json.loads(first.details_json) == {
        "tool_name": "order_status_is",
        "expected": True,
        "actual": False,
    }


@pytest.mark.parametrize(
    ("assertion", "why"),
    [
        (
            {"tool_name": "explode", "expected": True},
            "env_assertions[0] explode (agent tool) answered ERROR: RuntimeError",
        ),
        (
            {"tool_name": "plain", "expected": "all good"},
            "env_assertions[0] plain (agent tool) answered 'all good', which is not JSON",
        ),
        (
            {"tool_name": "teleport", "expected": True},
            "env_assertions[0] teleport (agent tool) answered TOOL_NOT_FOUND",
        ),
        (
            {"tool_name": "airplane_is", "expected": True},
            "env_assertions[0] airplane_is (agent tool) answered TOOL_NOT_FOUND",
        ),
    ],
    ids=["raises", "not-json", "no-such-tool", "wrong-side"],
)
async def test_an_assertion_that_cannot_be_evaluated_fails_grading(
    register: Any, episode: Any, stub: RunnerServiceStub, assertion: dict[str, Any], why: str
) -> None:
    await register("t:0", grading(env_assertions={"assertions": [assertion]}))
    ep: Episode = episode("t:0")
    await ep.call("set_status", {"order_id": "O-1", "status": "paid"}, "c1")
    before = await _state(stub, "t:0")
    response = await ep.grade()
    assert not response.success and response.grade is None
    assert response.error_kind == GradeErrorKind.NOT_GRADEABLE_AS_AUTHORED
    assert response.error.startswith("Trial 't:0' cannot be graded as authored: ")
    assert why in response.error, response.error
    assert await _state(stub, "t:0") == before


async def test_an_empty_assertion_list_scores_one(register: Any, episode: Any) -> None:
    await register("t:0", grading(env_assertions={"assertions": []}, tau2_actions={"actions": []}))
    response = await episode("t:0").grade()
    assert response.success, response.error
    assert (response.grade.components.env_assertions, response.grade.components.tau2_actions) == (1.0, 1.0)


# --- golden actions: golden_errors and the user's side ------------------------------------------------


REFUND_O1 = {"tool_name": "refund_order", "arguments": {"order_id": "O-1"}}  # O-1 is open: refused, written


async def test_golden_errors_keep_replays_a_tool_reported_error_as_written(
    register: Any, episode: Any
) -> None:
    await register(
        "t:0",
        grading(state_checks={"hash_enabled": True, "golden_actions": [REFUND_O1], "golden_errors": "keep"}),
    )
    ep: Episode = episode("t:0")
    await ep.call("refund_order", {"order_id": "O-1"}, "c1")
    response = await ep.grade()
    assert response.success, response.error
    assert (response.grade.score, response.grade.reasons) == (1.0, "State: hash match")

    # The golden state holds the refused call's write: a trial without it differs there.
    await register(
        "t:1",
        grading(state_checks={"hash_enabled": True, "golden_actions": [REFUND_O1], "golden_errors": "keep"}),
    )
    response = await episode("t:1").grade()
    assert response.success, response.error
    assert response.grade.score == 0.0 and "orders[O-1].refund_requested" in response.grade.reasons


@pytest.mark.parametrize(
    ("golden_errors", "action", "why"),
    [
        ("fail", REFUND_O1, "golden action [0] refund_order failed to replay: order O-1 is not paid"),
        (
            "keep",
            {"tool_name": "explode", "arguments": {}},
            "golden action [0] explode failed to replay: RuntimeError",
        ),
    ],
    ids=["reported-under-fail", "raised-under-keep"],
)
async def test_a_golden_call_that_fails_otherwise_fails_grading(
    register: Any, episode: Any, golden_errors: str, action: dict[str, Any], why: str
) -> None:
    await register(
        "t:0",
        grading(
            state_checks={"hash_enabled": True, "golden_actions": [action], "golden_errors": golden_errors}
        ),
    )
    response = await episode("t:0").grade()
    assert not response.success and response.error_kind == GradeErrorKind.HASH_GRADING_FAILED
    assert why in response.error, response.error


async def test_a_user_side_golden_action_replays_through_the_users_tools(register: Any, episode: Any) -> None:
    golden: list[dict[str, Any]] = [
        {"tool_name": "set_status", "arguments": {"order_id": "O-1", "status": "paid"}},
        {"tool_name": "toggle_airplane", "arguments": {}, "executor": "user"},
    ]
    await register("t:0", grading(state_checks={"hash_enabled": True, "golden_actions": golden}))
    ep: Episode = episode("t:0")
    await ep.call("set_status", {"order_id": "O-1", "status": "paid"}, "c1")
    await ep.call("toggle_airplane", {}, "c2", executor="user")
    response = await ep.grade()
    assert response.success, response.error
    assert (response.grade.score, response.grade.reasons) == (1.0, "State: hash match")


async def test_a_golden_action_resolves_only_among_its_executors_tools(register: Any, episode: Any) -> None:
    golden: list[dict[str, Any]] = [
        {"tool_name": "toggle_airplane", "arguments": {}},
        {"tool_name": "set_status", "arguments": {"order_id": "O-1", "status": "paid"}, "executor": "user"},
    ]
    await register("t:0", grading(state_checks={"hash_enabled": True, "golden_actions": golden}))
    response = await episode("t:0").grade()
    assert not response.success and response.error_kind == GradeErrorKind.HASH_GRADING_FAILED
    assert "[0] 'toggle_airplane'; [1] 'set_status' (user tool)" in response.error
    assert "user tools: toggle_airplane, airplane_is" in response.error


# --- the requested components and the weighted fold -----------------------------------------------------


async def test_unrequested_components_are_recorded_skips_and_weights_name_them(
    register: Any, episode: Any, stub: RunnerServiceStub
) -> None:
    await register(
        "t:0",
        {
            "combine_method": "weighted",
            "weights": {"tau2_actions": 3.0, "tau2_communicate": 1.0},
            "pass_threshold": 0.5,
            "tau2_actions": {"actions": [{"name": "explode"}]},
            "tau2_communicate": {"info": ["never said"]},
            "env_assertions": {"assertions": [{"tool_name": "explode", "expected": True}]},
        },
    )
    ep: Episode = episode("t:0")
    await ep.call("explode", {}, "c1")
    response = await stub.grade_trial(
        GradeTrialRequest(
            trial_id="t:0",
            llm_messages_json=json.dumps(ep.messages),
            termination_reason="agent_done",
            grading_components=["tau2_actions", "tau2_communicate"],
        )
    )
    assert response.success, response.error  # the failing assertion was never run
    grade = response.grade
    assert grade is not None and grade.components is not None
    components = grade.components
    assert (components.tau2_actions, components.tau2_communicate, components.env_assertions) == (
        1.0,
        0.0,
        None,
    )
    assert grade.score == pytest.approx(0.75) and grade.binary_pass
    assert "skipped: not requested by grading_components (env_assertions)" in grade.reasons
