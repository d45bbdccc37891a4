"""What differs between two trial states, named by table, record and field: the one state diff.

States are ``{table: [record, ...] | {key: record}}``. Records are matched per table, and the way a
table is matched is chosen once, from both sides together, so one changed record always reads as one
modified record:

- a keyed table by key: ``orders[O-1]``;
- a list table by an identity field when one holds on both sides: ``id``, else the first field ending
  in ``_id`` that every record on both sides has, scalar and unique per side, and that is not declared
  unstable (a generated id differs between runs by design): ``loans[B-1]``;
- otherwise by position: ``notes[#2]``.

The runner's GradeTrial explains a hash mismatch with it (``Grade.state_diff_json`` is
:meth:`StateDiff.to_json`), and the pytest plugin's determinism check names the fields two golden
replays disagree on, each marked declared-unstable or not.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from itertools import compress
from operator import is_not, itemgetter
from typing import Any, Literal, cast

__all__ = ["ABSENT", "Difference", "StateDiff", "diff_states"]

_MAX_LINES = 50


class _Absent:
    """The value on the side that lacks a record or field (distinct from ``None``, a JSON null)."""

    def __repr__(self) -> str:
        return "(absent)"


ABSENT: Any = _Absent()

DifferenceKind = Literal["added", "removed", "modified"]


@dataclass(frozen=True)
class Difference:
    """One table, record or field that differs. ``expected`` is the first state's side, ``actual`` the
    second's; either may be :data:`ABSENT`."""

    kind: DifferenceKind
    table: str
    record: str
    """``O-1`` (a keyed table's key, or a list table's identity value), ``#2`` (a list table matched by
    position); empty when a whole table is on one side only."""
    field: str
    """Empty when a whole record (or table) is on one side only, or the records are not objects."""
    expected: Any
    actual: Any
    declared_unstable: bool = False

    @property
    def where(self) -> str:
        record = f"[{self.record}]" if self.record else ""
        return f"{self.table}{record}" + (f".{self.field}" if self.field else "")

    def __str__(self) -> str:
        return f"{self.where}: {_short(self.expected)} vs {_short(self.actual)}"

    def line(self) -> str:
        """The diff line the runner reports: ``~`` modified, ``+`` only in the trial, ``-`` only golden."""
        if self.kind == "added":
            return f"+ {self.where}: {_short(self.actual)} (not in the golden state)"
        if self.kind == "removed":
            return f"- {self.where}: {_short(self.expected)} (missing from the trial)"
        return f"~ {self.where}: expected {_short(self.expected)}, got {_short(self.actual)}"


@dataclass(frozen=True)
class StateDiff:
    differences: list[Difference] = field(default_factory=list[Difference])

    def __bool__(self) -> bool:
        return bool(self.differences)

    def summary(self) -> str:
        """One line, e.g. ``1 modified (orders[O-1].status), 1 added (notes[#2])``."""
        parts: list[str] = []
        for kind in ("modified", "added", "removed"):
            items = [d for d in self.differences if d.kind == kind]
            if not items:
                continue
            records = {(d.table, d.record) for d in items}
            names = [d.where for d in items]
            shown = ", ".join(names[:3]) + (f", +{len(names) - 3} more" if len(names) > 3 else "")
            parts.append(f"{len(records)} {kind} ({shown})")
        return ", ".join(parts) or "no difference"

    def to_json(self) -> dict[str, Any]:
        """``{added, removed, modified, diff_lines}``: the shape of ``Grade.state_diff_json``."""
        added = [
            {"table": d.table, "record": d.record, "value": d.actual}
            for d in self.differences
            if d.kind == "added"
        ]
        removed = [
            {"table": d.table, "record": d.record, "value": d.expected}
            for d in self.differences
            if d.kind == "removed"
        ]
        modified: dict[tuple[str, str], dict[str, Any]] = {}
        for d in self.differences:
            if d.kind == "modified":
                entry = modified.setdefault(
                    (d.table, d.record), {"table": d.table, "record": d.record, "fields": {}}
                )
                entry["fields"][d.field or "(record)"] = {"expected": d.expected, "actual": d.actual}
        return {
            "added": added,
            "removed": removed,
            "modified": list(modified.values()),
            "diff_lines": [d.line() for d in self.differences][:_MAX_LINES],
        }


