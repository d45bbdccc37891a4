"""GradeTrial with ``release``: the trial is graded and forgotten in one call, and a repeat gets the same answer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tolokaforge.contracts.runner import (
    CleanupTrialRequest,
    GetStateRequest,
    GradeErrorKind,
    GradeTrialRequest,
    GradeTrialResponse,
    RunnerServiceStub,
)
from tolokaforge.db import StoreUnreachableError
from tolokaforge.runner import RunnerHandle

from .conftest import Episode, make_spec, register_request

GRADING = {
    "combine_method": "weighted",
    "weights": {"state_checks": 1.0},
    "pass_threshold": 1.0,
    "state_checks": {
        "hash_enabled": True,
        "golden_actions": [{"tool_name": "set_status", "arguments": {"order_id": "O-1", "status": "paid"}}],
    },
}


async def _graded(stub: RunnerServiceStub, trial_id: str, **task: Any) -> tuple[Episode, GradeTrialRequest]:
    answer = await stub.register_trial(register_request(make_spec(trial_id, grading=GRADING, **task)))
    assert answer.success, answer.error
    episode = Episode(stub, trial_id)
    await episode.call("set_status", {"order_id": "O-1", "status": "paid"}, "c1")
    episode.say("Done.")
    request = GradeTrialRequest(
        trial_id=trial_id, llm_messages_json=json.dumps(episode.messages), termination_reason="agent_done"
    )
    return episode, request


async def _registered(stub: RunnerServiceStub, trial_id: str) -> bool:
    return (await stub.get_state(GetStateRequest(trial_id=trial_id))).success


async def test_a_released_trial_is_graded_then_gone(stub: RunnerServiceStub) -> None:
    _, request = await _graded(stub, "rel:0")
    request.release = True
    answer = await stub.grade_trial(request)
    assert answer.success and answer.grade is not None and answer.grade.binary_pass, answer.error
    assert answer.released
    assert not await _registered(stub, "rel:0")
    # CleanupTrial has nothing left to do, and says so the usual way.
    assert (await stub.cleanup_trial(CleanupTrialRequest(trial_id="rel:0"))).success


async def test_without_release_the_trial_stays(stub: RunnerServiceStub) -> None:
    _, request = await _graded(stub, "kept:0")
    answer = await stub.grade_trial(request)
    assert answer.success and not answer.released
    assert await _registered(stub, "kept:0")
    assert (await stub.cleanup_trial(CleanupTrialRequest(trial_id="kept:0"))).success


async def test_the_request_sent_again_gets_the_same_answer(
    runner: RunnerHandle, stub: RunnerServiceStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, request = await _graded(stub, "again:0")
    request.release = True
    first = await stub.grade_trial(request)
    releases: list[str] = []
    registry = runner.servicer.runner.registry
    original = registry.cleanup

    async def counting(trial_id: str) -> bool:
        releases.append(trial_id)
        return await original(trial_id)

    monkeypatch.setattr(registry, "cleanup", counting)
    repeat = await stub.grade_trial(request)  # as after a reply lost in transit
    assert repeat == first and repeat.released
    assert releases == []  # answered from memory: nothing is released twice
    assert repeat.grade is not None and repeat.grade.binary_pass


async def test_a_new_trial_under_the_id_is_graded_afresh(stub: RunnerServiceStub) -> None:
    _, request = await _graded(stub, "reused:0")
    request.release = True
    assert (await stub.grade_trial(request)).grade.binary_pass  # pyright: ignore[reportOptionalMemberAccess]
    # Registered again (a fresh state: nothing paid), the id's old grade is not its grade.
    assert (await stub.register_trial(register_request(make_spec("reused:0", grading=GRADING)))).success
    answer = await stub.grade_trial(
        GradeTrialRequest(
            trial_id="reused:0", llm_messages_json="[]", termination_reason="agent_done", release=True
        )
    )
    assert answer.released
    assert answer.grade is None or not answer.grade.binary_pass


async def test_a_cleaned_up_id_forgets_its_released_answer(stub: RunnerServiceStub) -> None:
    _, request = await _graded(stub, "gone:0")
    request.release = True
    assert (await stub.grade_trial(request)).released
    assert (await stub.cleanup_trial(CleanupTrialRequest(trial_id="gone:0"))).success
    answer = await stub.grade_trial(request)
    assert answer.error_kind == GradeErrorKind.TRIAL_NOT_FOUND and not answer.released


async def test_an_unknown_trial_is_not_found_and_not_released(stub: RunnerServiceStub) -> None:
    answer = await stub.grade_trial(
        GradeTrialRequest(
            trial_id="never:0", llm_messages_json="[]", termination_reason="agent_done", release=True
        )
    )
    assert answer.error_kind == GradeErrorKind.TRIAL_NOT_FOUND and not answer.released


async def test_a_release_that_fails_leaves_the_cleanup_to_the_caller(
    runner: RunnerHandle, stub: RunnerServiceStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, request = await _graded(stub, "stuck:0")
    request.release = True

    async def unreachable(trial_id: str) -> bool:
        raise StoreUnreachableError("the store is down", outcome_unknown=False)

    registry = runner.servicer.runner.registry
    original = registry.cleanup
    monkeypatch.setattr(registry, "cleanup", unreachable)
    answer: GradeTrialResponse = await stub.grade_trial(request)
    assert answer.success and not answer.released  # the grade stands; the trial is still there
    monkeypatch.setattr(registry, "cleanup", original)
    assert await _registered(stub, "stuck:0")
    assert (await stub.cleanup_trial(CleanupTrialRequest(trial_id="stuck:0"))).success
