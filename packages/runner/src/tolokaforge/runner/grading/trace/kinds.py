"""The ten constraint kinds over the trace view, three-valued.

A matcher resolves to the events that definitely match and the events nobody can decide (their
deciding evidence was never recorded). A leaf kind is decided only when every completion -- every
choice of which undecidable events really matched -- reaches the same verdict; the completions of two
matchers are taken as independent, which can only add completions, so a decided verdict is never one
some real completion contradicts. Composites combine their children with Kleene logic.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from tolokaforge.core.models.trace_checks import (
    AnchorSide,
    ConstraintKind,
    Matcher,
    MatcherSide,
    TraceExpr,
    TurnWindow,
)

from .events import TraceEvent
from .predicates import CompiledMatcher, Tri, compile_matcher, kleene_and, kleene_or, match_checks

__all__ = ["Context", "EventIndex", "Side", "Verdict", "describe_matcher", "evaluate", "resolve"]

_EMPTY: Final = -1
"""A reduced side that selected nothing."""
_PREFIX: Final = -2
"""The start of absent_before's window: every position before the anchor."""
_MAX_ENUMERATED: Final = 12
"""immediately_before enumerates completions; past 2**12 of them it reports undecided instead."""


@dataclass(frozen=True, slots=True)
class Verdict:
    value: Tri
    positions: tuple[int, ...] = ()
    message: str = ""
    """Why it failed or could not be decided; empty on a pass."""


@dataclass(frozen=True, slots=True)
class Side:
    definite: tuple[int, ...]
    undecidable: tuple[int, ...]


class EventIndex:
    """The trace view plus what every constraint over it reuses: events by kind, compiled matchers."""

    def __init__(self, events: tuple[TraceEvent, ...]) -> None:
        self.events = events
        self.by_kind: dict[str, list[TraceEvent]] = {}
        for event in events:
            self.by_kind.setdefault(event.kind, []).append(event)
        self._compiled: dict[int, tuple[Matcher, CompiledMatcher]] = {}
        self._prefiltered: dict[tuple[int, int | None, int | None], list[tuple[TraceEvent, Tri]]] = {}

    def compiled(self, matcher: Matcher) -> CompiledMatcher:
        # Keyed by identity, holding the matcher so its id cannot be reused while cached.
        found = self._compiled.get(id(matcher))
        if found is None:
            found = self._compiled[id(matcher)] = (matcher, compile_matcher(matcher))
        return found[1]

    def prefiltered(self, matcher: Matcher, window: TurnWindow | None) -> list[tuple[TraceEvent, Tri]]:
        """Events of the matcher's kind, in the window, whose literal predicates do not fail; with that verdict."""
        key = (id(matcher), window.first_turn if window else None, window.last_turn if window else -1)
        found = self._prefiltered.get(key)
        if found is None:
            compiled = self.compiled(matcher)
            found = list[tuple[TraceEvent, Tri]]()
            for event in self.by_kind.get(matcher.kind, ()):
                if window is not None and not window.admits(event.turn):
                    continue
                verdict = match_checks(compiled.static, event, {}, None)
                if verdict is not False:
                    found.append((event, verdict))
            self._prefiltered[key] = found
        return found


@dataclass
class Context:
    index: EventIndex
    window: TurnWindow | None
    missing_passes: bool
    bound: Mapping[str, Any] = field(default_factory=lambda: {})
    entered: set[ConstraintKind] = field(default_factory=lambda: set[ConstraintKind]())
    notes: set[str] = field(default_factory=lambda: set[str]())
    """Comparisons a binding reference could not make (shared by every bound reading)."""

    @property
    def events(self) -> tuple[TraceEvent, ...]:
        return self.index.events

    def with_bound(self, bound: Mapping[str, Any]) -> Context:
        return Context(self.index, self.window, self.missing_passes, bound, self.entered, self.notes)


def resolve(matcher: Matcher, ctx: Context) -> Side:
    definite: list[int] = []
    undecidable: list[int] = []
    dynamic = ctx.index.compiled(matcher).dynamic
    for event, static in ctx.index.prefiltered(matcher, ctx.window):
        verdict = (
            kleene_and([static, match_checks(dynamic, event, ctx.bound, ctx.notes)]) if dynamic else static
        )
        if verdict is True:
            definite.append(event.position)
        elif verdict is None:
            undecidable.append(event.position)
    return Side(tuple(definite), tuple(undecidable))


def describe_matcher(matcher: Matcher) -> str:
    tool = matcher.tool.equals if matcher.tool is not None and matcher.tool.equals is not None else None
    return f"{matcher.kind} {tool}" if tool else matcher.kind


def _unrecorded(side: Side, ctx: Context) -> str:
    where = ", ".join(ctx.events[p].describe() for p in side.undecidable)
    return f"the outcome of {where} was never recorded"


