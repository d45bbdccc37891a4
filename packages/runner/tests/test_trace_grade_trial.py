"""Trace checks end to end: RegisterTrial, ExecuteTool and GradeTrial on a real runner on 127.0.0.1.

The proto fields are read off the wire: ``components.trace_checks`` with explicit presence, one
``TraceConstraintResult`` per constraint, and ``trace_checks_summary`` as a message.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tolokaforge.contracts.runner import Grade, RegisterTrialRequest, RunnerServiceStub

SpecFactory = Callable[..., dict[str, Any]]
RequestFor = Callable[..., RegisterTrialRequest]

ORDER_FIRST = {
    "id": "order_read_first",
    "description": "the order is read before its status is set",
    "require": {
        "before": {
            "left": {"quantifier": "first", "match": {"kind": "tool_call", "tool": {"equals": "get_order"}}},
            "right": {
                "quantifier": "first",
                "match": {"kind": "tool_call", "tool": {"equals": "set_status"}},
            },
        }
    },
}
NO_EXPLOSION = {
    "id": "never_explode",
    "description": "the agent never calls explode",
    "severity": "gate",
    "require": {"absent": {"match": {"kind": "tool_call", "tool": {"equals": "explode"}}}},
}
PAID_OK = {
    "id": "paid_successfully",
    "description": "a set_status to paid succeeded",
    "severity": "gate",
    "require": {
        "present": {
            "match": {
                "kind": "tool_call",
                "tool": {"equals": "set_status"},
                "args": {"status": {"equals": "paid"}},
                "status": {"equals": "success"},
            }
        }
    },
}


def trace_grading(trace_checks: dict[str, Any], *, threshold: float = 1.0) -> dict[str, Any]:
    return {
        "combine_method": "weighted",
        "weights": {"trace_checks": 1.0},
        "pass_threshold": threshold,
        "trace_checks": trace_checks,
    }


@pytest.fixture
def register(
    stub: RunnerServiceStub, spec_factory: SpecFactory, request_for: RequestFor
) -> Callable[..., Any]:
    async def _register(trial_id: str, trace_checks: dict[str, Any], **grading: Any) -> None:
        spec = spec_factory(trial_id, grading=trace_grading(trace_checks, **grading))
        response = await stub.register_trial(request_for(spec))
        assert response.success, response.error

    return _register


def trace_score(grade: Grade) -> float | None:
    assert grade.components is not None
    return grade.components.trace_checks


def _on_the_wire(grade: Grade) -> Grade:
    # What a host decodes: presence of the optional component and of the summary must survive.
    return Grade.parse(bytes(grade))


async def test_satisfied_constraints_score_one_with_results_and_summary(register: Any, episode: Any) -> None:
    await register("t:0", {"constraints": [ORDER_FIRST, NO_EXPLOSION]})
    ep = episode("t:0")
    await ep.call("get_order", {"order_id": "O-1"}, "c1")
    await ep.call("set_status", {"order_id": "O-1", "status": "paid"}, "c2")
    ep.say("Order O-1 is paid.")
    response = await ep.grade()
    assert response.success, response.error
    grade = _on_the_wire(response.grade)
    assert (grade.binary_pass, grade.score) == (True, 1.0)
    assert trace_score(grade) == 1.0
    rows = {row.id: row for row in grade.trace_checks}
    assert (rows["order_read_first"].kind, rows["order_read_first"].severity) == ("before", "scored")
    assert rows["order_read_first"].passed and not rows["order_read_first"].undecided
    assert rows["order_read_first"].weight == 1.0 and rows["order_read_first"].message == ""
    # Positions index the trace view: user 0, assistant 1, call 2, result 3, assistant 4, call 5.
    assert list(rows["order_read_first"].matched_positions) == [2, 5]
    assert (rows["never_explode"].severity, rows["never_explode"].weight) == ("gate", 0.0)
    summary = grade.trace_checks_summary
    assert summary is not None
    assert (
        summary.gate_failed,
        list(summary.failed_gate_ids),
        summary.winning_path,
        list(summary.paths),
    ) == (
        False,
        [],
        "",
        [],
    )
    assert grade.reasons.startswith("Trace checks: score=1")


async def test_a_tripped_gate_fails_the_trial_whatever_the_fold_says(register: Any, episode: Any) -> None:
    # pass_threshold 0.0: the fold alone would pass a 0.0 component; the gate fails the trial anyway.
    await register("t:0", {"constraints": [ORDER_FIRST, NO_EXPLOSION]}, threshold=0.0)
    ep = episode("t:0")
    await ep.call("get_order", {"order_id": "O-1"}, "c1")
    await ep.call("explode", {}, "c2")
    await ep.call("set_status", {"order_id": "O-1", "status": "paid"}, "c3")
    response = await ep.grade()
    assert response.success, response.error
    grade = _on_the_wire(response.grade)
    assert grade.binary_pass is False
    assert trace_score(grade) == 0.0  # present and a real zero, not "not evaluated"
    assert grade.trace_checks_summary is not None and grade.trace_checks_summary.gate_failed
    assert list(grade.trace_checks_summary.failed_gate_ids) == ["never_explode"]
    assert "FAILED trace gates: never_explode" in grade.reasons
    assert "Trace check never_explode: absent: tool_call explode occurred at" in grade.reasons


async def test_a_declared_call_that_never_ran_leaves_the_gate_undecided(register: Any, episode: Any) -> None:
    await register("t:0", {"constraints": [PAID_OK]}, threshold=0.0)
    ep = episode("t:0")
    await ep.call("get_order", {"order_id": "O-1"}, "c1")
    # The trial ended before the declared call ran: no record, no tool message.
    arguments = json.dumps({"order_id": "O-1", "status": "paid"})
    ep.messages.append(
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c2", "function": {"name": "set_status", "arguments": arguments}}],
        }
    )
    response = await ep.grade(termination_reason="max_turns")
    assert response.success, response.error
    grade = _on_the_wire(response.grade)
    row = grade.trace_checks[0]
    assert (row.passed, row.undecided) == (False, True)
    assert "never recorded" in row.message
    assert grade.binary_pass is False
    assert grade.trace_checks_summary is not None and grade.trace_checks_summary.gate_failed


async def test_routes_report_the_winner_and_every_route_score(register: Any, episode: Any) -> None:
    routes = {
        "constraints": [NO_EXPLOSION],
        "alternatives": [
            {
                "id": "paid",
                "description": "the order is paid",
                "constraints": [{**PAID_OK, "severity": "scored"}],
            },
            {
                "id": "noted",
                "description": "a note explains why it was not paid",
                "constraints": [
                    {
                        "id": "note_written",
                        "description": "a note is added",
                        "require": {
                            "present": {"match": {"kind": "tool_call", "tool": {"equals": "add_note"}}}
                        },
                    }
                ],
            },
        ],
    }
    await register("t:0", routes)
    ep = episode("t:0")
    await ep.call("add_note", {"text": "customer changed their mind"}, "c1")
    response = await ep.grade()
    assert response.success, response.error
    grade = _on_the_wire(response.grade)
    summary = grade.trace_checks_summary
    assert summary is not None and summary.winning_path == "noted"
    assert [(p.id, p.score, p.gate_failed) for p in summary.paths] == [
        ("paid", 0.0, False),
        ("noted", 1.0, False),
    ]
    assert trace_score(grade) == 1.0 and grade.binary_pass
    assert {row.id for row in grade.trace_checks} == {"never_explode", "paid_successfully", "note_written"}


async def test_no_events_leaves_the_component_unscored_with_the_skip(register: Any, episode: Any) -> None:
    await register("t:0", {"constraints": [ORDER_FIRST]})
    response = await episode("t:0").grade(transcript=False)
    assert response.success, response.error
    grade = _on_the_wire(response.grade)
    assert trace_score(grade) is None
    assert list(grade.trace_checks) == [] and grade.trace_checks_summary is None
    assert (
        "skipped: the trial's timeline carries no events (trace_checks.constraints.before)" in grade.reasons
    )
    assert grade.binary_pass is False  # weighted entirely on trace_checks: nothing scored fails


async def test_an_unbound_binding_skips_the_nested_kinds_in_the_ledger(register: Any, episode: Any) -> None:
    bound = {
        "id": "every_paid_order_was_read",
        "description": "each order set to paid was read first",
        "bind": {
            "match": {"kind": "tool_call", "tool": {"equals": "set_status"}},
            "values": {"order": {"field": "args.order_id"}},
            "on_unbound": "pass",
        },
        "require": {
            "negate": {
                "absent": {
                    "match": {
                        "kind": "tool_call",
                        "tool": {"equals": "get_order"},
                        "args": {"order_id": {"equals_binding": "order"}},
                    }
                }
            }
        },
    }
    await register("t:0", {"constraints": [bound]})
    ep = episode("t:0")
    await ep.call("get_order", {"order_id": "O-1"}, "c1")
    response = await ep.grade()
    assert response.success, response.error
    grade = response.grade
    assert grade.trace_checks[0].passed and trace_score(grade) == 1.0
    assert "skipped: the binding yielded no assignment (trace_checks.constraints.absent)" in grade.reasons


async def test_register_refuses_a_constraint_on_an_unknown_tool(
    stub: RunnerServiceStub, spec_factory: SpecFactory, request_for: RequestFor
) -> None:
    typo = {**ORDER_FIRST, "id": "typo"}
    typo["require"] = {"present": {"match": {"kind": "tool_call", "tool": {"equals": "get_ordr"}}}}
    spec = spec_factory("t:0", grading=trace_grading({"constraints": [typo]}))
    response = await stub.register_trial(request_for(spec))
    assert not response.success
    assert (
        "trace_checks.typo: matches tool 'get_ordr', which is not one of the task's tools" in response.error
    )
