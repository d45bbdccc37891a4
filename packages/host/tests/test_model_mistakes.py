"""The model sees its mistakes and the trial goes on: an unknown tool, arguments that are not an object
of the tool's schema, a tool that raises. Each is answered with the runner's typed message, counted in
metrics.yaml, and a raising tool's traceback is kept in trajectory.yaml only.

Real parts throughout: the example retail pack, the embedded runner (its sandboxed worker, and the
trusted thread path), the scripted agent playing a fixed turn list.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import pytest
import yaml

from tolokaforge.host.agents import ScriptedAgentFactory, load_script
from tolokaforge.host.packs import load_pack
from tolokaforge.host.run.schedule import RunSettings, run_pack
from tolokaforge.host.users.router import UserRouter

TASK = "write_cancel_processing_order"  # initial message, then the user says "Yes, please cancel it."

MISTAKES_THEN_THE_TASK: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "refund_everything", "arguments": {"order_id": "O-50035"}}]},
    {"tool_calls": [{"name": "get_order_details", "arguments": "[\"O-50035\"]"}]},
    {"tool_calls": [{"name": "get_order_details", "arguments": {"order_id": "O-99999"}}]},
    {"tool_calls": [{"name": "get_order_details", "arguments": {"order_id": "O-50035"}}]},
    {"content": "Order O-50035 is processing. Shall I cancel it?"},
    {"tool_calls": [{"name": "cancel_order", "arguments": {"order_id": "O-50035", "reason": "found_better_price"}}]},
    {"content": "Cancelled.", "done": True},
]  # fmt: skip


@pytest.mark.parametrize("isolation", ["sandbox", "thread"])
async def test_mistakes_are_answered_counted_and_the_trial_passes(
    packs_dir: Path, tmp_path: Path, isolation: Literal["sandbox", "thread"]
) -> None:
    script = tmp_path / "turns.yaml"
    script.write_text(yaml.safe_dump(MISTAKES_THEN_THE_TASK))
    output = tmp_path / "out"
    summary = await run_pack(
        load_pack(packs_dir / "retail"),
        ScriptedAgentFactory(load_script(script)),
        UserRouter(),
        RunSettings(output=output, task_ids=(TASK,), isolation=isolation),
    )
    folder = output / "trials" / TASK / "0"
    trajectory = yaml.safe_load((folder / "trajectory.yaml").read_text())
    metrics = yaml.safe_load((folder / "metrics.yaml").read_text())
    grade = yaml.safe_load((folder / "grade.yaml").read_text())

    assert trajectory["termination_reason"] == "agent_done" and trajectory["error"] is None
    assert grade["graded"] is True and grade["binary_pass"] is True, grade["reasons"]
    assert summary.pass_rate == 1.0

    calls = trajectory["tool_calls"]
    assert [call["status"] for call in calls] == [
        "TOOL_NOT_FOUND",
        "INVALID_ARGUMENTS",
        "ERROR",
        "SUCCESS",
        "SUCCESS",
    ]
    answers = [message["content"] for message in trajectory["messages"] if message["role"] == "tool"]
    # What the model read: the runner's typed message for each mistake, naming what it can call instead.
    assert answers[0].startswith("Error: tool 'refund_everything' is not registered for executor 'agent'")
    assert "cancel_order" in answers[0]
    assert answers[1] == "Error: arguments must be a JSON object, got list"
    assert answers[2] == "Error: ValueError: Order O-99999 not found"
    assert not any("Traceback" in text for text in answers)

    # The raising tool's traceback is in its call record, down to the line that raised.
    details = calls[2]["error_details"]
    assert details["exception"] == "ValueError" and details["tool"] == "get_order_details"
    assert details["traceback"].startswith("Traceback (most recent call last):")
    assert "in get_order" in details["traceback"]
    assert details["traceback"].rstrip().endswith("ValueError: Order O-99999 not found")
    assert calls[3]["error_details"] is None

    assert metrics["tool_errors"] == 3
    assert (metrics["unknown_tool_calls"], metrics["invalid_argument_calls"]) == (1, 1)
    assert metrics["tool_calls_by_status"] == {
        "TOOL_NOT_FOUND": 1,
        "INVALID_ARGUMENTS": 1,
        "ERROR": 1,
        "SUCCESS": 2,
    }
