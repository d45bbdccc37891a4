"""``bind``: correlate one call's values with another's, universally over the distinct values.

The binder's matcher selects candidate events; each bound name extracts values from them (``tool``,
``text``, ``result`` or ``args.<path>``, optionally narrowed to a regex's matches). The constraint holds
when its ``require`` tree holds under every distinct assignment -- quantification outermost, so a
``negate`` inside reads "no candidate satisfies". An empty candidate set is decided by ``on_unbound``.

The candidate set is three-valued too: an event the binder cannot decide, or a value the trial never
recorded, is a candidate only some completions hold. The readings compared are the empty set (only when
no candidate is definite), the definite candidates alone, each undecidable candidate added to them, and
all of them together; the constraint is decided only when every reading agrees.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tolokaforge.core.models.trace_checks import Binding, TraceExpr

from .events import UNRECORDED
from .kinds import Context, Verdict, evaluate, resolve
from .predicates import MISSING, UNKNOWN_VALUE, Tri, field_value, kleene_and

__all__ = ["Assignment", "BoundOutcome", "candidates", "evaluate_bound"]

Assignment = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class BoundOutcome:
    verdict: Verdict
    unbound: bool
    """No candidate at all, definite or undecidable: the require tree was never entered."""


def _extract(value: Any, pattern: str | None) -> list[Any]:
    if value is MISSING:
        return []
    if value is UNRECORDED:
        return [UNKNOWN_VALUE]
    if pattern is None:
        return [value]
    if not isinstance(value, str):
        return []
    return [m.group(1) if m.re.groups else m.group(0) for m in re.finditer(pattern, value)]


def _key(assignment: Assignment, position: int) -> tuple[Any, ...]:
    # Same value and same type: True and 1 are two candidates. An unrecorded value is its own candidate.
    parts: list[Any] = []
    for name in sorted(assignment):
        value = assignment[name]
        if value is UNKNOWN_VALUE:
            parts.append((name, "unknown", position))
        else:
            parts.append((name, type(value).__name__, json.dumps(value, sort_keys=True, default=str)))
    return tuple(parts)


def candidates(
    binding: Binding, ctx: Context
) -> tuple[dict[tuple[Any, ...], Assignment], dict[tuple[Any, ...], Assignment]]:
    """(definite, undecidable) distinct assignments, each keyed by value and type."""
    side = resolve(binding.match, ctx)
    definite: dict[tuple[Any, ...], Assignment] = {}
    undecidable: dict[tuple[Any, ...], Assignment] = {}
    for position in side.definite + side.undecidable:
        event = ctx.events[position]
        names = list(binding.values)
        lists = [
            _extract(field_value(event, binding.values[n].field), binding.values[n].pattern) for n in names
        ]
        for combo in itertools.product(*lists):
            assignment = dict(zip(names, combo, strict=True))
            target = definite if position in side.definite else undecidable
            target.setdefault(_key(assignment, position), assignment)
    for key in list(undecidable):
        if key in definite:  # a value the trial definitely binds absorbs an undecidable reading of it
            del undecidable[key]
    return definite, undecidable


def _show(assignment: Assignment) -> str:
    inner = ", ".join(
        f"{name}={'<unrecorded>' if v is UNKNOWN_VALUE else repr(v)}" for name, v in assignment.items()
    )
    return f"({inner})"


def evaluate_bound(binding: Binding, require: TraceExpr, ctx: Context) -> BoundOutcome:
    definite, undecidable = candidates(binding, ctx)
    unbound_value = binding.on_unbound == "pass"
    if not definite and not undecidable:
        # The tree's top-level kind still takes a verdict: on_unbound decides it.
        ctx.entered.add(require.kind)
        message = "" if unbound_value else "the binder selected no event carrying a value to bind"
        return BoundOutcome(Verdict(unbound_value, (), message), unbound=True)
    verdicts = {key: evaluate(require, ctx.with_bound(a)) for key, a in {**definite, **undecidable}.items()}
    # With no definite candidate the empty reading is a completion, decided by on_unbound.
    readings: list[list[tuple[Any, ...]]] = [list(definite)]
    readings += [[*definite, key] for key in undecidable]
    if len(undecidable) > 1:
        readings.append([*definite, *undecidable])
    outcomes: list[Tri] = [
        kleene_and([verdicts[key].value for key in keys]) if keys else unbound_value for keys in readings
    ]
    positions = tuple(sorted({p for v in verdicts.values() for p in v.positions}))
    if all(o is True for o in outcomes):
        return BoundOutcome(Verdict(True, positions), unbound=False)
    assignments = {**definite, **undecidable}
    failing = [key for key in definite if verdicts[key].value is False]
    if all(o is False for o in outcomes):
        if failing:
            detail = verdicts[failing[0]].message
            under = ", ".join(_show(assignments[key]) for key in failing)
            return BoundOutcome(Verdict(False, positions, f"{detail}; failed under {under}"), unbound=False)
        return BoundOutcome(
            Verdict(False, positions, "the binder selected no event carrying a value to bind"), unbound=False
        )
    unsettled = [key for key in assignments if verdicts[key].value is not True] or list(undecidable)
    detail = "; ".join(f"{_show(assignments[key])}: {verdicts[key].message or 'holds'}" for key in unsettled)
    if undecidable:
        detail += "; candidates the trial cannot settle: " + ", ".join(
            _show(undecidable[k]) for k in undecidable
        )
    return BoundOutcome(Verdict(None, positions, f"undecided over the bound values: {detail}"), unbound=False)
