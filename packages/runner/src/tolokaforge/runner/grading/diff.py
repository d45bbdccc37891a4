"""The state diff shown when the trial's state differs from the golden state.

Records are matched per table: by key in keyed tables; in list tables by a stable identity field
when every record has one (``id``, else the first field ending in ``_id`` that all records share),
else by position. ``added`` are records only the trial has, ``removed`` only the golden state has,
``modified`` both have with different fields.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

__all__ = ["compute_state_diff", "summarise_diff"]

_MAX_LINES = 50


def compute_state_diff(golden: Mapping[str, Any], trial: Mapping[str, Any]) -> dict[str, Any]:
    added: list[dict[str, Any]] = []
    removed: list[dict[str, Any]] = []
    modified: list[dict[str, Any]] = []
    lines: list[str] = []
    for table in sorted(set(golden) | set(trial)):
        expected = _index(golden.get(table))
        actual = _index(trial.get(table))
        for ref in actual.keys() - expected.keys():
            added.append({"table": table, "record": ref, "value": actual[ref]})
            lines.append(f"+ {table}[{ref}]: {_short(actual[ref])} (not in the golden state)")
        for ref in expected.keys() - actual.keys():
            removed.append({"table": table, "record": ref, "value": expected[ref]})
            lines.append(f"- {table}[{ref}]: {_short(expected[ref])} (missing from the trial)")
        for ref in sorted(expected.keys() & actual.keys()):
            if expected[ref] == actual[ref]:
                continue
            fields = _field_changes(expected[ref], actual[ref])
            modified.append({"table": table, "record": ref, "fields": fields})
            for name, change in fields.items():
                lines.append(
                    f"~ {table}[{ref}].{name}: expected {_short(change['expected'])}, got {_short(change['actual'])}"
                )
    for bucket in (added, removed):
        bucket.sort(key=lambda item: (item["table"], str(item["record"])))
    return {
        "added": added,
        "removed": removed,
        "modified": modified,
        "diff_lines": sorted(lines)[:_MAX_LINES],
    }


def summarise_diff(diff: Mapping[str, Any]) -> str:
    """One line for Grade.reasons, e.g. ``1 modified (orders[O-1].status), 1 added (notes[2])``."""
    parts: list[str] = []
    for kind in ("modified", "added", "removed"):
        items: list[dict[str, Any]] = diff[kind]
        if not items:
            continue
        if kind == "modified":
            names = [f"{i['table']}[{i['record']}].{field}" for i in items for field in i["fields"]]
        else:
            names = [f"{i['table']}[{i['record']}]" for i in items]
        shown = ", ".join(names[:3]) + (f", +{len(names) - 3} more" if len(names) > 3 else "")
        parts.append(f"{len(items)} {kind} ({shown})")
    return ", ".join(parts) or "hash mismatch"


def _index(table: Any) -> dict[str, Any]:
    if isinstance(table, dict):
        return {str(key): value for key, value in table.items()}  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    if not isinstance(table, list):
        return {}
    records: list[Any] = table  # pyright: ignore[reportUnknownVariableType]
    field = _identity_field(records)
    if field is None:
        return {str(position): record for position, record in enumerate(records)}
    return {str(record[field]): record for record in records}


def _identity_field(records: list[Any]) -> str | None:
    if not records or not all(isinstance(record, dict) for record in records):
        return None
    candidates = ["id", *sorted(key for key in records[0] if key.endswith("_id"))]
    for field in candidates:
        values = [record.get(field) for record in records]
        if all(isinstance(v, str | int) for v in values) and len(set(values)) == len(values):
            return field
    return None


def _field_changes(expected: Any, actual: Any) -> dict[str, Any]:
    if not (isinstance(expected, dict) and isinstance(actual, dict)):
        return {"(record)": {"expected": expected, "actual": actual}}
    before = cast(dict[str, Any], expected)
    after = cast(dict[str, Any], actual)
    fields: dict[str, Any] = {}
    for name in sorted(before.keys() | after.keys()):
        if before.get(name, _MISSING) != after.get(name, _MISSING):
            fields[name] = {"expected": before.get(name), "actual": after.get(name)}
    return fields


_MISSING = object()


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:77] + "..."
