"""The pack loader on both example packs and on broken copies of them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from tolokaforge.host.cli import cli
from tolokaforge.host.errors import PackLoadError
from tolokaforge.host.packs import inspect_pack, load_pack


def test_retail_pack_loads_every_task_with_its_tools_and_grading(packs_dir: Path) -> None:
    pack = load_pack(packs_dir / "retail")
    assert (pack.name, len(pack.tasks)) == ("retail", 29)
    task = pack.task("write_cancel_processing_order").task
    assert task.max_turns == 20  # from pack.yaml defaults
    assert task.system_prompt.startswith("#") and "policy" in task.system_prompt.lower()
    assert len(task.agent_tools) == 19 and task.user_tools == []
    cancel = next(tool for tool in task.agent_tools if tool.name == "cancel_order")
    assert (cancel.source.module_path, cancel.source.class_name, cancel.category) == (
        "tools.write",
        "CancelOrder",
        "write",
    )
    assert cancel.parameters["required"] == ["order_id", "reason"]
    state_checks = task.grading.state_checks
    assert state_checks is not None and state_checks.hash_enabled and state_checks.hash_weight == 0.5
    assert [a.tool_name for a in state_checks.golden_actions] == [
        "get_customer_details",
        "get_order_details",
        "cancel_order",
    ]
    assert state_checks.golden_actions[2].arguments == {"order_id": "O-50035", "reason": "found_better_price"}
    assert task.grading.combine_method == "all" and task.grading.weights == {
        "state_checks": 1.0,
        "transcript_rules": 1.0,
    }
    assert task.golden_response is not None and "168.00" in task.golden_response
    assert len(task.initial_state.tables["orders"]) == 220
    assert task.tool_code is not None and task.tool_code.files is not None
    assert "tools/write.py" in task.tool_code.files and "tools/__init__.py" in task.tool_code.files


def test_dual_control_pack_picks_user_tools_and_relocates_custom_checks(packs_dir: Path) -> None:
    pack = load_pack(packs_dir / "dual_control" / "tasks")  # the tasks/ folder works as --pack too
    assert pack.root == packs_dir / "dual_control"
    task = pack.task("dc_airplane_mode_no_service").task
    assert [t.name for t in task.user_tools] == ["check_status_bar", "toggle_airplane_mode", "restart_device"]
    assert [t.name for t in task.agent_tools][:2] == ["get_line_details", "get_network_status"]
    assert task.grading.custom_checks is not None
    assert task.grading.custom_checks.file == "tasks/dc_airplane_mode_no_service/checks.py"
    assert task.tool_code is not None and task.tool_code.files is not None
    assert task.grading.custom_checks.file in task.tool_code.files
    assert task.initial_state.initialization_actions[0].env_type == "user"
    assert task.user_simulator is not None and len(task.user_simulator.scripted_flow) == 2


def test_two_packs_with_a_tools_package_do_not_share_modules(packs_dir: Path) -> None:
    retail = load_pack(packs_dir / "retail")
    dual = load_pack(packs_dir / "dual_control")
    assert {t.name for t in retail.tasks[0].task.agent_tools}.isdisjoint(
        {t.name for t in dual.tasks[0].task.agent_tools}
    )


def _edit(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def test_unknown_key_is_refused_naming_file_and_key(pack_copy: Callable[[str], Path]) -> None:
    root = pack_copy("retail")
    grading = root / "tasks" / "lookup_order_tracking" / "grading.yaml"
    _edit(grading, lambda d: d["transcript_rules"].__setitem__("must_contian", ["x"]))
    with pytest.raises(PackLoadError) as caught:
        load_pack(root)
    (problem,) = caught.value.problems
    assert problem.file.as_posix().endswith("tasks/lookup_order_tracking/grading.yaml")
    assert problem.key == "transcript_rules.must_contian"
    assert "unknown key 'must_contian'" in str(problem)


def test_unknown_key_from_pack_defaults_is_reported_in_pack_yaml(pack_copy: Callable[[str], Path]) -> None:
    root = pack_copy("dual_control")
    _edit(root / "pack.yaml", lambda d: d["defaults"].__setitem__("max_turn", 3))
    with pytest.raises(PackLoadError) as caught:
        load_pack(root)
    assert {p.file.name for p in caught.value.problems} == {"pack.yaml"}
    assert {p.key for p in caught.value.problems} == {"defaults.max_turn"}
    assert len(caught.value.problems) == 5  # once per task it was merged into


def test_duplicate_task_id_is_an_error(pack_copy: Callable[[str], Path]) -> None:
    root = pack_copy("dual_control")
    _edit(
        root / "tasks" / "dc_roaming_abroad" / "task.yaml",
        lambda d: d.__setitem__("task_id", "dc_data_addon_purchase"),
    )
    with pytest.raises(PackLoadError) as caught:
        load_pack(root)
    (problem,) = caught.value.problems
    assert problem.key == "task_id" and "dc_data_addon_purchase" in problem.message
    assert "also the task_id of" in problem.message


def test_missing_referenced_files_are_named(pack_copy: Callable[[str], Path]) -> None:
    root = pack_copy("dual_control")
    (root / "tasks" / "dc_roaming_abroad" / "checks.py").unlink()
    _edit(
        root / "tasks" / "dc_data_addon_purchase" / "task.yaml",
        lambda d: d["initial_state"].__setitem__("json_db", "data/nope.json"),
    )
    with pytest.raises(PackLoadError) as caught:
        load_pack(root)
    found = {(p.file.name, p.key): p.message for p in caught.value.problems}
    assert "not found" in found[("grading.yaml", "custom_checks.file")]
    assert "'data/nope.json' not found" in found[("task.yaml", "initial_state.json_db")]


def test_validate_reports_every_problem_at_once(pack_copy: Callable[[str], Path]) -> None:
    root = pack_copy("dual_control")
    _edit(
        root / "tasks" / "dc_roaming_abroad" / "task.yaml",
        lambda d: d["tools"]["agent"]["enabled"].append("no_such_tool"),
    )
    _edit(
        root / "tasks" / "dc_refuse_sim_swap_wrong_pin" / "grading.yaml",
        lambda d: d["combine"].__setitem__("method", "mean"),
    )
    result = CliRunner().invoke(cli, ["validate", "--pack", str(root)])
    assert result.exit_code == 1
    assert "dc_roaming_abroad/task.yaml: tools.agent.enabled[4]: no tool 'no_such_tool'" in result.output
    assert "dc_refuse_sim_swap_wrong_pin/grading.yaml: combine.method:" in result.output
    assert "'mean'" in result.output
    assert "2 problem(s)" in result.output


def test_validate_reports_trace_check_errors_naming_the_constraint(pack_copy: Callable[[str], Path]) -> None:
    root = pack_copy("retail")
    tasks = root / "tasks"

    def gate_with_weight(grading: dict[str, Any]) -> None:
        grading["trace_checks"]["constraints"][0]["weight"] = 2.0

    def typo_in_tool(grading: dict[str, Any]) -> None:
        before = grading["trace_checks"]["constraints"][0]["require"]["before"]
        before["right"]["match"]["tool"] = {"equals": "cancel_ordr"}

    def single_route(grading: dict[str, Any]) -> None:
        grading["trace_checks"]["alternatives"].pop()

    _edit(tasks / "trace_gate_final_sale_never_filed" / "grading.yaml", gate_with_weight)
    _edit(tasks / "trace_ordering_cancel_after_lookup" / "grading.yaml", typo_in_tool)
    _edit(tasks / "trace_routes_identify_then_pay" / "grading.yaml", single_route)
    result = CliRunner().invoke(cli, ["validate", "--pack", str(root)])
    assert result.exit_code == 1, result.output
    output = " ".join(result.output.split())
    assert "trace_checks.no_write_attempted: a gate carries no weight" in output
    assert (
        "trace_checks.order_read_before_cancel: matches tool 'cancel_ordr', which is not one of the task's tools"
        in output
    )
    assert "trace_checks.alternatives declares one route" in output
    assert "3 problem(s)" in output


def test_validate_accepts_the_example_packs(packs_dir: Path) -> None:
    result = CliRunner().invoke(cli, ["validate", "--pack", str(packs_dir / "retail")])
    assert result.exit_code == 0 and "retail: 29 tasks, 19 tools: OK" in result.output


def test_inspect_pack_loads_the_good_tasks_and_reports_problems_per_task(
    pack_copy: Callable[[str], Path],
) -> None:
    root = pack_copy("retail")
    _edit(
        root / "tasks" / "lookup_order_tracking" / "grading.yaml",
        lambda d: d["transcript_rules"].__setitem__("must_contian", ["x"]),
    )
    _edit(
        root / "tasks" / "lookup_refund_quote" / "grading.yaml",
        lambda d: d["state_checks"]["hash"]["golden_actions"][0].__setitem__("name", "no_such_tool"),
    )
    report = inspect_pack(root)
    assert len(report.pack.tasks) == 27 and report.pack_problems == ()
    broken = {task.task_id: [p.key for p in task.problems] for task in report.broken}
    assert broken == {
        "lookup_order_tracking": ["transcript_rules.must_contian"],
        "lookup_refund_quote": ["state_checks.hash.golden_actions[0].name"],
    }
    # Golden names left to a caller that checks them against a runner: that task loads.
    unchecked = inspect_pack(root, check_golden_names=False)
    assert [task.task_id for task in unchecked.broken] == ["lookup_order_tracking"]
    assert len(unchecked.pack.tasks) == 28
    with pytest.raises(PackLoadError) as caught:
        load_pack(root)
    assert caught.value.problems == report.problems


def test_inspect_pack_reports_a_broken_tool_module_on_every_task_using_it(
    pack_copy: Callable[[str], Path],
) -> None:
    root = pack_copy("dual_control")
    (root / "tools" / "__init__.py").write_text("raise RuntimeError('boom')\n")
    report = inspect_pack(root)
    assert report.pack.tasks == ()
    assert len(report.broken) == 5
    assert all("RuntimeError: boom" in task.problems[0].message for task in report.broken)
    with pytest.raises(PackLoadError) as caught:
        load_pack(root)
    assert len(caught.value.problems) == 1  # load_pack names it once
