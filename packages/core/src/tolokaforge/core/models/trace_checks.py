"""Trace checks as configured (grading.yaml: trace_checks): temporal constraints over the trial's events.

The models here are the shapes; what no trajectory could decide or what reads two ways (a duplicate id,
a predicate with no operator, ``on_missing`` beside a kind whose verdict is the match, ...) is refused
by :func:`tolokaforge.core.models.trace_rules.check_trace_checks`, which every error names the
constraint of. See docs/trace-checks.md for the semantics.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import AliasChoices, Field, StrictBool, StrictFloat, StrictInt, model_validator

from ._base import SpecModel

__all__ = [
    "CONSTRAINT_KINDS",
    "EVENT_KINDS",
    "MATCHER_FIELDS",
    "PREDICATE_OPERATORS",
    "AbsentBeforeSpec",
    "AbsentBetweenSpec",
    "AnchorSide",
    "BeforeSpec",
    "BindValue",
    "Binding",
    "ConstraintKind",
    "CountSpec",
    "EventKind",
    "ImmediatelyBeforeSpec",
    "MatchSpec",
    "Matcher",
    "MatcherSide",
    "Predicate",
    "TraceConstraint",
    "TraceExpr",
    "TracePath",
    "TurnWindow",
]

EventKind = Literal["assistant_message", "user_message", "tool_call", "tool_result"]
EVENT_KINDS: Final[tuple[EventKind, ...]] = ("assistant_message", "user_message", "tool_call", "tool_result")

ConstraintKind = Literal[
    "present",
    "absent",
    "count",
    "before",
    "immediately_before",
    "absent_before",
    "absent_between",
    "all_of",
    "any_of",
    "negate",
]
CONSTRAINT_KINDS: Final[tuple[ConstraintKind, ...]] = (
    "present",
    "absent",
    "count",
    "before",
    "immediately_before",
    "absent_before",
    "absent_between",
    "all_of",
    "any_of",
    "negate",
)

MATCHER_FIELDS: Final[dict[EventKind, frozenset[str]]] = {
    "tool_call": frozenset({"tool", "executor", "args", "status", "result"}),
    "tool_result": frozenset({"tool", "executor", "status", "result"}),
    "assistant_message": frozenset({"text"}),
    "user_message": frozenset({"text"}),
}
"""Which fields a matcher of each event kind may carry a predicate on (a tool_call reads its result's)."""

PREDICATE_OPERATORS: Final[tuple[str, ...]] = (
    "equals",
    "not_equals",
    "equals_ci",
    "contains",
    "contains_ci",
    "regex",
    "gt",
    "gte",
    "lt",
    "lte",
    "in_",
    "not_in",
    "len_gt",
    "len_gte",
    "exists",
    "equals_binding",
    "contains_binding",
)

_Number = StrictInt | StrictFloat


class Predicate(SpecModel):
    """A conjunction of operators over one field's value; an operator is declared when it is not null."""

    equals: Any = None
    not_equals: Any = None
    equals_ci: str | None = None
    contains: Any = None
    contains_ci: str | None = None
    regex: str | None = None
    gt: _Number | None = None
    gte: _Number | None = None
    lt: _Number | None = None
    lte: _Number | None = None
    in_: list[Any] | None = Field(default=None, validation_alias=AliasChoices("in", "in_"))
    not_in: list[Any] | None = None
    len_gt: StrictInt | None = Field(default=None, ge=0)
    len_gte: StrictInt | None = Field(default=None, ge=0)
    exists: StrictBool | None = None
    equals_binding: str | None = None
    contains_binding: str | None = None

    def operators(self) -> list[tuple[str, Any]]:
        """The declared operators in a fixed order, with their operands."""
        return [(name, value) for name in PREDICATE_OPERATORS if (value := getattr(self, name)) is not None]

    def binding_names(self) -> list[str]:
        return [name for name in (self.equals_binding, self.contains_binding) if name is not None]


class Matcher(SpecModel):
    """Selects events of one kind whose fields satisfy every predicate given."""

    kind: EventKind
    tool: Predicate | None = None
    executor: Predicate | None = None
    args: dict[str, Predicate] | None = None
    """Dotted argument paths (``body.customer.id``) to predicates."""
    status: Predicate | None = None
    result: Predicate | None = None
    text: Predicate | None = None

    def predicates(self) -> list[tuple[str, Predicate]]:
        """(field label, predicate) for every predicate declared; args are labelled ``args.<path>``."""
        found: list[tuple[str, Predicate]] = [
            (name, predicate)
            for name in ("tool", "executor", "status", "result", "text")
            if (predicate := getattr(self, name)) is not None
        ]
        found += [(f"args.{path}", predicate) for path, predicate in (self.args or {}).items()]
        return found


Quantifier = Literal["any", "all", "first", "last"]


class MatcherSide(SpecModel):
    """One side of ``before`` / ``immediately_before``: a quantifier over the side's matched events."""

    quantifier: Quantifier
    match: Matcher


class AnchorSide(SpecModel):
    """A window anchor: the first or last event the matcher selects (any/all are refused at load)."""

    quantifier: str
    match: Matcher


class MatchSpec(SpecModel):
    """Payload of ``present`` and ``absent``."""

    match: Matcher


class CountSpec(SpecModel):
    match: Matcher
    min: StrictInt | None = Field(default=None, ge=0)
    max: StrictInt | None = Field(default=None, ge=0)


class BeforeSpec(SpecModel):
    left: MatcherSide
    right: MatcherSide


Among = Literal["tool_calls", "tool_results", "messages", "events"]


class ImmediatelyBeforeSpec(SpecModel):
    left: MatcherSide
    right: MatcherSide
    among: Among | None = None
    """Required (checked at load, so the error names the constraint): there is no default view."""


class AbsentBeforeSpec(SpecModel):
    forbidden: Matcher
    anchor: AnchorSide


class AbsentBetweenSpec(SpecModel):
    forbidden: Matcher
    start: AnchorSide
    end: AnchorSide


class TraceExpr(SpecModel):
    """One constraint expression: exactly one of the ten kinds is set (checked at load)."""

    present: MatchSpec | None = None
    absent: MatchSpec | None = None
    count: CountSpec | None = None
    before: BeforeSpec | None = None
    immediately_before: ImmediatelyBeforeSpec | None = None
    absent_before: AbsentBeforeSpec | None = None
    absent_between: AbsentBetweenSpec | None = None
    all_of: list[TraceExpr] | None = None
    any_of: list[TraceExpr] | None = None
    negate: TraceExpr | None = None

    def kinds(self) -> list[ConstraintKind]:
        """The kinds set on this node (one, on a valid expression)."""
        return [kind for kind in CONSTRAINT_KINDS if getattr(self, kind) is not None]

    @property
    def kind(self) -> ConstraintKind:
        return self.kinds()[0]

    def children(self) -> list[TraceExpr]:
        if self.all_of is not None:
            return list(self.all_of)
        if self.any_of is not None:
            return list(self.any_of)
        if self.negate is not None:
            return [self.negate]
        return []

    def walk(self) -> list[TraceExpr]:
        """This node and every node under it, depth first."""
        nodes: list[TraceExpr] = [self]
        for child in self.children():
            nodes += child.walk()
        return nodes

    def matchers(self) -> list[tuple[str, Matcher]]:
        """(role, matcher) for the matchers on this node itself (not its children)."""
        for kind in ("present", "absent", "count"):
            spec = getattr(self, kind)
            if spec is not None:
                return [("match", spec.match)]
        for spec in (self.before, self.immediately_before):
            if spec is not None:
                return [("left", spec.left.match), ("right", spec.right.match)]
        if self.absent_before is not None:
            return [("forbidden", self.absent_before.forbidden), ("anchor", self.absent_before.anchor.match)]
        if self.absent_between is not None:
            spec = self.absent_between
            return [("forbidden", spec.forbidden), ("start", spec.start.match), ("end", spec.end.match)]
        return []


class TurnWindow(SpecModel):
    """Inclusive window over the events' turn index (the assistant generation they belong to)."""

    first_turn: StrictInt | None = Field(default=None, ge=0)
    last_turn: StrictInt | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> TurnWindow:
        if self.first_turn is None and self.last_turn is None:
            raise ValueError("within needs first_turn, last_turn or both")
        if self.first_turn is not None and self.last_turn is not None and self.first_turn > self.last_turn:
            raise ValueError(f"within: first_turn ({self.first_turn}) is after last_turn ({self.last_turn})")
        return self

    def admits(self, turn: int) -> bool:
        return (self.first_turn is None or turn >= self.first_turn) and (
            self.last_turn is None or turn <= self.last_turn
        )


class BindValue(SpecModel):
    """Where a bound name's values come from: ``tool``, ``text``, ``result`` or ``args.<dotted path>``."""

    field: str = Field(min_length=1)
    pattern: str | None = None
    """A regex searched in the (string) value: each match binds one value (its first group, if any)."""


class Binding(SpecModel):
    match: Matcher
    values: dict[str, BindValue] = Field(min_length=1)
    on_unbound: Literal["fail", "pass"] = "fail"


class TraceConstraint(SpecModel):
    id: str = Field(min_length=1)
    description: str
    weight: float | None = Field(default=None, gt=0)
    """Default 1.0 on a scored constraint; a gate carries none (refused at load)."""
    severity: Literal["scored", "gate"] = "scored"
    on_missing: Literal["fail", "pass"] | None = None
    """What an anchor or side that selected nothing decides; None is the default, ``fail``."""
    within: TurnWindow | None = None
    bind: Binding | None = None
    require: TraceExpr

    @property
    def effective_weight(self) -> float:
        return 1.0 if self.weight is None else self.weight

    @property
    def missing_passes(self) -> bool:
        return self.on_missing == "pass"


class TracePath(SpecModel):
    """One alternative route: scored over the shared constraints plus its own."""

    id: str = Field(min_length=1)
    description: str
    constraints: list[TraceConstraint] = Field(min_length=1)
