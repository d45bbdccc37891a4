"""A task sent once (RegisterTrialRequest.task_json / task_digest) and state shared by a task's trials."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tolokaforge.contracts.runner import (
    CleanupTrialRequest,
    ExecuteToolResponse,
    ExecutionStatus,
    GetStateRequest,
    HealthCheckRequest,
    RegisterTrialRequest,
    RegistrationErrorKind,
    ResetTrialRequest,
    RunnerServiceStub,
)
from tolokaforge.core.protocol import ENGINE_PROTOCOL_VERSION
from tolokaforge.runner import RunnerHandle
from tolokaforge.runner.edge.task_wire import TaskWire

from .conftest import Episode, make_spec

CallTool = Callable[..., Awaitable[ExecuteToolResponse]]


@pytest.fixture(params=["memory", "http-postgres"])
def store_mode(request: pytest.FixtureRequest) -> str:
    """On both stores: the memory store shares the initial state, PostgreSQL answers from_state with 404."""
    return request.param


def _task(task_id: str, **overrides: Any) -> tuple[str, str]:
    task = make_spec(f"{task_id}:0", **overrides)["task"]
    text = json.dumps(task)
    return text, hashlib.sha256(text.encode()).hexdigest()


def _request(trial_id: str, digest: str, task_json: str = "", **context: Any) -> RegisterTrialRequest:
    return RegisterTrialRequest(
        trial_id=trial_id,
        trial_spec_json=json.dumps({"trial_id": trial_id, **context}),
        engine_protocol_version=ENGINE_PROTOCOL_VERSION,
        task_json=task_json,
        task_digest=digest,
    )


async def _tables(stub: RunnerServiceStub, trial_id: str) -> dict[str, Any]:
    state = await stub.get_state(GetStateRequest(trial_id=trial_id, include_unstable=True))
    assert state.success, state.error
    return json.loads(state.state_json)


async def test_health_check_says_the_runner_accepts_task_digests(stub: RunnerServiceStub) -> None:
    assert (await stub.health_check(HealthCheckRequest())).accepts_task_digest


async def test_a_task_sent_once_serves_every_later_trial_by_digest(stub: RunnerServiceStub) -> None:
    task_json, digest = _task("shop")
    first = await stub.register_trial(_request("shop:0", digest, task_json, run_id="r"))
    assert first.success, first.error
    later = await stub.register_trial(_request("shop:1", digest, run_id="r", trial_index=1))
    assert later.success, later.error
    assert [s.name for s in later.tool_schemas] == [s.name for s in first.tool_schemas]
    assert await _tables(stub, "shop:1") == await _tables(stub, "shop:0")


async def test_an_unknown_digest_asks_for_the_task_and_nothing_is_left(stub: RunnerServiceStub) -> None:
    task_json, digest = _task("unsent")
    answer = await stub.register_trial(_request("unsent:0", digest))
    assert not answer.success
    assert answer.error_kind == RegistrationErrorKind.TASK_NOT_CACHED
    assert digest in answer.error
    # Nothing was registered: the same id registers at once when the task comes along.
    again = await stub.register_trial(_request("unsent:0", digest, task_json))
    assert again.success, again.error


def _wrong_digest(text: str, digest: str) -> tuple[str, str | None]:
    return text, "0" * 64


def _no_digest(text: str, digest: str) -> tuple[str, str | None]:
    return text, ""


def _not_json(text: str, digest: str) -> tuple[str, str | None]:
    return text.replace('"open"', "NaN", 1), None  # None: the digest of the new text


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (_wrong_digest, "is not the SHA-256 of task_json"),
        (_no_digest, "task_json is given without task_digest"),
        (_not_json, "is not valid JSON"),
    ],
    ids=["wrong-digest", "no-digest", "not-json"],
)
async def test_task_parts_that_disagree_are_invalid_specs(
    stub: RunnerServiceStub, change: Callable[[str, str], tuple[str, str | None]], expected: str
) -> None:
    task_json, digest = _task("bad")
    text, new_digest = change(task_json, digest)
    if new_digest is None:
        new_digest = hashlib.sha256(text.encode()).hexdigest()
    answer = await stub.register_trial(_request("bad:0", new_digest, text))
    assert not answer.success
    assert answer.error_kind == RegistrationErrorKind.INVALID_SPEC
    assert expected in answer.error


async def test_the_task_in_both_places_is_refused(stub: RunnerServiceStub) -> None:
    task_json, digest = _task("twice")
    request = _request("twice:0", digest, task_json)
    request.trial_spec_json = json.dumps({"trial_id": "twice:0", "task": json.loads(task_json)})
    answer = await stub.register_trial(request)
    assert answer.error_kind == RegistrationErrorKind.INVALID_SPEC
    assert "task_json only" in answer.error


async def test_trials_sharing_an_initial_state_never_see_each_others_writes(
    stub: RunnerServiceStub, call_tool: CallTool
) -> None:
    task_json, digest = _task("iso")
    for index in range(3):
        answer = await stub.register_trial(_request(f"iso:{index}", digest, task_json if index == 0 else ""))
        assert answer.success, answer.error
    pristine = await _tables(stub, "iso:2")
    paid = await call_tool("iso:0", "set_status", {"order_id": "O-1", "status": "paid"}, "c1")
    assert paid.status == ExecutionStatus.SUCCESS, paid.error_message
    note = await call_tool("iso:1", "add_note", {"text": "hello"}, "c1")
    assert note.status == ExecutionStatus.SUCCESS, note.error_message

    assert (await _tables(stub, "iso:0"))["orders"][0]["status"] == "paid"
    assert (await _tables(stub, "iso:1"))["orders"][0]["status"] == "open"
    assert (await _tables(stub, "iso:0"))["notes"] == []
    assert await _tables(stub, "iso:2") == pristine
    # A trial of the same task registered afterwards starts from the pristine state too.
    answer = await stub.register_trial(_request("iso:3", digest))
    assert answer.success, answer.error
    assert await _tables(stub, "iso:3") == pristine

    # Reset goes back to the shared initial state; the other trials keep theirs.
    reset = await stub.reset_trial(ResetTrialRequest(trial_id="iso:0"))
    assert reset.success, reset.error
    assert await _tables(stub, "iso:0") == pristine
    assert (await _tables(stub, "iso:1"))["notes"] != []
    for index in range(4):
        await stub.cleanup_trial(CleanupTrialRequest(trial_id=f"iso:{index}"))


async def test_grading_shared_trials_replays_on_fresh_state_and_leaves_each_as_it_was(
    stub: RunnerServiceStub,
) -> None:
    grading = {
        "combine_method": "weighted",
        "weights": {"state_checks": 1.0},
        "pass_threshold": 1.0,
        "state_checks": {
            "hash_enabled": True,
            "golden_actions": [
                {"tool_name": "set_status", "arguments": {"order_id": "O-1", "status": "paid"}}
            ],
        },
    }
    task_json, digest = _task("graded", grading=grading)
    golden, wrong = Episode(stub, "graded:0"), Episode(stub, "graded:1")
    assert (await stub.register_trial(_request("graded:0", digest, task_json))).success
    assert (await stub.register_trial(_request("graded:1", digest))).success
    await golden.call("set_status", {"order_id": "O-1", "status": "paid"}, "c1")
    await wrong.call("set_status", {"order_id": "O-2", "status": "paid"}, "c1")
    before_golden, before_wrong = await _tables(stub, "graded:0"), await _tables(stub, "graded:1")

    passed = (await golden.grade()).grade
    failed = (await wrong.grade()).grade

    assert passed is not None and passed.binary_pass
    assert failed is not None and not failed.binary_pass
    diff = json.loads(failed.state_diff_json)
    fields = {(entry["record"], name) for entry in diff["modified"] for name in entry["fields"]}
    assert fields == {("O-1", "status"), ("O-2", "status")}
    assert await _tables(stub, "graded:0") == before_golden
    assert await _tables(stub, "graded:1") == before_wrong
    # The state after grading is the trial's: a further call works on it, not on the replay's.
    await wrong.call("set_status", {"order_id": "O-1", "status": "cancelled"}, "c2")
    assert [o["status"] for o in (await _tables(stub, "graded:1"))["orders"]] == ["cancelled", "paid"]


async def test_a_restarted_runner_asks_for_the_task_again(
    runner: RunnerHandle, stub: RunnerServiceStub
) -> None:
    task_json, digest = _task("evicted")
    assert (await stub.register_trial(_request("evicted:0", digest, task_json))).success
    runner.servicer.tasks = TaskWire()  # forgotten, as by a restart or an eviction
    answer = await stub.register_trial(_request("evicted:1", digest))
    assert answer.error_kind == RegistrationErrorKind.TASK_NOT_CACHED
    assert (await stub.register_trial(_request("evicted:1", digest, task_json))).success


async def test_forked_workers_start_from_the_shared_initial_state_and_get_only_their_changes(
    runner: RunnerHandle, stub: RunnerServiceStub, call_tool: CallTool
) -> None:
    task_json, digest = _task("based")
    assert (await stub.register_trial(_request("based:0", digest, task_json))).success
    assert (await stub.register_trial(_request("based:1", digest))).success
    paid = await call_tool("based:0", "set_status", {"order_id": "O-1", "status": "paid"}, "c1")
    assert paid.status == ExecutionStatus.SUCCESS, paid.error_message
    other = await call_tool("based:1", "get_order", {"order_id": "O-1"}, "c1")
    assert json.loads(other.output)["status"] == "open"

    # The zygote read the task's initial tables once, from one file, whatever the number of trials.
    zygotes = runner.servicer.runner.registry.executor.isolated.zygotes
    assert zygotes is not None
    files = list((zygotes.directory / "states").glob("*.json"))
    assert [json.loads(file.read_text()) for file in files] == [
        json.loads(task_json)["initial_state"]["tables"]
    ]

    # A fresh worker of the trial that wrote starts from that copy plus the table it changed.
    trial = runner.servicer.runner.registry.get("based:0")
    assert trial.processes.workers is not None
    for pid in trial.processes.workers.pids():
        os.kill(pid, signal.SIGKILL)
    for _ in range(250):
        if not any(worker.alive for worker in trial.processes.workers.live()):
            break
        await asyncio.sleep(0.02)
    again = await call_tool("based:0", "get_order", {"order_id": "O-1"}, "c2")
    assert again.status == ExecutionStatus.SUCCESS, again.error_message
    assert json.loads(again.output)["status"] == "paid"
    assert (
        json.loads((await call_tool("based:1", "get_order", {"order_id": "O-1"}, "c2")).output)["status"]
        == "open"
    )
