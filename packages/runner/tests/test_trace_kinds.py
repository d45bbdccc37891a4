"""Trace checks over real timelines: every kind satisfied, violated and undecidable; bindings; windows.

Timelines are built the way GradeTrial builds them (``build_trial_timeline`` over typed messages and
the runner's records). A call written with ``status=None`` is one the agent declared and the runner never
ran: no record and no tool message, so its outcome is unrecorded evidence.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tolokaforge.core.models import TraceChecksConfig
from tolokaforge.core.transcript import AssistantMessage, Message, ToolCall, ToolMessage, UserMessage
from tolokaforge.core.transcript.recorded import RecordedCallStatus, RecordedToolCall
from tolokaforge.core.transcript.timeline import TrialTimeline, build_trial_timeline
from tolokaforge.runner.grading.trace.events import UNRECORDED, build_trace_view
from tolokaforge.runner.grading.trace.scoring import TraceOutcome, score_trace_checks


def call(
    name: str, status: RecordedCallStatus | None = "success", output: str = "ok", **args: Any
) -> dict[str, Any]:
    return {"call": name, "status": status, "output": output, "args": args}


def timeline(*steps: str | dict[str, Any]) -> TrialTimeline:
    """``"u: text"`` / ``"a: text"`` are turns; ``call(...)`` is an assistant turn making one call."""
    messages: list[Message] = []
    records: list[RecordedToolCall] = []
    for index, step in enumerate(steps):
        if isinstance(step, str):
            role, text = step.split(": ", 1)
            messages.append(UserMessage(content=text) if role == "u" else AssistantMessage(content=text))
            continue
        call_id = f"c{index}"
        messages.append(
            AssistantMessage(content="", tool_calls=(ToolCall(call_id, step["call"], step["args"]),))
        )
        if step["status"] is not None:
            messages.append(ToolMessage(content=step["output"], tool_call_id=call_id))
            records.append(
                RecordedToolCall(
                    call_id=call_id,
                    sequence=len(records),
                    tool_name=step["call"],
                    arguments=step["args"],
                    executor="agent",
                    status=step["status"],
                    output=step["output"],
                    latency_seconds=0.01,
                    timestamp=1.0,
                )
            )
    return build_trial_timeline(messages, records)


def block(text: str) -> TraceChecksConfig:
    return TraceChecksConfig.model_validate(yaml.safe_load(text))


def one(require: str, *, extra: str = "", trail: TrialTimeline) -> tuple[bool | None, str]:
    config = block(f"constraints:\n- id: c\n  description: d\n{extra}  require: {require}\n")
    outcome = score_trace_checks(config, build_trace_view(trail), trail.has_transcript)
    verdict = outcome.outcomes[0].verdict
    return verdict.value, verdict.message


READ = "{kind: tool_call, tool: {equals: read}}"
WRITE = "{kind: tool_call, tool: {equals: write}}"
WRITE_OK = "{kind: tool_call, tool: {equals: write}, status: {equals: success}}"
READ_OK = "{kind: tool_call, tool: {equals: read}, status: {equals: success}}"


def test_trace_view_orders_calls_results_and_turns() -> None:
    trail = timeline("u: hi", call("read", id=1), "a: done", call("write", status=None, id=1))
    view = build_trace_view(trail)
    assert [(e.kind, e.turn) for e in view] == [
        ("user_message", 0),
        ("assistant_message", 0),
        ("tool_call", 0),
        ("tool_result", 0),
        ("assistant_message", 1),
        ("assistant_message", 2),
        ("tool_call", 2),
    ]
    assert view[2].status == "success" and view[2].result == "ok" and view[2].executor == "agent"
    assert view[6].status is UNRECORDED and view[6].result is UNRECORDED


@pytest.mark.parametrize(
    ("require", "steps", "expected"),
    [
        # present
        (f"{{present: {{match: {WRITE_OK}}}}}", [call("write")], True),
        (f"{{present: {{match: {WRITE_OK}}}}}", [call("read")], False),
        (f"{{present: {{match: {WRITE_OK}}}}}", [call("write", status=None)], None),
        (f"{{present: {{match: {WRITE_OK}}}}}", [call("write"), call("write", status=None)], True),
        # absent
        (f"{{absent: {{match: {WRITE_OK}}}}}", [call("read")], True),
        (f"{{absent: {{match: {WRITE_OK}}}}}", [call("write")], False),
        (f"{{absent: {{match: {WRITE_OK}}}}}", [call("write", status=None)], None),
        (f"{{absent: {{match: {WRITE}}}}}", [call("write", status=None)], False),  # attempted is attempted
        # count
        (f"{{count: {{match: {WRITE_OK}, min: 1, max: 2}}}}", [call("write"), call("write")], True),
        (f"{{count: {{match: {WRITE_OK}, max: 1}}}}", [call("write"), call("write")], False),
        (f"{{count: {{match: {WRITE_OK}, max: 1}}}}", [call("write"), call("write", status=None)], None),
        (f"{{count: {{match: {WRITE_OK}, min: 3}}}}", [call("write"), call("write", status=None)], False),
        # before (any/any, first/first, all/any)
        (f"{{before: {{left: {{quantifier: any, match: {READ}}}, right: {{quantifier: any, match: {WRITE}}}}}}}",
         [call("read"), call("write")], True),
        (f"{{before: {{left: {{quantifier: first, match: {READ}}}, right: {{quantifier: first, match: {WRITE}}}}}}}",
         [call("write"), call("read"), call("write")], False),
        (f"{{before: {{left: {{quantifier: all, match: {READ}}}, right: {{quantifier: any, match: {WRITE}}}}}}}",
         [call("read"), call("write"), call("read")], False),
        (f"{{before: {{left: {{quantifier: any, match: {READ_OK}}}, right: {{quantifier: any, match: {WRITE}}}}}}}",
         [call("read", status=None), call("write")], None),
        (f"{{before: {{left: {{quantifier: any, match: {READ_OK}}}, right: {{quantifier: any, match: {WRITE}}}}}}}",
         [call("read"), call("write"), call("read", status=None)], True),
        # immediately_before
        (f"{{immediately_before: {{among: tool_calls, left: {{quantifier: any, match: {READ}}}, "
         f"right: {{quantifier: any, match: {WRITE}}}}}}}", [call("read"), call("write")], True),
        (f"{{immediately_before: {{among: tool_calls, left: {{quantifier: any, match: {READ}}}, "
         f"right: {{quantifier: any, match: {WRITE}}}}}}}", [call("read"), call("list"), call("write")], False),
        (f"{{immediately_before: {{among: events, left: {{quantifier: any, match: {READ}}}, "
         f"right: {{quantifier: any, match: {WRITE}}}}}}}", [call("read"), call("write")], False),
        (f"{{immediately_before: {{among: tool_calls, left: {{quantifier: all, match: {READ_OK}}}, "
         f"right: {{quantifier: any, match: {WRITE}}}}}}}", [call("read"), call("write"), call("read", status=None)], None),
        # absent_before
        (f"{{absent_before: {{forbidden: {WRITE_OK}, anchor: {{quantifier: first, match: {READ}}}}}}}",
         [call("read"), call("write")], True),
        (f"{{absent_before: {{forbidden: {WRITE_OK}, anchor: {{quantifier: first, match: {READ}}}}}}}",
         [call("write"), call("read")], False),
        (f"{{absent_before: {{forbidden: {WRITE_OK}, anchor: {{quantifier: first, match: {READ}}}}}}}",
         [call("write", status=None), call("read")], None),
        (f"{{absent_before: {{forbidden: {WRITE_OK}, anchor: {{quantifier: first, match: {READ}}}}}}}",
         [call("write")], False),  # no anchor: on_missing fails by default
        # absent_between
        (f"{{absent_between: {{forbidden: {WRITE_OK}, start: {{quantifier: first, match: {READ}}}, "
         "end: {quantifier: last, match: {kind: assistant_message}}}}",
         [call("read"), "a: all good", call("write")], True),
        (f"{{absent_between: {{forbidden: {WRITE_OK}, start: {{quantifier: first, match: {READ}}}, "
         "end: {quantifier: last, match: {kind: assistant_message, text: {contains: bye}}}}}",
         [call("read"), call("write"), "a: bye"], False),
        (f"{{absent_between: {{forbidden: {WRITE_OK}, start: {{quantifier: first, match: {READ}}}, "
         "end: {quantifier: last, match: {kind: assistant_message, text: {contains: bye}}}}}",
         [call("read"), call("write", status=None), "a: bye"], None),
        (f"{{absent_between: {{forbidden: {WRITE_OK}, start: {{quantifier: first, match: {READ}}}, "
         "end: {quantifier: last, match: {kind: assistant_message, text: {contains: bye}}}}}",
         ["a: bye", call("read")], False),  # inverted window
        # all_of / any_of / negate (Kleene)
        (f"{{all_of: [{{present: {{match: {READ}}}}}, {{present: {{match: {WRITE}}}}}]}}", [call("read"), call("write")], True),
        (f"{{all_of: [{{present: {{match: {READ}}}}}, {{present: {{match: {WRITE_OK}}}}}]}}", [call("write", status=None)], False),
        (f"{{all_of: [{{present: {{match: {READ}}}}}, {{present: {{match: {WRITE_OK}}}}}]}}", [call("read"), call("write", status=None)], None),
        (f"{{any_of: [{{present: {{match: {READ}}}}}, {{present: {{match: {WRITE_OK}}}}}]}}", [call("read"), call("write", status=None)], True),
        (f"{{any_of: [{{present: {{match: {READ}}}}}, {{present: {{match: {WRITE}}}}}]}}", [call("list")], False),
        (f"{{any_of: [{{present: {{match: {READ}}}}}, {{present: {{match: {WRITE_OK}}}}}]}}", [call("write", status=None)], None),
        (f"{{negate: {{present: {{match: {WRITE}}}}}}}", [call("read")], True),
        (f"{{negate: {{present: {{match: {WRITE}}}}}}}", [call("write")], False),
        (f"{{negate: {{present: {{match: {WRITE_OK}}}}}}}", [call("write", status=None)], None),
    ],
)  # fmt: skip
def test_kind_verdicts(require: str, steps: list[str | dict[str, Any]], expected: bool | None) -> None:
    value, message = one(require, trail=timeline("u: go", *steps))
    assert value is expected, message
    assert (message == "") is (expected is True)


def test_undecided_names_the_missing_evidence() -> None:
    value, message = one(
        f"{{present: {{match: {WRITE_OK}}}}}", trail=timeline("u: go", call("write", status=None))
    )
    assert value is None
    assert "never recorded" in message and "tool_call write" in message


def test_on_missing_pass_opts_in_to_the_vacuous_case() -> None:
    require = f"{{before: {{left: {{quantifier: any, match: {READ}}}, right: {{quantifier: any, match: {WRITE}}}}}}}"
    trail = timeline("u: go", call("list"))
    assert one(require, trail=trail)[0] is False
    assert one(require, extra="  on_missing: pass\n", trail=trail)[0] is True


def test_within_restricts_every_matcher_to_the_turn_window() -> None:
    trail = timeline("u: go", call("read"), call("write"), call("write"))
    require = f"{{count: {{match: {WRITE}, max: 1}}}}"
    assert one(require, trail=trail)[0] is False
    assert one(require, extra="  within: {first_turn: 0, last_turn: 1}\n", trail=trail)[0] is True


@pytest.mark.parametrize(
    ("args_predicate", "value", "expected"),
    [
        ("{equals: 5}", 5, True),
        ("{equals: 5}", "5", False),  # a number is not a string
        ("{equals: 1}", True, False),  # nor is a bool a number
        ("{gt: 4, lt: 6}", 5.0, True),
        ("{gt: 4}", "5", False),
        ("{not_equals: X}", None, False),  # a missing argument satisfies no negative predicate
        ("{exists: false}", None, True),
        ("{exists: true}", None, False),
        ("{contains: W1}", ["W0", "W1"], True),
        ("{contains: W1}", {"k": "xW1x"}, True),
        ("{contains_ci: abc}", "xxABCxx", True),
        ("{equals_ci: Paid}", "PAID", True),
        ("{regex: '^O-\\d+$'}", "O-17", True),
        ("{regex: '\\d'}", 7, False),
        ("{in: [a, b]}", "b", True),
        ("{not_in: [a, b]}", "c", True),
        ("{len_gt: 0}", "", False),
        ("{len_gte: 2}", [1, 2], True),
        ("{len_gt: 0}", 5, False),
    ],
)
def test_value_predicates(args_predicate: str, value: Any, expected: bool) -> None:
    trail = timeline("u: go", call("write") if value is None else call("write", body={"field": value}))
    require = f"{{present: {{match: {{kind: tool_call, args: {{body.field: {args_predicate}}}}}}}}}"
    assert one(require, trail=trail)[0] is expected


BIND_AT_WRITE = """  bind:
    match: {kind: tool_call, tool: {equals: write}}
    values: {rec: {field: args.id}}
