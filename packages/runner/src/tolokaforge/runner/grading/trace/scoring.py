"""Constraint verdicts, decision sets, gates and the winning route.

The component is ``sum(weight * passed) / sum(weight)`` over the scored constraints of the decision set
(the shared constraints, plus the winning route's own). Gates stand outside the sums: a set with no
scored member scores 1.0 when every gate held and 0.0 otherwise, and a gate that did not hold -- failed
or undecided -- takes the component to 0.0 and fails the trial. With alternatives each route is scored
over its own decision set, the highest score wins, a tie goes to a route whose gate shut (so a tie can
only ever shut the component) and then to the first declared; every route's own score is kept.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from tolokaforge.core.models.trace_checks import ConstraintKind, TraceConstraint
from tolokaforge.core.models.trace_rules import TraceChecksConfig

from .bindings import evaluate_bound
from .events import TraceEvent
from .kinds import Context, EventIndex, Verdict, evaluate

__all__ = ["ConstraintOutcome", "RouteScore", "TraceOutcome", "score_trace_checks"]

_MESSAGE_KINDS = ("assistant_message", "user_message")


@dataclass(frozen=True, slots=True)
class ConstraintOutcome:
    route: str | None
    constraint: TraceConstraint
    verdict: Verdict
    entered: frozenset[ConstraintKind]
    unbound: bool

    @property
    def passed(self) -> bool:
        return self.verdict.value is True

    @property
    def gate(self) -> bool:
        return self.constraint.severity == "gate"


@dataclass(frozen=True, slots=True)
class RouteScore:
    id: str
    score: float
    gate_failed: bool


@dataclass(frozen=True, slots=True)
class TraceOutcome:
    score: float
    gate_failed: bool
    failed_gates: tuple[str, ...]
    winning_route: str
    routes: tuple[RouteScore, ...]
    outcomes: tuple[ConstraintOutcome, ...]


def evaluate_constraint(
    route: str | None, constraint: TraceConstraint, index: EventIndex, has_transcript: bool
) -> ConstraintOutcome:
    ctx = Context(index, constraint.within, constraint.missing_passes)
    if not has_transcript and _reads_messages(constraint):
        ctx.entered.update(kind for node in constraint.require.walk() for kind in node.kinds())
        verdict = Verdict(None, (), "undecided: the host sent no transcript, so no message event can be read")
        return ConstraintOutcome(route, constraint, verdict, frozenset(ctx.entered), unbound=False)
    if constraint.bind is None:
        verdict, unbound = evaluate(constraint.require, ctx), False
    else:
        bound = evaluate_bound(constraint.bind, constraint.require, ctx)
        verdict, unbound = bound.verdict, bound.unbound
    if ctx.notes and verdict.value is not True:
        verdict = Verdict(verdict.value, verdict.positions, "; ".join([verdict.message, *sorted(ctx.notes)]))
    return ConstraintOutcome(route, constraint, verdict, frozenset(ctx.entered), unbound)


def _reads_messages(constraint: TraceConstraint) -> bool:
    matchers = [m for node in constraint.require.walk() for _, m in node.matchers()]
    if constraint.bind is not None:
        matchers.append(constraint.bind.match)
    return any(m.kind in _MESSAGE_KINDS for m in matchers)


def _decision_score(members: Sequence[ConstraintOutcome]) -> tuple[float, bool, list[str]]:
    failed_gates = [o.constraint.id for o in members if o.gate and not o.passed]
    scored = [o for o in members if not o.gate]
    if not scored:
        return (0.0 if failed_gates else 1.0), bool(failed_gates), failed_gates
    total = sum(o.constraint.effective_weight for o in scored)
    earned = sum(o.constraint.effective_weight for o in scored if o.passed)
    return earned / total, bool(failed_gates), failed_gates


def score_trace_checks(
    config: TraceChecksConfig, events: tuple[TraceEvent, ...], has_transcript: bool
) -> TraceOutcome:
    index = EventIndex(events)
    shared = [evaluate_constraint(None, c, index, has_transcript) for c in config.constraints]
    if not config.alternatives:
        score, gate_failed, failed = _decision_score(shared)
        return TraceOutcome(0.0 if gate_failed else score, gate_failed, tuple(failed), "", (), tuple(shared))
    own = {
        path.id: [evaluate_constraint(path.id, c, index, has_transcript) for c in path.constraints]
        for path in config.alternatives
    }
    routes: list[tuple[RouteScore, list[str]]] = []
    for path in config.alternatives:
        score, gate_failed, failed = _decision_score([*shared, *own[path.id]])
        routes.append((RouteScore(path.id, score, gate_failed), failed))
    best = max(route.score for route, _ in routes)
    tied = [(route, failed) for route, failed in routes if math.isclose(route.score, best, abs_tol=1e-9)]
    winner, failed = next(((r, f) for r, f in tied if r.gate_failed), tied[0])
    outcomes = tuple(shared + [o for path in config.alternatives for o in own[path.id]])
    return TraceOutcome(
        0.0 if winner.gate_failed else winner.score,
        winner.gate_failed,
        tuple(failed),
        winner.id,
        tuple(route for route, _ in routes),
        outcomes,
    )
