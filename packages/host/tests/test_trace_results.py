"""Trace checks on the host: verdicts inline in grade.yaml, tripped gates counted, unreadable payloads refused."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from tolokaforge.contracts.runner import Grade, TraceChecksSummary, TraceConstraintResult
from tolokaforge.host.agents import ScriptedAgentFactory, load_script
from tolokaforge.host.cli.report import summary_table
from tolokaforge.host.packs import load_pack
from tolokaforge.host.results.trace_results import check_trace_payload
from tolokaforge.host.run.schedule import RunSettings, run_pack
from tolokaforge.host.users.router import UserRouter

GATE_TASK = "trace_gate_final_sale_never_filed"


def _call(name: str, **arguments: object) -> dict[str, object]:
    return {"content": "", "tool_calls": [{"name": name, "arguments": arguments}]}


async def test_grade_yaml_carries_the_verdicts_and_the_summary_counts_tripped_gates(
    packs_dir: Path, tmp_path: Path
) -> None:
    script = tmp_path / "script.yaml"
    turns = [
        _call("get_customer_details", customer_id="C-136"),
        _call("get_product_details", product_id="P-1027"),
        _call(
            "create_return",
            order_id="O-50019",
            items=[{"product_id": "P-1027", "quantity": 2}],
            reason="did_not_fit",
            refund_method="original_payment",
        ),
        {"content": "Your return is filed.", "done": True},
    ]
    script.write_text(yaml.safe_dump({"tasks": {GATE_TASK: turns}}))
    summary = await run_pack(
        load_pack(packs_dir / "retail"),
        ScriptedAgentFactory(load_script(script)),
        UserRouter(),
        RunSettings(output=tmp_path / "run", task_ids=(GATE_TASK,)),
    )
    assert summary.to_dict()["trace_gates_failed"] == 1
    screen = io.StringIO()
    Console(file=screen, width=100).print(summary_table(summary))
    assert any(
        "trace gates failed" in line and line.rstrip(" │").endswith("1")
        for line in screen.getvalue().splitlines()
    )
    grade = yaml.safe_load((tmp_path / "run" / "trials" / GATE_TASK / "0" / "grade.yaml").read_text())
    assert grade["binary_pass"] is False and grade["components"]["trace_checks"] == 0.0
    results = {row["id"]: row for row in grade["trace_check_results"]}
    assert results["no_write_attempted"]["severity"] == "gate"
    assert (
        results["no_write_attempted"]["passed"] is False
        and results["no_write_attempted"]["undecided"] is False
    )
    assert results["no_write_attempted"]["message"].startswith("absent: tool_call occurred at")
    assert results["final_sale_flag_read"]["passed"] is True
    assert grade["trace_checks_summary"] == {
        "winning_path": None,
        "gate_failed": True,
        "failed_gate_ids": ["no_write_attempted"],
        "paths": [],
    }
    written = yaml.safe_load((tmp_path / "run" / "summary.yaml").read_text())
    assert written["trace_gates_failed"] == 1 and written["per_trial"][0]["trace_gate_failed"] is True


def _row(**fields: object) -> TraceConstraintResult:
    base: dict[str, object] = {
        "id": "c",
        "kind": "present",
        "passed": True,
        "weight": 1.0,
        "severity": "scored",
    }
    base.update(fields)
    return TraceConstraintResult(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("grade", "fragment"),
    [
        (Grade(trace_checks=[_row(kind="eventually")]), "unknown kind 'eventually'"),
        (Grade(trace_checks=[_row(severity="fatal")]), "unknown severity 'fatal'"),
        (Grade(trace_checks=[_row(undecided=True)]), "passed and undecided at once"),
        (Grade(trace_checks=[_row(id="")]), "a verdict with no constraint id"),
        (
            Grade(
                trace_checks=[_row()],
                trace_checks_summary=TraceChecksSummary(gate_failed=True, failed_gate_ids=["g"]),
            ),
            "names failed gates with no verdict: g",
        ),
        (
            Grade(trace_checks=[_row()], trace_checks_summary=TraceChecksSummary(gate_failed=True)),
            "gate_failed disagrees with failed_gate_ids",
        ),
    ],
)
def test_an_unreadable_trace_payload_is_refused(grade: Grade, fragment: str) -> None:
    with pytest.raises(ValueError) as caught:
        check_trace_payload(grade)
    assert fragment in str(caught.value)


def test_a_readable_payload_passes() -> None:
    gate = _row(id="g", severity="gate", passed=False, undecided=True, weight=0.0)
    check_trace_payload(
        Grade(
            trace_checks=[_row(), gate],
            trace_checks_summary=TraceChecksSummary(gate_failed=True, failed_gate_ids=["g"]),
        )
    )
    check_trace_payload(Grade(score=1.0))  # no trace checks at all
