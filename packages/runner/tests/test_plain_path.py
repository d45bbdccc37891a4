"""Trials registered the plain way (the whole TrialSpec in ``trial_spec_json``, no digest): what a
foreign engine sends. They behave as trials of a task sent once by digest, and cost as little where
it matters: a worker of the 2nd..Nth trial of a task is sent no table it did not change."""

from __future__ import annotations

import asyncio
import gc
import hashlib
import json
from typing import Any

import pytest

from tolokaforge.contracts.runner import (
    CleanupTrialRequest,
    ExecutionStatus,
    GetStateRequest,
    RegisterTrialRequest,
    RunnerServiceStub,
)
from tolokaforge.core.protocol import ENGINE_PROTOCOL_VERSION
from tolokaforge.runner import RunnerHandle
from tolokaforge.runner.edge.task_wire import TaskWire
from tolokaforge.runner.workers.code import WorkerBase
from tolokaforge.runner.workers.worker import ToolWorker

from .conftest import Episode, initial_tables, make_spec, register_request

PAID = {"tool_name": "set_status", "arguments": {"order_id": "O-1", "status": "paid"}}


def _graded_spec(trial_id: str, **task: Any) -> dict[str, Any]:
    grading = {
        "combine_method": "weighted",
        "weights": {"state_checks": 1.0},
        "pass_threshold": 1.0,
        "state_checks": {"hash_enabled": True, "golden_actions": [PAID]},
    }
    return make_spec(trial_id, grading=grading, **task)


async def _register_plain(stub: RunnerServiceStub, spec: dict[str, Any]) -> None:
    answer = await stub.register_trial(register_request(spec))
    assert answer.success, answer.error


async def _register_by_digest(stub: RunnerServiceStub, spec: dict[str, Any]) -> None:
    task_json = json.dumps(spec["task"])
    answer = await stub.register_trial(
        RegisterTrialRequest(
            trial_id=spec["trial_id"],
            trial_spec_json=json.dumps({"trial_id": spec["trial_id"]}),
            engine_protocol_version=ENGINE_PROTOCOL_VERSION,
            task_json=task_json,
            task_digest=hashlib.sha256(task_json.encode()).hexdigest(),
        )
    )
    assert answer.success, answer.error


