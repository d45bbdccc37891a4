"""Predicates over one field's value, and matchers over one event, in three-valued logic.

A verdict is ``True`` (matches), ``False`` (does not) or ``None`` (cannot be decided: the field's
evidence was never recorded). Typing is strict: a number never equals a string, ``True`` is not ``1``,
and the numeric comparisons read only real numbers. A predicate over a field that is absent (an
argument the call did not pass, a field the event kind does not carry) is False for every operator but
``exists``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final, cast

from tolokaforge.core.models.trace_checks import Matcher

from .events import UNRECORDED, TraceEvent, Unrecorded

__all__ = [
    "MISSING",
    "UNKNOWN_VALUE",
    "CompiledMatcher",
    "Tri",
    "compile_matcher",
    "kleene_and",
    "kleene_or",
    "match_checks",
    "match_event",
    "predicate_holds",
    "same",
]

Tri = bool | None


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()
"""A field the event does not carry: only ``exists`` reads it."""


class _UnknownValue:
    def __repr__(self) -> str:
        return "UNKNOWN_VALUE"


UNKNOWN_VALUE: Final = _UnknownValue()
"""A bound value the trial did not record (bound out of a result that never came)."""


def kleene_and(values: Sequence[Tri]) -> Tri:
    if any(value is False for value in values):
        return False
    return None if any(value is None for value in values) else True


def kleene_or(values: Sequence[Tri]) -> Tri:
    if any(value is True for value in values):
        return True
    return None if any(value is None for value in values) else False


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def same(left: Any, right: Any) -> bool:
    """Equality with JSON types kept apart: 1 == 1.0, but 1 != True and 1 != "1"."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if _is_number(left) or _is_number(right):
        return _is_number(left) and _is_number(right) and left == right
    if isinstance(left, str) or isinstance(right, str):
        return isinstance(left, str) and isinstance(right, str) and left == right
    if isinstance(left, list | tuple) and isinstance(right, list | tuple):
        a, b = cast(Sequence[Any], left), cast(Sequence[Any], right)
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(left, dict) and isinstance(right, dict):
        a, b = cast(dict[Any, Any], left), cast(dict[Any, Any], right)
        return a.keys() == b.keys() and all(same(a[key], b[key]) for key in a)
    return left is None and right is None


def _contains(value: Any, needle: Any, fold: bool) -> bool:
    """Substring for two strings; any element of a list, any value of a dict; equality otherwise."""
    if isinstance(value, str) and isinstance(needle, str):
        return needle.casefold() in value.casefold() if fold else needle in value
    if isinstance(value, list | tuple | set | frozenset):
        return any(_contains(item, needle, fold) for item in cast(Sequence[Any], value))
    if isinstance(value, dict):
        return any(_contains(item, needle, fold) for item in cast(dict[Any, Any], value).values())
    return same(value, needle)


@lru_cache(maxsize=512)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _operator_holds(operator: str, operand: Any, value: Any) -> bool:
    if operator == "exists":
        return (value is not MISSING) == operand
    if value is MISSING:
        return False
    if operator in ("equals", "equals_binding"):
        return same(value, operand)
    if operator == "not_equals":
        return not same(value, operand)
    if operator == "equals_ci":
        return isinstance(value, str) and value.casefold() == str(operand).casefold()
    if operator in ("contains", "contains_binding"):
        return _contains(value, operand, fold=False)
    if operator == "contains_ci":
        return _contains(value, operand, fold=True)
    if operator == "regex":
        return isinstance(value, str) and _compiled(str(operand)).search(value) is not None
    if operator in ("gt", "gte", "lt", "lte"):
        if not _is_number(value):
            return False
        return {
            "gt": value > operand,
            "gte": value >= operand,
            "lt": value < operand,
            "lte": value <= operand,
        }[operator]
    if operator == "in_":
        return any(same(value, item) for item in cast(list[Any], operand))
    if operator == "not_in":
        return not any(same(value, item) for item in cast(list[Any], operand))
    if operator in ("len_gt", "len_gte"):
        if not isinstance(value, str | list | dict | tuple):
            return False
        size = len(cast(Sequence[Any], value))
        return size > operand if operator == "len_gt" else size >= operand
    raise ValueError(f"unknown predicate operator {operator!r}")