def evaluate(expr: TraceExpr, ctx: Context) -> Verdict:
    kind = expr.kind
    ctx.entered.add(kind)
    if expr.all_of is not None or expr.any_of is not None:
        return _junction(kind, expr.children(), ctx)
    if expr.negate is not None:
        inner = evaluate(expr.negate, ctx)
        if inner.value is None:
            return Verdict(None, inner.positions, f"negate: {inner.message}")
        if inner.value:
            return Verdict(False, inner.positions, "negate: the negated expression holds")
        return Verdict(True, inner.positions)
    if expr.present is not None or expr.absent is not None:
        spec = expr.present or expr.absent
        assert spec is not None
        return _presence(expr.present is not None, spec.match, ctx)
    if expr.count is not None:
        return _count(expr.count.match, expr.count.min, expr.count.max, ctx)
    if expr.before is not None:
        return _before(expr.before.left, expr.before.right, ctx)
    if expr.immediately_before is not None:
        spec = expr.immediately_before
        assert spec.among is not None
        return _immediately_before(spec.left, spec.right, spec.among, ctx)
    if expr.absent_before is not None:
        spec = expr.absent_before
        return _absent_window("absent_before", spec.forbidden, None, spec.anchor, ctx)
    assert expr.absent_between is not None
    spec = expr.absent_between
    return _absent_window("absent_between", spec.forbidden, spec.start, spec.end, ctx)


def _junction(kind: ConstraintKind, children: Sequence[TraceExpr], ctx: Context) -> Verdict:
    # Every child is evaluated (no short circuit), so every nested kind is accounted for in the ledger.
    verdicts = [evaluate(child, ctx) for child in children]
    values = [v.value for v in verdicts]
    value = kleene_and(values) if kind == "all_of" else kleene_or(values)
    positions = tuple(sorted({p for v in verdicts for p in v.positions}))
    if value is True:
        return Verdict(True, positions)
    blamed = [f"[{i}] {v.message}" for i, v in enumerate(verdicts) if v.value is not True and v.message]
    lead = "a branch fails" if kind == "all_of" and value is False else "no branch holds"
    if value is None:
        lead = "undecided"
    return Verdict(value, positions, f"{kind} {lead}: " + "; ".join(blamed))


def _presence(present: bool, matcher: Matcher, ctx: Context) -> Verdict:
    side = resolve(matcher, ctx)
    name = f"{'present' if present else 'absent'}: {describe_matcher(matcher)}"
    if side.definite:
        if present:
            return Verdict(True, side.definite)
        return Verdict(False, side.definite, f"{name} occurred at {_list(side.definite)}")
    if side.undecidable:
        return Verdict(None, side.undecidable, f"{name} is undecided: {_unrecorded(side, ctx)}")
    if present:
        return Verdict(False, (), f"{name} matched no event")
    return Verdict(True, ())


def _count(matcher: Matcher, low: int | None, high: int | None, ctx: Context) -> Verdict:
    side = resolve(matcher, ctx)
    least, most = len(side.definite), len(side.definite) + len(side.undecidable)
    floor, ceiling = low if low is not None else 0, high
    bounds = f"[{floor}, {'inf' if ceiling is None else ceiling}]"
    name = f"count: {describe_matcher(matcher)}"
    if least >= floor and (ceiling is None or most <= ceiling):
        return Verdict(True, side.definite)
    if most < floor or (ceiling is not None and least > ceiling):
        return Verdict(False, side.definite, f"{name} matched {least} events, outside {bounds}")
    return Verdict(
        None,
        side.definite + side.undecidable,
        f"{name} matched between {least} and {most} events, bounds {bounds}: {_unrecorded(side, ctx)}",
    )


def _extremes(side: Side, use_max: bool) -> set[int]:
    """Every value the side's min (or max) can take over the completions; _EMPTY when it can be empty."""
    if not side.definite:
        return set(side.undecidable) | {_EMPTY}
    anchor = max(side.definite) if use_max else min(side.definite)
    beyond = [p for p in side.undecidable if (p > anchor if use_max else p < anchor)]
    return {anchor, *beyond}


def _definite_extreme(side: Side, use_max: bool) -> int:
    if not side.definite:
        return _EMPTY
    return max(side.definite) if use_max else min(side.definite)


def _settle(possible: set[bool], positions: tuple[int, ...], fail: str, undecided: str) -> Verdict:
    if possible == {True}:
        return Verdict(True, positions)
    if possible == {False}:
        return Verdict(False, positions, fail)
    return Verdict(None, positions, undecided)


def _missing(ctx: Context) -> bool:
    return ctx.missing_passes


def _before(left: MatcherSide, right: MatcherSide, ctx: Context) -> Verdict:
    lside, rside = resolve(left.match, ctx), resolve(right.match, ctx)
    # Closed form: any/first read the left's earliest match, all/last its latest; on the right,
    # any/last read the latest, all/first the earliest.
    left_max = left.quantifier in ("all", "last")
    right_max = right.quantifier in ("any", "last")

    def holds(a: int, b: int) -> bool:
        return _missing(ctx) if _EMPTY in (a, b) else a < b

    possible = {holds(a, b) for a in _extremes(lside, left_max) for b in _extremes(rside, right_max)}
    a, b = _definite_extreme(lside, left_max), _definite_extreme(rside, right_max)
    positions = tuple(p for p in (a, b) if p != _EMPTY)
    if a == _EMPTY or b == _EMPTY:
        empty = "left" if a == _EMPTY else "right"
        fail = (
            f"before: {empty} ({describe_matcher((left if a == _EMPTY else right).match)}) selected no event"
        )
    else:
        fail = f"before: {left.quantifier} left at {a} is not before {right.quantifier} right at {b}"
    undecided = f"before is undecided: {_unrecorded(Side((), lside.undecidable + rside.undecidable), ctx)}"
    return _settle(possible, positions, fail, undecided)