def diff_states(
    expected: Mapping[str, Any],
    actual: Mapping[str, Any],
    unstable: Collection[tuple[str, str]] = (),
    *,
    stable: bool = False,
    common: Mapping[str, Any] | None = None,
) -> StateDiff:
    """Every difference between two states, in table, record and field order.

    ``unstable`` holds the declared unstable ``(table, field)`` pairs: they mark differences and are
    never used to match records. ``stable`` compares the states as their stable views would: the
    unstable fields are left out (no difference on them, and no such field in a record shown whole).

    The cost follows what differs: a table or record that is the same object on both sides (two states
    sharing what neither changed) is skipped without looking inside. ``common`` is a state both derive
    from, sharing its records (a task's initial state): a list table's identity field is then worked
    out once for it and only checked on the records each side replaced, not on every record.
    """
    found: list[Difference] = []
    for table in sorted(set(expected) | set(actual)):
        before = expected.get(table, ABSENT)
        after = actual.get(table, ABSENT)
        if before is after:
            continue
        if before is ABSENT or after is ABSENT:
            kind: DifferenceKind = "added" if before is ABSENT else "removed"
            found.append(Difference(kind, table, "", "", before, after))
            continue
        if before == after:  # C-level, and quick when most records are shared objects
            continue
        ancestor = None if common is None else common.get(table)
        for record, old, new in _pair_records(table, before, after, unstable, ancestor):
            found.extend(_record_differences(table, record, old, new, unstable))
    if stable:
        fields = {(table, name) for table, name in unstable}
        found = [_stable(difference, fields) for difference in found if not difference.declared_unstable]
    return StateDiff(found)


def _stable(difference: Difference, unstable: set[tuple[str, str]]) -> Difference:
    """A whole record (or table) added or removed, shown without its unstable fields."""
    if difference.kind == "modified" or difference.field:
        return difference

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            record = cast(dict[str, Any], value)
            return {name: item for name, item in record.items() if (difference.table, name) not in unstable}
        return value

    if difference.record:
        return replace(difference, expected=strip(difference.expected), actual=strip(difference.actual))
    return difference


def _record_differences(
    table: str, record: str, old: Any, new: Any, unstable: Collection[tuple[str, str]]
) -> list[Difference]:
    if old is ABSENT:
        return [Difference("added", table, record, "", old, new)]
    if new is ABSENT:
        return [Difference("removed", table, record, "", old, new)]
    if old == new:
        return []
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return [Difference("modified", table, record, "", old, new)]
    first, second = cast(dict[str, Any], old), cast(dict[str, Any], new)
    return [
        Difference("modified", table, record, name, a, b, (table, name) in unstable)
        for name in sorted(set(first) | set(second))
        if (a := first.get(name, ABSENT)) != (b := second.get(name, ABSENT))
    ]


def _pair_records(
    table: str, before: Any, after: Any, unstable: Collection[tuple[str, str]], common: Any = None
) -> list[tuple[str, Any, Any]]:
    """The records to compare, paired; pairs of one shared object are left out (they cannot differ)."""
    if isinstance(before, dict) and isinstance(after, dict):
        first, second = cast(dict[str, Any], before), cast(dict[str, Any], after)
        keys = [
            key
            for key in first.keys() | second.keys()
            if first.get(key, ABSENT) is not second.get(key, ABSENT)
        ]
        keys.sort(key=str)
        return [(str(key), first.get(key, ABSENT), second.get(key, ABSENT)) for key in keys]
    if isinstance(before, list) and isinstance(after, list):
        first_list, second_list = cast(list[Any], before), cast(list[Any], after)
        identity = _shared_identity(table, first_list, second_list, unstable, common)
        if identity is _UNKNOWN:
            identity = _identity_field(table, first_list, second_list, unstable)
        if len(first_list) == len(second_list):
            # Same length: the records at one position are usually one object (shared by both states);
            # only the others can differ. Matching by identity pairs the same positions when each
            # differing position holds the same identity value on both sides.
            moved = list(compress(range(len(first_list)), map(is_not, first_list, second_list)))
            if identity is None:
                return [(f"#{i}", first_list[i], second_list[i]) for i in moved]
            if all(first_list[i][identity] == second_list[i][identity] for i in moved):
                return [(str(first_list[i][identity]), first_list[i], second_list[i]) for i in moved]
        if identity is not None:
            old = {record[identity]: record for record in first_list}
            new = {record[identity]: record for record in second_list}
            ordered = list(old) + [value for value in new if value not in old]
            return [
                (str(value), old.get(value, ABSENT), new.get(value, ABSENT))
                for value in ordered
                if old.get(value, ABSENT) is not new.get(value, ABSENT)
            ]
        size = max(len(first_list), len(second_list))
        return [
            (
                f"#{i}",
                first_list[i] if i < len(first_list) else ABSENT,
                second_list[i] if i < len(second_list) else ABSENT,
            )
            for i in range(size)
        ]
    return [("", before, after)]