Operators = tuple[tuple[str, Any], ...]


@dataclass(frozen=True, slots=True)
class CompiledMatcher:
    """A matcher read once: its kind and, per field label, the declared operators in a fixed order.

    ``static`` holds the operators against literals, ``dynamic`` those against bound values: the
    static part is the same for every bound reading, so its verdicts are computed once per matcher.
    """

    kind: str
    static: tuple[tuple[str, Operators], ...]
    dynamic: tuple[tuple[str, Operators], ...]


_BINDING_OPERATORS = ("equals_binding", "contains_binding")


def compile_matcher(matcher: Matcher) -> CompiledMatcher:
    static: list[tuple[str, Operators]] = []
    dynamic: list[tuple[str, Operators]] = []
    for label, predicate in matcher.predicates():
        operators = predicate.operators()
        literal = tuple((op, value) for op, value in operators if op not in _BINDING_OPERATORS)
        bound = tuple((op, value) for op, value in operators if op in _BINDING_OPERATORS)
        if literal:
            static.append((label, literal))
        if bound:
            dynamic.append((label, bound))
    # The tool name is checked first: it is the predicate that rejects most events.
    static.sort(key=lambda item: item[0] != "tool")
    return CompiledMatcher(matcher.kind, tuple(static), tuple(dynamic))


def predicate_holds(
    operators: Operators, value: Any, bound: Mapping[str, Any], notes: set[str] | None = None, label: str = ""
) -> Tri:
    """Every declared operator holds (None when the value, or a bound value it needs, is unrecorded).

    A binding reference comparing text with a bound non-text value can hold on no trajectory; ``notes``
    collects a sentence saying so, so the failure reads as an authoring problem, not the agent's.
    """
    if isinstance(value, Unrecorded):
        return None
    unknown = False
    for operator, operand in operators:
        if operator in ("equals_binding", "contains_binding"):
            name = str(operand)
            operand = bound.get(name, UNKNOWN_VALUE)
            if operand is UNKNOWN_VALUE:
                unknown = True
                continue
            if notes is not None and isinstance(value, str) and not isinstance(operand, str):
                notes.add(
                    f"{operator} on {label or 'the field'} was not compared: binding {name!r} holds "
                    f"{operand!r} ({type(operand).__name__}), never equal to or inside text; bind it with a "
                    "pattern (always text) or compare it on an args predicate"
                )
        if not _operator_holds(operator, operand, value):
            return False
    return None if unknown else True


def field_value(event: TraceEvent, label: str) -> Any:
    """The event's value for a matcher field label (``tool``, ``args.body.id``, ...), or MISSING."""
    if label.startswith("args."):
        if event.args is None:
            return MISSING
        return dotted(event.args, label.removeprefix("args."))
    value = getattr(event, label)
    if value is UNRECORDED:
        return UNRECORDED
    return MISSING if value is None else value


def dotted(root: Mapping[str, Any], path: str) -> Any:
    """Walk ``a.b.0.c`` through dicts (and lists by index); MISSING where the path runs out."""
    current: Any = root
    for segment in path.split("."):
        if isinstance(current, dict) and segment in current:
            current = cast(dict[str, Any], current)[segment]
        elif isinstance(current, list) and segment.isdigit() and int(segment) < len(cast(list[Any], current)):
            current = cast(list[Any], current)[int(segment)]
        else:
            return MISSING
    return current


def match_event(
    matcher: CompiledMatcher, event: TraceEvent, bound: Mapping[str, Any], notes: set[str] | None = None
) -> Tri:
    """Whether the event matches: False as soon as one predicate definitely fails."""
    if event.kind != matcher.kind:
        return False
    return kleene_and(
        [
            match_checks(matcher.static, event, bound, notes),
            match_checks(matcher.dynamic, event, bound, notes),
        ]
    )


def match_checks(
    checks: tuple[tuple[str, Operators], ...],
    event: TraceEvent,
    bound: Mapping[str, Any],
    notes: set[str] | None,
) -> Tri:
    """Kleene conjunction of the checks on one event, stopping at the first definite failure."""
    unknown = False
    for label, operators in checks:
        verdict = predicate_holds(operators, field_value(event, label), bound, notes, label)
        if verdict is False:
            return False
        unknown = unknown or verdict is None
    return None if unknown else True
