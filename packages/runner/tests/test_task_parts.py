"""Parts many tasks share, sent once per runner (RegisterTrialRequest.code_* / tables_*)."""

from __future__ import annotations

import hashlib
import json
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
    RunnerServiceStub,
)
from tolokaforge.core.models import TrialSpec
from tolokaforge.core.protocol import ENGINE_PROTOCOL_VERSION
from tolokaforge.runner import RunnerHandle
from tolokaforge.runner.edge.task_wire import TaskParts, TaskWire
from tolokaforge.runner.tools.code_loader import load_code
from tolokaforge.runner.trials.task_cache import TaskCache

from .conftest import FIXTURES, initial_tables, make_spec

CallTool = Callable[..., Awaitable[ExecuteToolResponse]]


@pytest.fixture(params=["memory", "http-postgres"])
def store_mode(request: pytest.FixtureRequest) -> str:
    """The memory store starts a trial from the state it holds; PostgreSQL answers from_state with 404."""
    return request.param


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _code_json() -> str:
    root = FIXTURES / "pack_a"
    files = {
        path.relative_to(root).as_posix(): path.read_text()
        for path in sorted(root.rglob("*.py"))
        if "__pycache__" not in path.parts
    }
    return json.dumps({"files": files})


class Wire:
    """A task sent apart from its code and tables, as the host sends it to a runner that takes parts."""

    def __init__(self, task_id: str, tables: dict[str, Any] | None = None, **overrides: Any) -> None:
        task = make_spec(f"{task_id}:0", **overrides)["task"]
        del task["tool_code"]
        del task["initial_state"]["tables"]
        self.task_json = json.dumps(task)
        self.code_json = _code_json()
        self.tables_json = json.dumps(initial_tables() if tables is None else tables)

    def request(
        self, trial_id: str, *, task: bool = True, code: bool = True, tables: bool = True
    ) -> RegisterTrialRequest:
        return RegisterTrialRequest(
            trial_id=trial_id,
            trial_spec_json=json.dumps({"trial_id": trial_id}),
            engine_protocol_version=ENGINE_PROTOCOL_VERSION,
            task_json=self.task_json if task else "",
            task_digest=_digest(self.task_json),
            code_json=self.code_json if code else "",
            code_digest=_digest(self.code_json),
            tables_json=self.tables_json if tables else "",
            tables_digest=_digest(self.tables_json),
        )


async def _tables(stub: RunnerServiceStub, trial_id: str) -> dict[str, Any]:
    state = await stub.get_state(GetStateRequest(trial_id=trial_id, include_unstable=True))
    assert state.success, state.error
    return json.loads(state.state_json)


async def test_health_check_says_the_runner_accepts_task_parts(stub: RunnerServiceStub) -> None:
    assert (await stub.health_check(HealthCheckRequest())).accepts_task_parts


async def test_a_second_task_names_the_parts_the_first_sent(
    stub: RunnerServiceStub, call_tool: CallTool
) -> None:
    first, second = Wire("alpha"), Wire("beta", system_prompt="another task, the same code and tables")
    answer = await stub.register_trial(first.request("alpha:0"))
    assert answer.success, answer.error
    answer = await stub.register_trial(second.request("beta:0", code=False, tables=False))
    assert answer.success, answer.error
    # The parts made whole tasks: the tools run from the code part, on the tables part's state.
    assert await _tables(stub, "beta:0") == initial_tables()
    paid = await call_tool("beta:0", "set_status", {"order_id": "O-1", "status": "paid"}, "c1")
    assert paid.status == ExecutionStatus.SUCCESS, paid.error_message
    assert (await _tables(stub, "beta:0"))["orders"][0]["status"] == "paid"
    assert (await _tables(stub, "alpha:0"))["orders"][0]["status"] == "open"
    # A later trial of a kept task needs nothing but the digests.
    answer = await stub.register_trial(second.request("beta:1", task=False, code=False, tables=False))
    assert answer.success, answer.error
    assert await _tables(stub, "beta:1") == initial_tables()
    for trial_id in ("alpha:0", "beta:0", "beta:1"):
        await stub.cleanup_trial(CleanupTrialRequest(trial_id=trial_id))


async def test_tables_that_differ_make_parts_of_their_own(stub: RunnerServiceStub) -> None:
    tables = initial_tables()
    tables["orders"] = tables["orders"][:1]
    same_code = Wire("small", tables)
    assert (await stub.register_trial(Wire("full").request("full:0"))).success
    answer = await stub.register_trial(same_code.request("small:0", code=False))
    assert answer.success, answer.error
    assert await _tables(stub, "small:0") == tables
    assert await _tables(stub, "full:0") == initial_tables()


@pytest.mark.parametrize("missing", ["code", "tables"])
async def test_an_unknown_part_is_asked_for_and_nothing_is_left(
    stub: RunnerServiceStub, missing: str
) -> None:
    wire = Wire(f"unsent-{missing}")
    trial_id = f"unsent-{missing}:0"
    answer = await stub.register_trial(wire.request(trial_id, **{missing: False}))
    assert not answer.success
    assert answer.error_kind == RegistrationErrorKind.PART_NOT_CACHED
    assert f"send {missing}_json" in answer.error
    # Nothing was registered or kept: the same id registers at once when the part comes along.
    again = await stub.register_trial(wire.request(trial_id))
    assert again.success, again.error