"""
READ_BEFORE_WRITE = (
    "{before: {left: {quantifier: any, match: {kind: tool_call, tool: {equals: read}, args: {id: {equals_binding: rec}}}},"
    " right: {quantifier: any, match: {kind: tool_call, tool: {equals: write}, args: {id: {equals_binding: rec}}}}}}"
)


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        ([call("read", id="X"), call("write", id="X")], True),
        ([call("read", id="X"), call("write", id="Y")], False),
        ([call("read", id="X"), call("read", id="Y"), call("write", id="X")], True),
        (
            [call("read", id="X"), call("write", id="X"), call("write", id="Y")],
            False,
        ),  # universal, not existential
        ([call("read", id="X"), call("read", id="X"), call("write", id="X"), call("write", id="X")], True),
    ],
)
def test_binding_holds_for_every_distinct_value(steps: list[dict[str, Any]], expected: bool) -> None:
    value, message = one(READ_BEFORE_WRITE, extra=BIND_AT_WRITE, trail=timeline("u: go", *steps))
    assert value is expected
    if expected is False:
        assert "failed under (rec='Y')" in message


@pytest.mark.parametrize(("on_unbound", "expected"), [("fail", False), ("pass", True)])
def test_empty_candidate_set_is_decided_by_on_unbound(on_unbound: str, expected: bool) -> None:
    extra = BIND_AT_WRITE + f"    on_unbound: {on_unbound}\n"
    config = block(f"constraints:\n- id: c\n  description: d\n{extra}  require: {READ_BEFORE_WRITE}\n")
    trail = timeline("u: go", call("read", id="X"))
    outcome = score_trace_checks(config, build_trace_view(trail), True)
    assert outcome.outcomes[0].verdict.value is expected
    assert outcome.outcomes[0].unbound


def test_binding_types_are_kept_apart() -> None:
    # 7 and "7" are different candidates, and an int never equals the string argument.
    trail = timeline("u: go", call("read", id="7"), call("write", id=7))
    assert one(READ_BEFORE_WRITE, extra=BIND_AT_WRITE, trail=trail)[0] is False


def test_a_bound_number_against_text_says_the_comparison_was_not_made() -> None:
    extra = """  bind:
    match: {kind: tool_call, tool: {equals: refund}}
    values: {amount: {field: args.amount}}
