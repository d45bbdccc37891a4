"""Name what differs between two trial states: table, record and field.

States are ``{table: [records]}`` or ``{table: {key: record}}`` (GetState's ``state_json``). A list
table's records are matched by position, a keyed table's by key. Each difference says whether its
``(table, field)`` is a declared unstable field, which is what tells an expected difference (a
generated id, a timestamp the pack declared) from the one that breaks the stable hash.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, cast

__all__ = ["FieldDifference", "diff_states"]

_MISSING = object()


@dataclass(frozen=True)
class FieldDifference:
    table: str
    record: str
    """``[3]`` for a list table's fourth record, ``['O-1']`` for a keyed table's record."""
    field: str
    """Empty when a whole record (or table) is on one side only."""
    first: Any
    second: Any
    declared_unstable: bool

    def __str__(self) -> str:
        where = f"{self.table}{self.record}" + (f".{self.field}" if self.field else "")
        first = "(absent)" if self.first is _MISSING else _short(self.first)
        second = "(absent)" if self.second is _MISSING else _short(self.second)
        return f"{where}: {first} vs {second}"


def diff_states(
    first: dict[str, Any], second: dict[str, Any], unstable: Collection[tuple[str, str]]
) -> list[FieldDifference]:
    """Every field that differs between ``first`` and ``second``; ``unstable`` holds (table, field) pairs."""
    found: list[FieldDifference] = []
    for table in sorted(set(first) | set(second)):
        a, b = first.get(table, _MISSING), second.get(table, _MISSING)
        if a is _MISSING or b is _MISSING:
            found.append(FieldDifference(table, "", "", a, b, False))
            continue
        for record, ra, rb in _pair_records(a, b):
            if ra is _MISSING or rb is _MISSING or not (isinstance(ra, dict) and isinstance(rb, dict)):
                if ra != rb:
                    found.append(FieldDifference(table, record, "", ra, rb, False))
                continue
            da, db = cast(dict[str, Any], ra), cast(dict[str, Any], rb)
            for name in sorted(set(da) | set(db)):
                va, vb = da.get(name, _MISSING), db.get(name, _MISSING)
                if va != vb:
                    found.append(FieldDifference(table, record, name, va, vb, (table, name) in unstable))
    return found


def _pair_records(a: Any, b: Any) -> list[tuple[str, Any, Any]]:
    if isinstance(a, dict) and isinstance(b, dict):
        da, db = cast(dict[str, Any], a), cast(dict[str, Any], b)
        return [
            (f"[{key!r}]", da.get(key, _MISSING), db.get(key, _MISSING)) for key in sorted(set(da) | set(db))
        ]
    if isinstance(a, list) and isinstance(b, list):
        la, lb = cast(list[Any], a), cast(list[Any], b)
        return [
            (f"[{i}]", la[i] if i < len(la) else _MISSING, lb[i] if i < len(lb) else _MISSING)
            for i in range(max(len(la), len(lb)))
        ]
    return [("", a, b)]


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