def _identity_field(
    table: str, first: list[Any], second: list[Any], unstable: Collection[tuple[str, str]]
) -> str | None:
    # map/set over the records run in C: choosing the field costs little next to comparing records.
    records = first + second
    if not records or not all(issubclass(kind, dict) for kind in set(map(type, records))):
        return None
    dicts = cast(list[dict[str, Any]], records)
    candidates = ["id", *sorted(name for name in dicts[0] if name.endswith("_id"))]
    for name in candidates:
        if (table, name) in unstable:
            continue
        if all(_unique_scalar(side, name) for side in (first, second)):
            return name
    return None


def _unique_scalar(records: list[Any], name: str) -> bool:
    """Every record has ``name``, a string or integer (not a bool), each value once."""
    try:
        values = list(map(itemgetter(name), records))
    except KeyError:
        return False
    kinds = set(map(type, values))
    return kinds <= {str, int} and len(set(values)) == len(values)


_UNKNOWN: Any = object()
_ANCESTORS: dict[int, tuple[list[Any], str | None, frozenset[Any]]] = {}
"""id(list) -> (the list, its identity field, that field's values): a few shared ancestors' analyses."""
_MAX_ANCESTORS = 16


def _shared_identity(
    table: str, first: list[Any], second: list[Any], unstable: Collection[tuple[str, str]], common: Any
) -> Any:
    """The identity field of ``first`` + ``second`` when both are ``common`` with some records replaced.

    Exactly what :func:`_identity_field` would choose, or ``_UNKNOWN`` when that cannot be told cheaply:
    then the caller works it out over every record.
    """
    if type(common) is not list:
        return _UNKNOWN
    base = cast(list[Any], common)
    if not base or not len(base) == len(first) == len(second):
        return _UNKNOWN
    analysed: tuple[list[Any], str | None, frozenset[Any]] | None = _ANCESTORS.get(id(base))
    if analysed is None or analysed[0] is not base:
        field = _identity_field(table, base, [], unstable)
        values: frozenset[Any] = frozenset(map(itemgetter(field), base)) if field is not None else frozenset()
        if len(_ANCESTORS) >= _MAX_ANCESTORS:
            _ANCESTORS.clear()
        analysed = _ANCESTORS[id(base)] = (base, field, values)
    _, field, values = analysed
    # Only "id" is decided here: it is always the first candidate, whatever the first record holds (a
    # later candidate depends on the first record's fields and every earlier candidate failing, which
    # is not worth tracking), so a side that replaced its first record is decided like any other.
    if field != "id":
        return _UNKNOWN
    for side in (first, second):
        moved = list(compress(range(len(base)), map(is_not, side, base)))
        replaced: list[Any] = [side[i] for i in moved]
        # "id" holds on this side iff the replacing records carry unique scalar ids that no kept
        # record of the ancestor carries; anything else is decided the slow way.
        if not all(type(record) is dict for record in replaced) or not _unique_scalar(replaced, field):
            return _UNKNOWN
        gone: set[Any] = {base[i][field] for i in moved}
        if not all(record[field] in gone or record[field] not in values for record in replaced):
            return _UNKNOWN
    return field


def _short(value: Any, limit: int = 80) -> str:
    if value is ABSENT:
        return "(absent)"
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."