"""
    require = "{present: {match: {kind: assistant_message, text: {contains_binding: amount}}}}"
    value, message = one(
        require, extra=extra, trail=timeline("u: go", call("refund", amount=5), "a: refunded 5")
    )
    assert value is False
    assert "contains_binding on text was not compared: binding 'amount' holds 5 (int)" in message


def test_binding_over_an_unrecorded_value_is_undecided_where_readings_disagree() -> None:
    extra = """  bind:
    match: {kind: tool_call, tool: {equals: lookup}}
    values: {code: {field: result}}
"""
    require = "{present: {match: {kind: assistant_message, text: {contains_binding: code}}}}"
    quoted = timeline("u: go", call("lookup", status=None), "a: your code is C-9")
    value, message = one(require, extra=extra, trail=quoted)
    assert value is None and "<unrecorded>" in message
    recorded = timeline("u: go", call("lookup", output="C-9"), "a: your code is C-9")
    assert one(require, extra=extra, trail=recorded)[0] is True


def test_negate_inside_a_binding_reads_no_candidate_satisfies() -> None:
    extra = BIND_AT_WRITE
    require = "{negate: {present: {match: {kind: tool_call, tool: {equals: read}, args: {id: {equals_binding: rec}}}}}}"
    trail = timeline("u: go", call("read", id="X"), call("write", id="X"), call("write", id="Y"))
    assert one(require, extra=extra, trail=trail)[0] is False
    assert one(require, extra=extra, trail=timeline("u: go", call("write", id="Y")))[0] is True


def test_pattern_binds_one_value_per_match() -> None:
    extra = """  bind:
    match: {kind: assistant_message}
    values: {amount: {field: text, pattern: '\\$([0-9]+\\.[0-9]{2})'}}