async def test_a_restarted_runner_asks_for_the_parts_again(
    runner: RunnerHandle, stub: RunnerServiceStub
) -> None:
    wire = Wire("restarted")
    assert (await stub.register_trial(wire.request("restarted:0"))).success
    runner.servicer.tasks = TaskWire()  # forgotten, as by a restart
    answer = await stub.register_trial(Wire("other").request("other:0", code=False, tables=False))
    assert answer.error_kind == RegistrationErrorKind.PART_NOT_CACHED
    answer = await stub.register_trial(wire.request("restarted:1", task=False, code=False, tables=False))
    assert answer.error_kind == RegistrationErrorKind.TASK_NOT_CACHED


def _refusals() -> list[tuple[str, dict[str, Any], str]]:
    wire = Wire("bad")
    with_code = json.loads(wire.task_json) | {"tool_code": json.loads(wire.code_json)}
    with_tables = json.loads(wire.task_json)
    with_tables["initial_state"]["tables"] = json.loads(wire.tables_json)
    return [
        ("wrong-code-digest", {"code_digest": "0" * 64}, "code_digest 000"),
        ("wrong-tables-digest", {"tables_digest": "1" * 64}, "is not the SHA-256 of tables_json"),
        ("code-without-digest", {"code_digest": ""}, "code_json is given without code_digest"),
        ("tables-without-digest", {"tables_digest": ""}, "tables_json is given without tables_digest"),
        ("parts-without-task-digest", {"task_digest": "", "task_json": ""}, "without task_digest"),
        ("code-in-task", {"task_json": json.dumps(with_code)}, "tool_code travels in code_json only"),
        (
            "tables-in-task",
            {"task_json": json.dumps(with_tables)},
            "initial_state.tables travels in tables_json only",
        ),
        ("tables-not-an-object", {"tables_json": "[]"}, "tables_json: it must be a JSON object"),
        ("code-not-a-bundle", {"code_json": '{"files": {}, "path": "/x"}'}, "invalid code_json"),
        ("code-not-json", {"code_json": '{"files": NaN}'}, "code_json is not valid JSON"),
    ]


@pytest.mark.parametrize(("case", "change", "expected"), _refusals(), ids=[row[0] for row in _refusals()])
async def test_parts_that_disagree_are_invalid_specs(
    stub: RunnerServiceStub, case: str, change: dict[str, Any], expected: str
) -> None:
    request = Wire("bad").request(f"bad-{case}:0")
    for name, value in change.items():
        setattr(request, name, value)
        digest_field = name.replace("_json", "_digest")
        if name.endswith("_json") and name not in ("task_json",) and digest_field not in change:
            setattr(request, digest_field, _digest(value))
        if name == "task_json" and value and "task_digest" not in change:
            request.task_digest = _digest(value)
    answer = await stub.register_trial(request)
    assert not answer.success
    assert answer.error_kind == RegistrationErrorKind.INVALID_SPEC, answer.error
    assert expected in answer.error


def test_a_kept_part_is_parsed_and_hashed_once_for_every_task() -> None:
    wire, cache = TaskWire(), TaskCache()
    first, second = Wire("one"), Wire("two", system_prompt="two")

    def decode(sent: Wire, trial_id: str) -> TrialSpec:
        request = sent.request(trial_id, code=True, tables=True)
        return wire.decode(
            request.trial_spec_json,
            request.task_json,
            request.task_digest,
            TaskParts(request.code_json, request.code_digest, request.tables_json, request.tables_digest),
        )

    one_spec = decode(first, "one:0")
    one = cache.known(one_spec.task)
    assert one.full_hash is None  # nothing hashed yet: the store hashes the first trial's state
    cache.settle(one_spec.task, one, "f" * 64)
    # Sent again by a registration that raced the first: the kept part is used, its text not read.
    two_spec = decode(second, "two:0")
    two = cache.known(two_spec.task)
    assert two_spec.task.tool_code is one_spec.task.tool_code
    assert two.initial is one.initial
    assert two.full_hash == "f" * 64  # known from the first task: the second task's state is not hashed
    assert two_spec.task.initial_state.tables == initial_tables()
    # The same digest again is the same task object: what the runner learnt about it is found by it.
    assert decode(first, "one:1").task is one_spec.task


async def test_the_code_part_is_written_out_and_digested_once(
    stub: RunnerServiceStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads: list[object] = []

    def counting(code: Any, work_dir: Any) -> Any:
        loads.append(code)
        return load_code(code, work_dir)

    monkeypatch.setattr("tolokaforge.runner.lifecycle.registry.load_code", counting)
    assert (await stub.register_trial(Wire("c1").request("c1:0"))).success
    assert (await stub.register_trial(Wire("c2", system_prompt="c2").request("c2:0", code=False))).success
    assert (await stub.register_trial(Wire("c3", system_prompt="c3").request("c3:0", code=False))).success
    assert len(loads) == 1
