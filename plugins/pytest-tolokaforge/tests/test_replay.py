"""What the golden path is judged on: text rules need a golden_response; an LLM judge is mock-judged."""

from __future__ import annotations

from pathlib import Path

from pytest_tolokaforge.replay import judged_task
from tolokaforge.host.packs import load_pack


def test_a_task_with_a_golden_response_is_judged_as_authored(packs_dir: Path) -> None:
    task = load_pack(packs_dir / "retail").task("lookup_product_availability").task
    assert judged_task(task) == (task, [])


def test_without_golden_response_text_rules_are_set_aside_and_named(packs_dir: Path) -> None:
    task = load_pack(packs_dir / "retail").task("lookup_product_availability").task
    bare = task.model_copy(update={"golden_response": None})
    judged, notes = judged_task(bare)
    assert notes == ["not judged (the task has no golden_response): must_contain, communicate_info"]
    # Only text rules were configured, so the component and its weight go; state checks stay.
    assert judged.grading.transcript_rules is None
    assert judged.grading.weights == {"state_checks": 1.0}
    assert judged.grading.state_checks == task.grading.state_checks


def test_without_golden_response_rules_about_tool_calls_stay(packs_dir: Path) -> None:
    task = load_pack(packs_dir / "retail").task("write_ticket_overdue_shipment").task
    judged, notes = judged_task(task.model_copy(update={"golden_response": None}))
    assert notes == ["not judged (the task has no golden_response): must_contain, disallow_regex"]
    rules = judged.grading.transcript_rules
    assert rules is not None and [a.action_id for a in rules.required_actions] == ["ticket"]
    assert rules.must_contain == [] and rules.disallow_regex == []
    assert judged.grading.weights == task.grading.weights


def test_an_llm_judge_is_kept_for_the_mock_judge_and_noted(packs_dir: Path) -> None:
    task = load_pack(packs_dir / "dual_control").task("dc_data_addon_judged").task
    assert task.grading.llm_judge is not None
    judged, notes = judged_task(task)
    assert notes == [
        "mock-judged: llm_judge (by tolokaforge-mock-judge: every criterion met, no LLM consulted)"
    ]
    assert judged.grading == task.grading
