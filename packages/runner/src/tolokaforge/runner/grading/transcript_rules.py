"""Transcript rules, evaluated off the trial timeline (grading.yaml: transcript_rules).

Each populated rule contributes one or more items; the component score is the fraction of items
that hold. When the timeline carries no events every rule but ``min_assistant_turns`` is skipped
(it would score 0.0 against evidence that does not exist); ``min_assistant_turns`` is evaluated,
because absence is that key's answer.
"""

from __future__ import annotations

import re
from typing import Any

from tolokaforge.core.json_values import json_equal
from tolokaforge.core.models import RequiredAction, TranscriptRulesConfig
from tolokaforge.core.transcript.timeline import NO_EVENTS_SKIP_REASON, ToolCallEvent, TrialTimeline

from .component import ComponentResult, KeyLedger

__all__ = ["evaluate_transcript_rules", "populated_transcript_keys"]

_RULE_KEYS = (
    "max_turns",
    "min_assistant_turns",
    "must_contain",
    "disallow_regex",
    "required_actions",
    "communicate_info",
    "tool_expectations",
)


def populated_transcript_keys(rules: TranscriptRulesConfig) -> list[str]:
    """The author-facing keys that carry something (non-empty, not merely present)."""
    return [f"transcript_rules.{key}" for key in _RULE_KEYS if getattr(rules, key) not in (None, [], "")]


def evaluate_transcript_rules(
    rules: TranscriptRulesConfig, timeline: TrialTimeline, ledger: KeyLedger
) -> ComponentResult:
    keys = populated_transcript_keys(rules)
    results: list[tuple[bool, str]] = []
    if not timeline.has_events:
        ledger.skip(NO_EVENTS_SKIP_REASON, *[k for k in keys if k != "transcript_rules.min_assistant_turns"])
        keys = [k for k in keys if k == "transcript_rules.min_assistant_turns"]
    ledger.evaluate(*keys)
    texts = [_normalise(text) for text in timeline.assistant_texts]
    for key in keys:
        results.extend(_evaluate(key.removeprefix("transcript_rules."), rules, timeline, texts))
    if not results:
        return ComponentResult("transcript_rules", None)
    failures = [message for ok, message in results if not ok]
    passed = len(results) - len(failures)
    if failures:
        segment = f"Transcript: {passed}/{len(results)} rules passed; " + "; ".join(failures)
    else:
        segment = f"Transcript: all {len(results)} rules passed"
    return ComponentResult("transcript_rules", passed / len(results), segment)


def _evaluate(
    key: str, rules: TranscriptRulesConfig, timeline: TrialTimeline, texts: list[str]
) -> list[tuple[bool, str]]:
    turns = timeline.assistant_turn_count
    if key == "max_turns":
        assert rules.max_turns is not None
        return [(turns <= rules.max_turns, f"{turns} assistant turns exceed max_turns {rules.max_turns}")]
    if key == "min_assistant_turns":
        assert rules.min_assistant_turns is not None
        return [
            (
                turns >= rules.min_assistant_turns,
                f"{turns} assistant turns, fewer than min_assistant_turns {rules.min_assistant_turns}",
            )
        ]
    if key == "must_contain":
        return [
            (any(_normalise(needle) in text for text in texts), f"the agent never said {needle!r}")
            for needle in rules.must_contain
        ]
    if key == "disallow_regex":
        return [
            (
                not any(re.search(pattern, text) for text in timeline.assistant_texts),
                f"the agent said something matching {pattern!r}",
            )
            for pattern in rules.disallow_regex
        ]
    if key == "communicate_info":
        return [
            (
                any(_normalise(item.info) in text for text in texts),
                f"the agent did not communicate {item.info!r}",
            )
            for item in rules.communicate_info
            if item.required
        ]
    if key == "required_actions":
        return [_required_action(action, timeline) for action in rules.required_actions]
    if key == "tool_expectations":
        results: list[tuple[bool, str]] = []
        for expectation in rules.tool_expectations:
            count = sum(
                1
                for call in timeline.tool_calls_by("assistant")
                if _same_tool(call.tool_name, expectation.name)
            )
            low, high = expectation.min_calls, expectation.max_calls
            ok = (low is None or count >= low) and (high is None or count <= high)
            results.append(
                (
                    ok,
                    f"{expectation.name} called {count} times (expected {low if low is not None else 0}..{high if high is not None else 'any'})",
                )
            )
        return results
    raise AssertionError(f"no evaluator for transcript_rules.{key}")


def _required_action(action: RequiredAction, timeline: TrialTimeline) -> tuple[bool, str]:
    label = action.action_id or action.name
    candidates = [
        call for call in timeline.tool_calls_by(action.requestor) if _same_tool(call.tool_name, action.name)
    ]
    compare = action.compare_args if action.compare_args is not None else list(action.arguments)
    for call in candidates:
        if not _succeeded(call):
            continue
        arguments = call.record.arguments if call.record is not None else call.call.arguments
        if all(
            name in arguments and json_equal(arguments[name], action.arguments.get(name)) for name in compare
        ):
            return True, ""
    if not candidates:
        return False, f"required action {label!r}: {action.requestor} never called {action.name}"
    return (
        False,
        f"required action {label!r}: no successful {action.name} call with {_describe(action, compare)}",
    )


def _succeeded(call: ToolCallEvent) -> bool:
    # A call the runner refused or that failed did not perform the action.
    return call.record is not None and call.record.status == "success"


def _same_tool(called: str, required: str) -> bool:
    return called == required or called.endswith(f"_{required}")


def _describe(action: RequiredAction, compare: list[str]) -> str:
    wanted: dict[str, Any] = {name: action.arguments.get(name) for name in compare}
    return f"arguments {wanted}" if wanted else "any arguments"


def _normalise(text: str) -> str:
    return " ".join(text.casefold().split())
