"""The trace_checks component: evaluate the block over the timeline and account for its keys.

Ledger keys are ``trace_checks.constraints.<kind>`` for every kind in the shared constraints' trees
(composites included) and ``trace_checks.alternatives`` for the routes, which covers the kinds written
only inside them. A timeline with no events leaves the component unscored and skips every key. A
constraint whose binder bound nothing never entered its ``require`` tree: the kinds nested in it are
skipped, unless another constraint of the block evaluated them.
"""

from __future__ import annotations

from typing import Final

from tolokaforge.core.models.trace_checks import ConstraintKind
from tolokaforge.core.models.trace_rules import TraceChecksConfig
from tolokaforge.core.transcript.timeline import NO_EVENTS_SKIP_REASON, TrialTimeline

from ..component import ComponentResult, KeyLedger
from .events import build_trace_view
from .results import constraint_result, reasons_segment, summary
from .scoring import score_trace_checks

__all__ = ["TRACE_GATE_FAILED", "UNBOUND_SKIP_REASON", "evaluate_trace_checks", "populated_trace_keys"]

UNBOUND_SKIP_REASON: Final = "skipped: the binding yielded no assignment"
TRACE_GATE_FAILED: Final = "trace_gate_failed"
"""Key of ComponentResult.extra: True when a gate shut the trial (binary_pass is then false)."""


def _key(kind: str) -> str:
    return f"trace_checks.constraints.{kind}"


def populated_trace_keys(config: TraceChecksConfig) -> list[str]:
    kinds = {kind for c in config.constraints for node in c.require.walk() for kind in node.kinds()}
    keys = sorted(_key(kind) for kind in kinds)
    if config.alternatives:
        keys.append("trace_checks.alternatives")
    return keys


def evaluate_trace_checks(
    config: TraceChecksConfig, timeline: TrialTimeline, ledger: KeyLedger
) -> ComponentResult:
    keys = populated_trace_keys(config)
    if not timeline.has_events:
        ledger.skip(NO_EVENTS_SKIP_REASON, *keys)
        return ComponentResult("trace_checks", None)
    events = build_trace_view(timeline)
    outcome = score_trace_checks(config, events, timeline.has_transcript)
    entered: set[ConstraintKind] = {kind for item in outcome.outcomes for kind in item.entered}
    ledger.evaluate(*(_key(kind) for kind in sorted(entered)))
    if config.alternatives:
        ledger.evaluate("trace_checks.alternatives")
    never_entered = {
        kind
        for item in outcome.outcomes
        if item.unbound
        for node in item.constraint.require.walk()[1:]
        for kind in node.kinds()
        if kind not in entered
    }
    ledger.skip(UNBOUND_SKIP_REASON, *(_key(kind) for kind in sorted(never_entered)))
    reasons = reasons_segment(outcome)
    return ComponentResult(
        "trace_checks",
        outcome.score,
        " | ".join(reason.message for reason in reasons),
        parts=reasons,
        extra={
            "trace_results": [constraint_result(item) for item in outcome.outcomes],
            "trace_summary": summary(outcome),
            TRACE_GATE_FAILED: outcome.gate_failed,
        },
    )