"""
    require = "{present: {match: {kind: tool_call, tool: {equals: refund}, args: {amount: {equals_binding: amount}}}}}"
    trail = timeline("u: go", call("refund", amount="5.00"), "a: refunded $5.00 of $7.50")
    value, message = one(require, extra=extra, trail=trail)
    assert value is False and "amount='7.50'" in message


def outcome_of(config: str, trail: TrialTimeline) -> TraceOutcome:
    return score_trace_checks(block(config), build_trace_view(trail), trail.has_transcript)


GATES = """constraints:
- id: no_write
  description: never writes
  severity: gate
  require: {absent: {match: {kind: tool_call, tool: {equals: write}}}}
- id: read_twice
  description: reads twice
  weight: 3
  require: {count: {match: {kind: tool_call, tool: {equals: read}}, min: 2}}
- id: said_bye
  description: says bye
  require: {present: {match: {kind: assistant_message, text: {contains: bye}}}}
"""


def test_scored_constraints_fold_by_weight_and_gates_stay_outside() -> None:
    outcome = outcome_of(GATES, timeline("u: go", call("read"), "a: bye"))
    assert outcome.score == pytest.approx(1 / 4) and not outcome.gate_failed
    clean = outcome_of(GATES, timeline("u: go", call("read"), call("read"), "a: bye"))
    assert clean.score == 1.0 and clean.failed_gates == ()


def test_a_tripped_gate_zeroes_the_component_whatever_the_scores() -> None:
    outcome = outcome_of(GATES, timeline("u: go", call("read"), call("read"), call("write"), "a: bye"))
    assert outcome.score == 0.0 and outcome.gate_failed and outcome.failed_gates == ("no_write",)


def test_an_undecided_gate_trips() -> None:
    config = GATES.replace("tool: {equals: write}}", "tool: {equals: write}, status: {equals: success}}")
    outcome = outcome_of(
        config, timeline("u: go", call("read"), call("read"), "a: bye", call("write", status=None))
    )
    assert outcome.gate_failed and outcome.outcomes[0].verdict.value is None


def test_a_block_of_only_gates_scores_the_gate_verdict() -> None:
    gates = GATES.split("- id: read_twice")[0]
    assert outcome_of(gates, timeline("u: go", call("read"))).score == 1.0
    assert outcome_of(gates, timeline("u: go", call("write"))).score == 0.0


ROUTES = """constraints:
- id: greeted
  description: greets
  require: {present: {match: {kind: assistant_message, text: {contains: hello}}}}
