"""Properties of the three-valued evaluation over generated timelines and expressions.

``negate(x)`` decides the opposite of ``x`` wherever ``x`` is decided and is undecided exactly where
``x`` is; and a constraint decided over a timeline with unrun calls agrees with every completion of it
(each unrun call replaced by one that ran, successfully or not).
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tolokaforge.core.models import TraceChecksConfig
from tolokaforge.core.transcript import AssistantMessage, Message, ToolCall, ToolMessage, UserMessage
from tolokaforge.core.transcript.recorded import RecordedToolCall
from tolokaforge.core.transcript.timeline import TrialTimeline, build_trial_timeline
from tolokaforge.runner.grading.trace.events import build_trace_view
from tolokaforge.runner.grading.trace.scoring import score_trace_checks

TOOLS = ("read", "write", "list")
Step = tuple[str, str, str | None]  # ("call", tool, status or None for never ran) | ("say", text, None)

steps = st.lists(
    st.one_of(
        st.tuples(st.just("call"), st.sampled_from(TOOLS), st.sampled_from(["success", "error", None])),
        st.tuples(st.just("say"), st.sampled_from(["hello", "bye"]), st.none()),
    ),
    max_size=7,
)


def build(trail: list[Step]) -> TrialTimeline:
    messages: list[Message] = [UserMessage(content="go")]
    records: list[RecordedToolCall] = []
    for index, (what, name, status) in enumerate(trail):
        if what == "say":
            messages.append(AssistantMessage(content=name))
            continue
        call_id = f"c{index}"
        messages.append(AssistantMessage(content="", tool_calls=(ToolCall(call_id, name, {}),)))
        if status is not None:
            messages.append(ToolMessage(content="out", tool_call_id=call_id))
            records.append(
                RecordedToolCall(call_id, len(records), name, {}, "agent", status, "out", 0.01, 1.0)  # type: ignore[arg-type]
            )
    return build_trial_timeline(messages, records)


def matcher(tool: str, status: str | None) -> dict[str, Any]:
    found: dict[str, Any] = {"kind": "tool_call", "tool": {"equals": tool}}
    if status is not None:
        found["status"] = {"equals": status}
    return found


Expr = dict[str, Any]


def side(quantifier: str, match: Expr) -> Expr:
    return {"quantifier": quantifier, "match": match}


def one_kind(kind: str, payload: Any) -> Expr:
    return {kind: payload}


def count(match: Expr, low: int, extra: int) -> Expr:
    return {"count": {"match": match, "min": low, "max": low + extra}}


def pair(kind: str, left: Expr, right: Expr) -> Expr:
    payload: Expr = {"left": left, "right": right}
    if kind == "immediately_before":
        payload["among"] = "tool_calls"
    return {kind: payload}


def absent_before(forbidden: Expr, anchor: Expr) -> Expr:
    return {"absent_before": {"forbidden": forbidden, "anchor": anchor}}


def absent_between(forbidden: Expr, start: Expr, end: Expr) -> Expr:
    return {"absent_between": {"forbidden": forbidden, "start": start, "end": end}}


matchers: st.SearchStrategy[Expr] = st.builds(
    matcher, st.sampled_from(TOOLS), st.sampled_from(["success", "error", None])
)
sides: st.SearchStrategy[Expr] = st.builds(side, st.sampled_from(["any", "all", "first", "last"]), matchers)
anchors: st.SearchStrategy[Expr] = st.builds(side, st.sampled_from(["first", "last"]), matchers)


def wrap(match: Expr) -> Expr:
    return {"match": match}


matches: st.SearchStrategy[Expr] = st.builds(wrap, matchers)

leaves: st.SearchStrategy[Expr] = st.one_of(
    st.builds(one_kind, st.sampled_from(["present", "absent"]), matches),
    st.builds(count, matchers, st.integers(0, 2), st.integers(0, 2)),
    st.builds(pair, st.sampled_from(["before", "immediately_before"]), sides, sides),
    st.builds(absent_before, matchers, anchors),
    st.builds(absent_between, matchers, anchors, anchors),
)


def composites(inner: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
    branches: st.SearchStrategy[list[Expr]] = st.lists(inner, min_size=1, max_size=3)
    return st.one_of(
        st.builds(one_kind, st.sampled_from(["all_of", "any_of"]), branches),
        st.builds(one_kind, st.just("negate"), inner),
    )


expressions: st.SearchStrategy[Expr] = st.recursive(leaves, composites, max_leaves=4)


def verdicts(trail: TrialTimeline, *requires: dict[str, Any]) -> list[bool | None]:
    config = TraceChecksConfig.model_validate(
        {"constraints": [{"id": f"c{i}", "description": "d", "require": r} for i, r in enumerate(requires)]}
    )
    outcome = score_trace_checks(config, build_trace_view(trail), True)
    return [item.verdict.value for item in outcome.outcomes]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps, expressions)
def test_negate_decides_opposite_wherever_its_operand_is_decided(
    trail: list[Step], expr: dict[str, Any]
) -> None:
    plain, negated = verdicts(build(trail), expr, {"negate": expr})
    if plain is None:
        assert negated is None
    else:
        assert negated is (not plain)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps, expressions)
def test_a_decided_verdict_agrees_with_every_completion(trail: list[Step], expr: dict[str, Any]) -> None:
    (decided,) = verdicts(build(trail), expr)
    if decided is None:
        return
    unrun = [i for i, step in enumerate(trail) if step[0] == "call" and step[2] is None]
    for outcomes in itertools.product(["success", "error"], repeat=len(unrun)):
        completed = list(trail)
        for index, status in zip(unrun, outcomes, strict=True):
            completed[index] = ("call", trail[index][1], status)
        assert verdicts(build(completed), expr) == [decided]
