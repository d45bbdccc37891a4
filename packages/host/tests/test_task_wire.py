"""A task's wire JSON: the same task as a plain dump, with the pack's shared code bundle serialised once."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from tolokaforge.core.models import TaskDescription, ToolCode
from tolokaforge.host.packs import load_pack
from tolokaforge.host.trial_spec import TaskWires

RETAIL = Path(__file__).parents[3] / "examples" / "packs" / "retail"


def test_every_task_travels_as_its_own_plain_dump_says() -> None:
    pack = load_pack(RETAIL)
    wires = TaskWires()
    for loaded in pack.tasks:
        task = loaded.task
        wire = wires.of(task)
        assert json.loads(wire.json) == json.loads(task.model_dump_json(exclude_unset=True))
        assert TaskDescription.model_validate_json(wire.json) == TaskDescription.model_validate_json(
            task.model_dump_json(exclude_unset=True)
        )
        assert wire.digest == hashlib.sha256(wire.json.encode("utf-8")).hexdigest()
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
    assert json.loads(wire.json)["tool_code"] == json.loads(original(first.tool_code, exclude_unset=True))


def test_a_task_without_tool_code_or_with_a_code_path_is_dumped_as_it_is() -> None:
    base = {"task_id": "t", "name": "n", "initial_user_message": "hi"}
    plain = TaskDescription.model_validate(base)
    with_path = TaskDescription.model_validate({**base, "tool_code": {"path": "/srv/code"}})
    wires = TaskWires()
    assert wires.of(plain).json == plain.model_dump_json(exclude_unset=True)
    assert json.loads(wires.of(with_path).json) == json.loads(with_path.model_dump_json(exclude_unset=True))
