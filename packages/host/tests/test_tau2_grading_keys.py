"""The τ²-style grading keys in grading.yaml: loaded, checked, graded by the runner, written to grade.yaml."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tolokaforge.host.agents import GoldenAgentFactory
from tolokaforge.host.packs import inspect_pack, load_pack
from tolokaforge.host.run.schedule import RunSettings, run_pack
from tolokaforge.host.users.router import UserRouter

TASK = "dc_airplane_mode_no_service"


def _edit(root: Path, change: Callable[[dict[str, Any]], None]) -> None:
    path = root / "tasks" / TASK / "grading.yaml"
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def _tau2_keys(grading: dict[str, Any]) -> None:
    grading["combine"]["weights"].update(
        {"tau2_actions": 1.0, "tau2_communicate": 1.0, "env_assertions": 1.0}
    )
    grading["tau2_actions"] = {
        "actions": [
            {"action_id": "diagnose", "name": "get_network_status", "arguments": {"line_id": "L-1003"}}
        ]
    }
    grading["tau2_communicate"] = {"info": ["airplane mode"]}
    grading["env_assertions"] = {"assertions": []}
    grading["zero_unless_ended_by"] = ["agent_done", "user_stop"]
    hash_block = grading["state_checks"]["hash"]
    hash_block["golden_errors"] = "keep"
    hash_block["golden_actions"].append(
        {
            "name": "toggle_airplane_mode",
            "kwargs": {"line_id": "L-1003", "enabled": False},
            "executor": "user",
        }
    )


def test_the_keys_load_into_the_grading_config(pack_copy: Callable[[str], Path]) -> None:
    root = pack_copy("dual_control")
    _edit(root, _tau2_keys)
    grading = load_pack(root).task(TASK).task.grading
    assert grading.tau2_actions is not None and grading.tau2_actions.actions[0].action_id == "diagnose"
    assert grading.tau2_communicate is not None and grading.tau2_communicate.info == ["airplane mode"]
    assert grading.env_assertions is not None and grading.env_assertions.assertions == []
    assert grading.zero_unless_ended_by == ["agent_done", "user_stop"]
    state = grading.state_checks
    assert state is not None and state.golden_errors == "keep"
    assert [(a.tool_name, a.executor) for a in state.golden_actions][-1] == ("toggle_airplane_mode", "user")


def test_a_user_side_golden_action_is_checked_among_the_user_tools(pack_copy: Callable[[str], Path]) -> None:
    root = pack_copy("dual_control")

    def misplaced(grading: dict[str, Any]) -> None:
        actions = grading["state_checks"]["hash"]["golden_actions"]
        actions.append({"name": "toggle_airplane_mode"})  # a user tool, written as the agent's
        actions.append({"name": "get_line_details", "executor": "user"})  # an agent tool, as the user's
        grading["zero_unless_ended_by"] = ["agent_stop"]  # τ²'s name, not ours

    _edit(root, misplaced)
    broken = {task.task_id: task.problems for task in inspect_pack(root).broken}
    problems = {problem.key: problem.message for problem in broken[TASK]}
    assert (
        "'toggle_airplane_mode' is not one of the task's agent tools"
        in problems["state_checks.hash.golden_actions[2].name"]
    )
    assert (
        "'get_line_details' is not one of the task's user tools"
        in problems["state_checks.hash.golden_actions[3].name"]
    )
    assert any("names no termination reason: 'agent_stop'" in message for message in problems.values())


async def test_the_golden_run_grades_them_and_writes_them(
    pack_copy: Callable[[str], Path], tmp_path: Path
) -> None:
    root = pack_copy("dual_control")

    def keys(grading: dict[str, Any]) -> None:
        _tau2_keys(grading)
        grading["state_checks"]["hash"][
            "golden_actions"
        ].pop()  # the golden agent plays the agent's side only

    _edit(root, keys)
    out = tmp_path / "out"
    await run_pack(
        load_pack(root), GoldenAgentFactory(), UserRouter(), RunSettings(output=out, task_ids=(TASK,))
    )
    grade = yaml.safe_load((out / "trials" / TASK / "0" / "grade.yaml").read_text())
    assert grade["binary_pass"] and grade["score"] == 1.0, grade["reasons"]
    components = grade["components"]
    assert (components["tau2_actions"], components["tau2_communicate"], components["env_assertions"]) == (
        1.0,
        1.0,
        1.0,
    )
    assert grade["unscored"] == []
    items = {(row["component"], row["label"]): row for row in grade["component_items"]}
    assert set(items) == {("tau2_actions", "diagnose"), ("tau2_communicate", "airplane mode")}
    assert (
        items[("tau2_actions", "diagnose")]["met"]
        and items[("tau2_actions", "diagnose")]["details"]["requestor"] == "assistant"
    )
    summary = yaml.safe_load((out / "summary.yaml").read_text())
    assert summary["components"]["tau2_actions"] == {"evaluated_in": 1, "mean": 1.0}