alternatives:
- id: refund
  description: refund route
  constraints:
  - id: refunded
    description: refund issued
    require: {present: {match: {kind: tool_call, tool: {equals: refund}}}}
  - id: refund_gate
    description: nothing written before the refund
    severity: gate
    require: {absent_before: {forbidden: {kind: tool_call, tool: {equals: write}}, anchor: {quantifier: first, match: {kind: tool_call, tool: {equals: refund}}}}}
- id: credit
  description: credit route
  constraints:
  - id: credited
    description: credit issued
    require: {present: {match: {kind: tool_call, tool: {equals: credit}}}}
"""


def test_routes_pick_the_highest_score_and_keep_every_route_score() -> None:
    outcome = outcome_of(ROUTES, timeline("u: go", "a: hello", call("credit")))
    assert outcome.winning_route == "credit" and outcome.score == 1.0
    # The refund route's own gate shut (its anchor never occurred), but that route did not win.
    assert [(r.id, r.score, r.gate_failed) for r in outcome.routes] == [
        ("refund", 0.5, True),
        ("credit", 1.0, False),
    ]
    assert not outcome.gate_failed


def test_a_clean_tie_goes_to_the_first_declared_route() -> None:
    outcome = outcome_of(ROUTES, timeline("u: go", "a: hello", call("refund"), call("credit")))
    assert outcome.winning_route == "refund" and outcome.score == 1.0


def test_a_tie_goes_to_the_route_whose_gate_shut() -> None:
    trail = timeline("u: go", "a: hello", call("write"), call("credit"), call("refund"))
    outcome = outcome_of(ROUTES, trail)
    assert [(r.id, r.score, r.gate_failed) for r in outcome.routes] == [
        ("refund", 1.0, True),
        ("credit", 1.0, False),
    ]
    assert outcome.winning_route == "refund" and outcome.gate_failed and outcome.score == 0.0
    assert outcome.failed_gates == ("refund_gate",)


def test_a_lower_route_gate_is_not_consulted() -> None:
    trail = timeline("u: go", "a: hello", call("write"), call("credit"))
    outcome = outcome_of(ROUTES, trail)
    assert outcome.routes[0].gate_failed
    assert outcome.winning_route == "credit" and not outcome.gate_failed and outcome.score == 1.0


def test_a_records_only_timeline_cannot_read_messages() -> None:
    record = RecordedToolCall("c1", 0, "read", {}, "agent", "success", "ok", 0.01, 1.0)
    trail = build_trial_timeline(None, [record])
    value, message = one("{present: {match: {kind: assistant_message}}}", trail=trail)
    assert value is None and "no transcript" in message
    assert one(f"{{present: {{match: {READ_OK}}}}}", trail=trail)[0] is True


def test_within_restricts_the_binder_too() -> None:
    # The write to Y happens in turn 3, outside the window: its value is no candidate.
    trail = timeline("u: go", call("read", id="X"), call("write", id="X"), call("write", id="Y"))
    assert one(READ_BEFORE_WRITE, extra=BIND_AT_WRITE, trail=trail)[0] is False
    windowed = BIND_AT_WRITE + "  within: {last_turn: 1}\n"
    assert one(READ_BEFORE_WRITE, extra=windowed, trail=trail)[0] is True


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        ([call("read"), call("write")], True),
        ([call("read"), call("write"), call("write")], False),  # one left cannot precede two rights directly
    ],
)
def test_immediately_before_with_every_right_match(steps: list[dict[str, Any]], expected: bool) -> None:
    require = (
        f"{{immediately_before: {{among: tool_calls, left: {{quantifier: any, match: {READ}}}, "
        f"right: {{quantifier: all, match: {WRITE}}}}}}}"
    )
    assert one(require, trail=timeline("u: go", *steps))[0] is expected
