"""GradeTrial end to end on a real runner: hash grading, the error table, idempotence, the diff."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import grpclib
import pytest
from grpclib.const import Status

from tolokaforge.contracts.runner import (
    ExecutionStatus,
    GetStateRequest,
    GradeTrialRequest,
    RegisterTrialRequest,
    RunnerServiceStub,
)
from tolokaforge.runner import RunnerHandle

SpecFactory = Callable[..., dict[str, Any]]
RequestFor = Callable[..., RegisterTrialRequest]

PAY_O1 = {"tool_name": "set_status", "arguments": {"order_id": "O-1", "status": "paid"}}


def hash_grading(*golden: dict[str, Any], **extra: Any) -> dict[str, Any]:
    grading: dict[str, Any] = {
        "combine_method": "weighted",
        "weights": {"state_checks": 1.0},
        "pass_threshold": 1.0,
        "state_checks": {"hash_enabled": True, "golden_actions": list(golden)},
    }
    grading.update(extra)
    return grading


@pytest.fixture
def register(
    stub: RunnerServiceStub, spec_factory: SpecFactory, request_for: RequestFor
) -> Callable[..., Any]:
    async def _register(trial_id: str, **task: Any) -> None:
        response = await stub.register_trial(request_for(spec_factory(trial_id, **task)))
        assert response.success, response.error

    return _register


async def test_golden_path_passes_with_score_one(register: Any, episode: Any) -> None:
    await register("t:0", grading=hash_grading(PAY_O1))
    ep = episode("t:0")
    await ep.call("get_order", {"order_id": "O-1"}, "c1")
    await ep.call("set_status", {"order_id": "O-1", "status": "paid"}, "c2")
    ep.say("Your order O-1 is paid.")
    response = await ep.grade()
    assert response.success, response.error
    grade = response.grade
    assert (grade.binary_pass, grade.score) == (True, 1.0)
    assert grade.components.state_checks == 1.0
    assert grade.components.transcript_rules == -1.0 and grade.components.trace_checks is None
    assert grade.reasons == "State: hash match"
    assert grade.state_diff_json == ""


async def test_wrong_argument_fails_with_a_diff_naming_the_record(
    register: Any, episode: Any, stub: RunnerServiceStub
) -> None:
    await register("t:0", grading=hash_grading(PAY_O1))
    ep = episode("t:0")
    await ep.call("set_status", {"order_id": "O-2", "status": "paid"}, "c1")
    before = (await stub.get_state(GetStateRequest(trial_id="t:0"))).stable_hash
    response = await ep.grade()
    assert response.success, response.error
    assert (response.grade.binary_pass, response.grade.score) == (False, 0.0)
    diff = json.loads(response.grade.state_diff_json)
    modified = {(m["table"], m["record"]): m["fields"] for m in diff["modified"]}
    assert modified[("orders", "O-1")]["status"] == {"expected": "paid", "actual": "open"}
    assert modified[("orders", "O-2")]["status"] == {"expected": "open", "actual": "paid"}
    assert any("orders[O-1].status" in line for line in diff["diff_lines"])
    assert response.grade.reasons.startswith("State: 2 modified (orders[O-1].status, orders[O-2].status)")
    # Grading restored the trial's own state.
    assert (await stub.get_state(GetStateRequest(trial_id="t:0"))).stable_hash == before


async def test_grading_twice_gives_the_same_grade(register: Any, episode: Any) -> None:
    await register("t:0", grading=hash_grading(PAY_O1))
    ep = episode("t:0")
    await ep.call("set_status", {"order_id": "O-2", "status": "paid"}, "c1")
    first, second = await ep.grade(), await ep.grade()
    assert first.success and second.success, (first.error, second.error)
    assert first.grade == second.grade


@pytest.mark.parametrize("golden_fails", [False, True], ids=["replayed", "replay-failed"])
async def test_tools_resume_on_the_trials_own_state_after_grading(
    register: Any, episode: Any, stub: RunnerServiceStub, runner: RunnerHandle, golden_fails: bool
) -> None:
    golden = [PAY_O1, {"tool_name": "add_note", "arguments": {"text": "golden"}}]
    if golden_fails:
        golden.append({"tool_name": "explode", "arguments": {}})
    await register("t:0", grading=hash_grading(*golden))
    ep = episode("t:0")
    await ep.call("set_status", {"order_id": "O-2", "status": "paid"}, "c1")
    await ep.call("add_note", {"text": "mine"}, "c2")
    assert (await ep.grade()).success is not golden_fails
    # Tools read the runner's mirror: it must hold the trial's state again, not the golden replay's.
    seen = await ep.call("get_order", {"order_id": "O-1"}, "c3")
    assert json.loads(seen.output)["status"] == "open"
    written = await ep.call("add_note", {"text": "after grading"}, "c4")
    assert written.status == ExecutionStatus.SUCCESS, written.error_message
    state = json.loads((await stub.get_state(GetStateRequest(trial_id="t:0"))).state_json)
    assert state["notes"] == [{"text": "mine"}, {"text": "after grading"}]
    assert [o["status"] for o in state["orders"]] == ["open", "paid"]
    assert runner.servicer.runner.registry.get("t:0").state.mirror.tables == state


async def test_golden_replay_starts_from_the_initialised_state(register: Any, episode: Any) -> None:
    initial: dict[str, Any] = {
        "tables": {"orders": [{"id": "O-1", "status": "open"}], "notes": [], "wallet": {}},
        "initialization_actions": [{"tool_name": "add_note", "arguments": {"text": "seeded"}}],
    }
    await register("t:0", initial_state=initial, grading=hash_grading(PAY_O1))
    ep = episode("t:0")
    await ep.call("set_status", {"order_id": "O-1", "status": "paid"}, "c1")
    response = await ep.grade()
    assert response.success and response.grade.binary_pass, (
        response.grade.reasons if response.success else response.error
    )


async def test_refusal_task_passes_when_nothing_changed(register: Any, episode: Any) -> None:
    await register("t:0", grading=hash_grading())
    ep = episode("t:0")
    await ep.call("get_order", {"order_id": "O-1"}, "c1")
    ep.say("I cannot do that.")
    assert (await ep.grade()).grade.binary_pass
    await ep.call("add_note", {"text": "forbidden"}, "c2")
    failed = await ep.grade()
    assert not failed.grade.binary_pass and "1 added (notes[#0])" in failed.grade.reasons


async def test_unregistered_trial(stub: RunnerServiceStub) -> None:
    response = await stub.grade_trial(GradeTrialRequest(trial_id="ghost:0"))
    assert (response.success, response.error) == (False, "Trial 'ghost:0' not found")
    assert response.grade is None


async def test_timeline_inconsistency_fails_before_any_component(register: Any, episode: Any) -> None:
    await register("t:0", grading=hash_grading(PAY_O1))
    ep = episode("t:0")
    await ep.call("set_status", {"order_id": "O-1", "status": "paid"}, "c1")
    ep.messages = ep.messages[:2]  # the transcript no longer shows the recorded call
    response = await ep.grade()
    assert not response.success and response.grade is None
    assert response.error.startswith("Trial 't:0' is not gradeable: TimelineInconsistencyError:")
    assert "c1" in response.error


async def test_undecodable_transcript_is_a_value_error_row(register: Any, stub: RunnerServiceStub) -> None:
    await register("t:0", grading=hash_grading(PAY_O1))
    for payload, fragment in [
        ("{not json", "not gradeable: "),
        ('[{"role": "user"}]', "content"),
        (
            '[{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "x", "arguments": "{}"}}]}]',
            "id",
        ),
    ]:
        response = await stub.grade_trial(GradeTrialRequest(trial_id="t:0", llm_messages_json=payload))
        assert not response.success
        assert response.error.startswith("Trial 't:0' is not gradeable: ") and fragment in response.error
        assert "Error:" in response.error  # the ValueError subclass is named


async def test_unknown_termination_reason_fails_the_rpc(register: Any, stub: RunnerServiceStub) -> None:
    await register("t:0", grading=hash_grading(PAY_O1))
    with pytest.raises(grpclib.GRPCError) as raised:
        await stub.grade_trial(GradeTrialRequest(trial_id="t:0", termination_reason="finished_somehow"))
    assert raised.value.status == Status.INVALID_ARGUMENT
    message = raised.value.message or ""
    assert "finished_somehow" in message and "agent_done" in message and "max_turns" in message
    assert (await stub.grade_trial(GradeTrialRequest(trial_id="t:0", termination_reason=""))).success


async def test_unresolvable_golden_actions_are_all_named_and_nothing_is_written(
    register: Any, episode: Any, stub: RunnerServiceStub
) -> None:
    golden: list[dict[str, Any]] = [
        PAY_O1,
        {"tool_name": "teleport", "arguments": {}},
        {"tool_name": "", "arguments": {}},
    ]
    await register("t:0", grading=hash_grading(*golden))
    ep = episode("t:0")
    await ep.call("add_note", {"text": "agent wrote this"}, "c1")
    before = await stub.get_state(GetStateRequest(trial_id="t:0", include_unstable=True))
    response = await ep.grade()
    assert not response.success
    assert response.error.startswith(
        "Hash grading failed: UnresolvableGoldenAction: golden actions naming no tool"
    )
    assert "[1] 'teleport'" in response.error and "[2] names no tool" in response.error
    assert "set_status" in response.error  # the registered set
    after = await stub.get_state(GetStateRequest(trial_id="t:0", include_unstable=True))
    assert (after.state_json, after.full_hash) == (before.state_json, before.full_hash)


async def test_golden_names_resolve_by_single_suffix(register: Any, episode: Any) -> None:
    await register(
        "t:0",
        grading=hash_grading({"tool_name": "status", "arguments": {"order_id": "O-1", "status": "paid"}}),
    )
    ep = episode("t:0")
    await ep.call("set_status", {"order_id": "O-1", "status": "paid"}, "c1")
    response = await ep.grade()
    assert response.success and response.grade.binary_pass, response.error


async def test_golden_action_that_fails_to_replay(
    register: Any, episode: Any, stub: RunnerServiceStub
) -> None:
    await register("t:0", grading=hash_grading(PAY_O1, {"tool_name": "explode", "arguments": {}}))
    ep = episode("t:0")
    await ep.call("add_note", {"text": "mine"}, "c1")
    response = await ep.grade()
    assert not response.success
    assert response.error.startswith("Hash grading failed: golden action [1] explode failed to replay")
    state = json.loads((await stub.get_state(GetStateRequest(trial_id="t:0"))).state_json)
    assert state["notes"] == [{"text": "mine"}] and state["orders"][0]["status"] == "open"


async def test_jsonpath_blend_needs_hash_weight(register: Any, episode: Any) -> None:
    grading = hash_grading(PAY_O1)
    grading["state_checks"]["jsonpaths"] = [{"path": "$.db.orders[0].status", "equals": "paid"}]
    await register("t:0", grading=grading)
    response = await episode("t:0").grade()
    assert not response.success
    assert response.error.startswith(
        "Trial 't:0' is not gradeable: ValueError: state_checks.hash.weight is required"
    )


async def test_jsonpath_blend_with_hash_weight(register: Any, episode: Any) -> None:
    grading = hash_grading(PAY_O1, pass_threshold=0.5)
    grading["state_checks"]["hash_weight"] = 0.75
    grading["state_checks"]["jsonpaths"] = [
        {"path": "$.db.orders[0].status", "equals": "paid"},
        {"path": "$.db.notes", "length": 1},
    ]
    await register("t:0", grading=grading)
    ep = episode("t:0")
    await ep.call("set_status", {"order_id": "O-1", "status": "paid"}, "c1")
    response = await ep.grade()
    assert response.success, response.error
    # hash matched (1.0 * 0.75) + one of two JSONPath checks (0.5 * 0.25)
    assert response.grade.score == pytest.approx(0.875)
    assert "JSONPath: 1/2 checks passed" in response.grade.reasons


async def test_hash_weight_not_consulted_is_noted(register: Any, episode: Any) -> None:
    grading = hash_grading(PAY_O1)
    grading["state_checks"]["hash_weight"] = 0.5
    await register("t:0", grading=grading)
    response = await episode("t:0").grade()
    assert "state_checks.hash.weight was not consulted" in response.grade.reasons


async def test_assertions_over_a_database_never_provisioned(register: Any, episode: Any) -> None:
    grading = {
        "combine_method": "all",
        "pass_threshold": 1.0,
        "state_checks": {"jsonpaths": [{"path": "$.db.orders[0].status", "equals": "paid"}]},
    }
    await register("t:0", agent_tools=[], user_tools=[], tool_code=None, initial_state={}, grading=grading)
    response = await episode("t:0").grade()
    assert not response.success
    assert response.error.startswith("Trial 't:0' cannot be graded as authored: state_checks.jsonpaths")
    assert "provisions none" in response.error


@pytest.mark.parametrize("root", ["filesystem", "agent", "mock_web_url", "rag_corpus_dir", "orders"])
async def test_jsonpath_roots_the_runner_does_not_hold(register: Any, episode: Any, root: str) -> None:
    grading = {
        "combine_method": "all",
        "pass_threshold": 1.0,
        "state_checks": {"jsonpaths": [{"path": f"$.{root}.x", "exists": True}]},
    }
    await register("t:0", grading=grading)
    response = await episode("t:0").grade()
    assert not response.success
    assert response.error.startswith(
        f"Trial 't:0' cannot be graded as authored: state_checks.jsonpaths declares path '$.{root}.x'"
    )


async def test_missing_component_weight(register: Any, episode: Any) -> None:
    grading = hash_grading(PAY_O1, weights={"transcript_rules": 1.0})
    await register("t:0", grading=grading)
    response = await episode("t:0").grade()
    assert not response.success
    assert response.error.startswith(
        "Trial 't:0' is not gradeable: MissingComponentWeight: state_checks was scored and combine.weights declares no weight"
    )


async def test_non_scoring_shape_passes(register: Any, episode: Any) -> None:
    await register("t:0")
    response = await episode("t:0").grade()
    assert response.success, response.error
    assert (response.grade.binary_pass, response.grade.score) == (True, 1.0)
    assert response.grade.reasons.startswith("no component was configured and no weight names one")


async def test_llm_judge_without_transcript_is_a_recorded_skip(register: Any, episode: Any) -> None:
    rubric = {"criteria": [{"id": "polite", "description": "The agent is polite."}]}
    grading = hash_grading(PAY_O1, llm_judge={"rubric": rubric})
    await register("t:0", grading=grading, judge_model={"model": "tolokaforge-mock-judge"})
    ep = episode("t:0")
    await ep.call("set_status", {"order_id": "O-1", "status": "paid"}, "c1")
    response = await ep.grade(transcript=False)
    assert response.success, response.error
    assert "skipped: no transcript messages (llm_judge)" in response.grade.reasons


async def test_grading_components_filter(register: Any, episode: Any, stub: RunnerServiceStub) -> None:
    grading = hash_grading(PAY_O1, weights={"state_checks": 1.0, "transcript_rules": 1.0})
    grading["transcript_rules"] = {"must_contain": ["paid"]}
    await register("t:0", grading=grading)
    ep = episode("t:0")
    ep.say("done, it is paid")
    response = await stub.grade_trial(
        GradeTrialRequest(
            trial_id="t:0", llm_messages_json=json.dumps(ep.messages), grading_components=["transcript_rules"]
        )
    )
    assert response.success, response.error
    assert response.grade is not None and response.grade.components is not None
    assert response.grade.components.state_checks == -1.0
    assert response.grade.components.transcript_rules == 1.0
    assert "skipped: not requested by grading_components" in response.grade.reasons
    unknown = await stub.grade_trial(GradeTrialRequest(trial_id="t:0", grading_components=["vibes"]))
    assert not unknown.success and "vibes" in unknown.error


async def test_golden_replay_is_not_recorded_in_history(
    register: Any, episode: Any, runner: RunnerHandle
) -> None:
    await register("t:0", grading=hash_grading(PAY_O1))
    ep = episode("t:0")
    await ep.call("set_status", {"order_id": "O-1", "status": "paid"}, "c1")
    await ep.grade()
    assert [r.call_id for r in runner.servicer.runner.registry.get("t:0").history] == ["c1"]