async def test_a_later_plain_trials_worker_is_sent_only_the_tables_it_changed(
    runner: RunnerHandle, stub: RunnerServiceStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert runner.runner.executor.isolated.zygotes is not None, "workers are forked here"
    sent: dict[str, dict[str, Any]] = {}
    start = ToolWorker.start

    async def recording(code: Any, tables: dict[str, Any], version: int, **options: Any) -> ToolWorker:
        base: WorkerBase | None = options.get("base")
        assert base is not None, "a trial of a task whose initial state is hashed forks from a base"
        sent[options["workspace"].name] = base.overlay(tables)
        return await start(code, tables, version, **options)

    monkeypatch.setattr(ToolWorker, "start", recording)
    await _register_plain(stub, make_spec("plain:0"))
    first = await Episode(stub, "plain:0").call("get_order", {"order_id": "O-1"}, "c1")
    assert first.status == ExecutionStatus.SUCCESS, first.error_message
    # Gone before the next trial comes, and its task forgotten (evicted): nothing of its parsed task
    # is left for that trial to share, but the zygote still holds an initial state of equal content.
    assert (await stub.cleanup_trial(CleanupTrialRequest(trial_id="plain:0"))).success
    runner.servicer.tasks = TaskWire()
    gc.collect()

    await _register_plain(stub, make_spec("plain:1"))
    episode = Episode(stub, "plain:1")
    read = await episode.call("get_order", {"order_id": "O-1"}, "c1")
    assert read.status == ExecutionStatus.SUCCESS, read.error_message
    assert json.loads(read.output)["status"] == "open"
    trial = runner.runner.registry.get("plain:1")
    assert trial.files.workspace is not None
    # Its own parse of the initial state the zygote holds: the zygote's copy stands for it.
    assert sent[trial.files.workspace.name] == {}

    paid = await episode.call("set_status", {"order_id": "O-1", "status": "paid"}, "c2")
    assert paid.status == ExecutionStatus.SUCCESS, paid.error_message
    # A new worker of the trial (after its worker was lost) is sent the one table it changed.
    assert trial.processes.workers is not None
    await trial.processes.workers.close()
    again = await episode.call("get_order", {"order_id": "O-1"}, "c3")
    assert json.loads(again.output)["status"] == "paid"
    assert list(sent[trial.files.workspace.name]) == ["orders"]
    await _register_plain(stub, make_spec("plain:2"))
    other = await Episode(stub, "plain:2").call("get_order", {"order_id": "O-1"}, "c1")
    assert json.loads(other.output)["status"] == "open"


async def test_a_new_tasks_zygote_starts_at_its_registration_not_at_its_first_call(
    runner: RunnerHandle, stub: RunnerServiceStub
) -> None:
    zygotes = runner.runner.executor.isolated.zygotes
    assert zygotes is not None, "workers are forked here"
    await _register_plain(stub, make_spec("warm-a:0"))  # the code's first trial: a worker starts now
    assert len(zygotes.pids()) == 1
    # Another task of the same code with another initial state: a zygote of its own, one per state.
    tables = {**initial_tables(), "notes": [{"id": "N-1", "text": "kept"}]}
    await _register_plain(stub, make_spec("warm-b:0", initial_state={"tables": tables}))
    for _ in range(500):
        if len(zygotes.pids()) == 2:
            break
        await asyncio.sleep(0.02)
    started = set(zygotes.pids())
    assert len(started) == 2, "no call was made, and the new task's zygote is up"

    read = await Episode(stub, "warm-b:0").call("get_order", {"order_id": "O-1"}, "c1")
    assert read.status == ExecutionStatus.SUCCESS, read.error_message
    assert set(zygotes.pids()) == started
    workers = runner.runner.registry.get("warm-b:0").processes.workers
    assert workers is not None and workers.live()[0].forked


@pytest.mark.parametrize("status", ["paid", "cancelled"])
async def test_a_plain_trial_grades_as_a_trial_of_a_task_sent_by_digest(
    stub: RunnerServiceStub, status: str
) -> None:
    grades: list[tuple[bool, float, str, str]] = []
    # Plain: the 1st and 2nd trials replay the golden path; the 3rd and 4th reuse their outcome.
    registers = (_register_by_digest, _register_plain, _register_plain, _register_plain, _register_plain)
    for index, register in enumerate(registers):
        trial_id = f"graded-{status}:{index}"
        await register(stub, _graded_spec(trial_id))
        episode = Episode(stub, trial_id)
        call = await episode.call("set_status", {"order_id": "O-1", "status": status}, "c1")
        assert call.status == ExecutionStatus.SUCCESS, call.error_message
        answer = await episode.grade()
        assert answer.success, answer.error
        assert answer.grade is not None
        grade = answer.grade
        grades.append((grade.binary_pass, grade.score, grade.reasons, grade.state_diff_json))
    assert grades[0][0] is (status == "paid")
    assert all(grade == grades[0] for grade in grades[1:])


async def test_two_plain_trials_of_one_task_share_it_and_one_record_apart_is_another_task(
    runner: RunnerHandle, stub: RunnerServiceStub
) -> None:
    registry = runner.runner.registry
    await _register_plain(stub, make_spec("same:0"))
    first = registry.get("same:0").spec.task
    # Gone before the next trial of its task comes, as when an engine runs a task's trials in turn.
    assert (await stub.cleanup_trial(CleanupTrialRequest(trial_id="same:0"))).success
    await _register_plain(stub, make_spec("same:1"))
    await _register_plain(stub, make_spec("same:2"))
    apart = initial_tables()
    apart["orders"][1]["total"] = 4.0
    await _register_plain(stub, make_spec("same:3", initial_state={"tables": apart}))

    second, third, other = (registry.get(f"same:{index}") for index in (1, 2, 3))
    assert second.spec.task is first and third.spec.task is first
    assert (second.spec.trial_id, third.spec.trial_id) == ("same:1", "same:2")
    assert third.state.initial_tables is second.state.initial_tables
    assert other.spec.task is not first
    assert other.state.initial_hash != second.state.initial_hash
    totals: dict[str, float] = {}
    for trial_id in ("same:2", "same:3"):
        state = await stub.get_state(GetStateRequest(trial_id=trial_id))
        assert state.success, state.error
        totals[trial_id] = json.loads(state.state_json)["orders"][1]["total"]
    assert totals == {"same:2": 3.0, "same:3": 4.0}
