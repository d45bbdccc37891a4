"""A task's wire JSON: the same task as a plain dump, with the pack's shared code bundle serialised once;
with parts, the task, its code and its tables apart, which together make that dump."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from tolokaforge.core.models import TaskDescription, ToolCode
from tolokaforge.host.packs import load_pack
from tolokaforge.host.runner.task_wire import TaskWire, TaskWires

RETAIL = Path(__file__).parents[3] / "examples" / "packs" / "retail"


def test_every_task_travels_as_its_own_plain_dump_says() -> None:
    pack = load_pack(RETAIL)
    wires = TaskWires()
    for loaded in pack.tasks:
        task = loaded.task
        wire = wires.of(task)
        assert wire.code is None and wire.tables is None
        assert json.loads(wire.task.json) == json.loads(task.model_dump_json(exclude_unset=True))
        assert TaskDescription.model_validate_json(wire.task.json) == TaskDescription.model_validate_json(
            task.model_dump_json(exclude_unset=True)
        )
        assert wire.task.digest == hashlib.sha256(wire.task.json.encode("utf-8")).hexdigest()
        assert wires.of(task) is wire  # made once per task


def test_the_code_bundle_shared_by_a_packs_tasks_is_serialised_once(monkeypatch: pytest.MonkeyPatch) -> None:
    pack = load_pack(RETAIL)
    first, second = pack.tasks[0].task, pack.tasks[1].task
    assert first.tool_code is not None
    assert second.tool_code is first.tool_code  # what the saving relies on: one bundle object per pack
    dumped: list[ToolCode] = []
    original = ToolCode.model_dump_json

    def counting(self: ToolCode, **options: Any) -> str:
        dumped.append(self)
        return original(self, **options)

    monkeypatch.setattr(ToolCode, "model_dump_json", counting)
    wires = TaskWires()
    wires.of(first)
    wire = wires.of(second)
    assert dumped == [first.tool_code]  # once, for both tasks
    assert json.loads(wire.task.json)["tool_code"] == json.loads(
        original(first.tool_code, exclude_unset=True)
    )


def test_a_task_without_tool_code_or_with_a_code_path_is_dumped_as_it_is() -> None:
    base = {"task_id": "t", "name": "n", "initial_user_message": "hi"}
    plain = TaskDescription.model_validate(base)
    with_path = TaskDescription.model_validate({**base, "tool_code": {"path": "/srv/code"}})
    wires = TaskWires()
    assert wires.of(plain).task.json == plain.model_dump_json(exclude_unset=True)
    assert json.loads(wires.of(with_path).task.json) == json.loads(
        with_path.model_dump_json(exclude_unset=True)
    )
    parted = TaskWires(parts=True)
    assert parted.of(plain).keys == (parted.of(plain).task.digest,)  # nothing to send apart
    assert parted.of(plain).task.json == plain.model_dump_json(exclude_unset=True)
    code_only = parted.of(with_path)
    assert code_only.tables is None and code_only.code is not None
    assert json.loads(code_only.code.json) == {"path": "/srv/code"}


def _whole(wire: TaskWire) -> dict[str, Any]:
    """The task a runner taking parts puts together from a wire."""
    task = json.loads(wire.task.json)
    if wire.code is not None:
        assert "tool_code" not in task
        task["tool_code"] = json.loads(wire.code.json)
    if wire.tables is not None:
        assert "tables" not in task["initial_state"]
        task["initial_state"]["tables"] = json.loads(wire.tables.json)
    return task


def test_with_parts_every_task_travels_as_task_code_and_tables_that_make_its_plain_dump() -> None:
    pack = load_pack(RETAIL)
    wires = TaskWires(parts=True)
    made = [wires.of(loaded.task) for loaded in pack.tasks]
    for loaded, wire in zip(pack.tasks, made, strict=True):
        assert _whole(wire) == json.loads(loaded.task.model_dump_json(exclude_unset=True))
        assert wire.code is not None and wire.tables is not None
        assert wire.keys == (wire.task_key, wire.code.digest, wire.tables.digest)
        for part in (wire.task, wire.code, wire.tables):
            assert part.digest == hashlib.sha256(part.json.encode("utf-8")).hexdigest()
        assert wires.of(loaded.task) is wire
    # The pack's tasks share one code bundle and (retail's) one database: each part is one key for all.
    assert len({wire.code.digest for wire in made if wire.code}) == 1
    assert len({wire.tables.digest for wire in made if wire.tables}) == 1
    assert len({wire.task_key for wire in made}) == len(made)
    assert all(wire.code is made[0].code for wire in made)  # the bundle's part is made once


def test_tables_orjson_refuses_travel_as_the_plain_dump_has_them() -> None:
    # A keyed table read from YAML may have integer keys: JSON has only string keys.
    tables = {"items": {1: {"name": "a"}, 2: {"name": "b"}}, "big": [{"n": 2**70}]}
    task = TaskDescription.model_validate(
        {"task_id": "t", "name": "n", "initial_user_message": "hi", "initial_state": {"tables": tables}}
    )
    wire = TaskWires(parts=True).of(task)
    assert wire.tables is not None
    assert _whole(wire) == json.loads(task.model_dump_json(exclude_unset=True))