_AMONG_KINDS: Final = {
    "tool_calls": ("tool_call",),
    "tool_results": ("tool_result",),
    "messages": ("assistant_message", "user_message"),
    "events": ("assistant_message", "user_message", "tool_call", "tool_result"),
}


def _immediately_before(left: MatcherSide, right: MatcherSide, among: str, ctx: Context) -> Verdict:
    view = [e.position for e in ctx.events if e.kind in _AMONG_KINDS[among]]
    following = {a: b for a, b in itertools.pairwise(view)}
    lside, rside = resolve(left.match, ctx), resolve(right.match, ctx)
    if len(lside.undecidable) + len(rside.undecidable) > _MAX_ENUMERATED:
        return Verdict(
            None,
            lside.definite + rside.definite,
            f"immediately_before is undecided: too many events with unrecorded outcomes ({_unrecorded(lside, ctx)})",
        )

    def reduce(matched: list[int], quantifier: str) -> list[int]:
        if quantifier == "first":
            return [min(matched)]
        if quantifier == "last":
            return [max(matched)]
        return matched

    def holds(lefts: list[int], rights: list[int]) -> bool:
        if not lefts or not rights:
            return _missing(ctx)
        lefts, rights = reduce(lefts, left.quantifier), reduce(rights, right.quantifier)

        def adjacent(l_pos: int) -> bool:
            pairs = [following.get(l_pos) == r for r in rights]
            return all(pairs) if right.quantifier == "all" else any(pairs)

        return all(map(adjacent, lefts)) if left.quantifier == "all" else any(map(adjacent, lefts))

    possible = {
        holds(sorted(lside.definite + lpick), sorted(rside.definite + rpick))
        for lpick in _subsets(lside.undecidable)
        for rpick in _subsets(rside.undecidable)
    }
    positions = tuple(sorted(set(lside.definite + rside.definite)))
    if not lside.definite or not rside.definite:
        empty = "left" if not lside.definite else "right"
        fail = f"immediately_before: {empty} selected no event"
    else:
        fail = (
            f"immediately_before: {left.quantifier} left ({_list(lside.definite)}) is not immediately followed "
            f"among {among} by {right.quantifier} right ({_list(rside.definite)})"
        )
    undecided = f"immediately_before is undecided: {_unrecorded(Side((), lside.undecidable + rside.undecidable), ctx)}"
    return _settle(possible, positions, fail, undecided)


def _subsets(items: tuple[int, ...]) -> Iterable[tuple[int, ...]]:
    return itertools.chain.from_iterable(itertools.combinations(items, n) for n in range(len(items) + 1))


def _absent_window(
    kind: str, forbidden: Matcher, start: AnchorSide | None, end: AnchorSide, ctx: Context
) -> Verdict:
    banned = resolve(forbidden, ctx)
    start_side = resolve(start.match, ctx) if start is not None else None
    end_side = resolve(end.match, ctx)
    # absent_before has no start: _PREFIX opens the window at position 0.
    starts = _extremes(start_side, start.quantifier == "last") if start_side and start else {_PREFIX}
    ends = _extremes(end_side, end.quantifier == "last")

    def verdicts(s: int, e: int) -> set[bool]:
        if e == _EMPTY or s == _EMPTY or (s != _PREFIX and s >= e):
            return {_missing(ctx)}
        if any(s < p < e for p in banned.definite):
            return {False}
        return {True, False} if any(s < p < e for p in banned.undecidable) else {True}

    possible = set[bool]().union(*(verdicts(s, e) for s in starts for e in ends))
    s = _definite_extreme(start_side, start.quantifier == "last") if start_side and start else _PREFIX
    e = _definite_extreme(end_side, end.quantifier == "last")
    anchors = tuple(p for p in (s, e) if p >= 0)
    if e == _EMPTY or s == _EMPTY:
        which = "anchor" if start is None else ("start" if s == _EMPTY else "end")
        fail = f"{kind}: the {which} selected no event, so there is no window"
    elif s >= e:
        fail = f"{kind}: the window is inverted (start at {s}, end at {e})"
    else:
        hits = [p for p in banned.definite if s < p < e]
        fail = f"{kind}: {describe_matcher(forbidden)} occurred inside the window at {_list(hits)}"
        anchors = tuple(sorted({*anchors, *hits}))
    undecided_side = Side(
        (), banned.undecidable + (start_side.undecidable if start_side else ()) + end_side.undecidable
    )
    return _settle(possible, anchors, fail, f"{kind} is undecided: {_unrecorded(undecided_side, ctx)}")


def _list(positions: Iterable[int]) -> str:
    return ", ".join(str(p) for p in positions) or "none"
