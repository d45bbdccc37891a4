"""Mutations: insert / update / delete / upsert over tables, applied as one all-or-nothing batch.

Operations arrive already validated against the contract (an ``Operation`` object each). What the
contract cannot say is checked here, against the table: which selectors fit its shape, whether they
match, whether a key is free. A failing operation raises before anything is committed, because the batch
builds new immutable tables and the caller installs them only when every operation has succeeded.

Selectors: ``key`` (keyed tables), ``index`` (list tables), or ``where`` (field equality, either shape),
one per operation. update/delete need at least one match (404); upsert at most one (409), inserting when
none matches.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from tolokaforge.core.json_values import json_equal
from tolokaforge.db.errors import ConflictError, NotFoundError, ValidationFailedError
from tolokaforge.db.record_schemas import RecordValidator
from tolokaforge.db.tables import KeyedTable, ListTable, Record, Table

__all__ = ["TableChange", "apply_changes"]

_SELECTORS = ("key", "index", "where")


@dataclass(frozen=True, slots=True)
class TableChange:
    """Operations on one table (contract ``TableChange``), validated as ``Operation`` objects."""

    table_name: str
    operations: Sequence[Mapping[str, Any]]


class _Batch:
    """The state of one batch: tables edited so far and records written (checked against schemas)."""

    def __init__(self, lookup: Callable[[str], Table | None]) -> None:
        self._lookup = lookup
        self.tables: dict[str, Table] = {}
        self.written: dict[str, list[Record]] = {}

    def table(self, name: str) -> Table:
        table = self.tables.get(name) or self._lookup(name)
        if table is None:
            raise NotFoundError(f"no table {name!r} in this trial", {"table_name": name})
        return table

    def apply(self, name: str, operation: Mapping[str, Any], where: str) -> None:
        table = self.table(name)
        op = cast(str, operation["op"])
        selectors = [selector for selector in _SELECTORS if selector in operation]
        if (op != "insert" and len(selectors) != 1) or (op == "insert" and "where" in operation):
            raise ValidationFailedError(
                f"{where}: {op} takes exactly one selector of key / index / where"
                if op != "insert"
                else f"{where}: insert takes no where",
                {"operation": where},
            )
        if "key" in operation and isinstance(table, ListTable):
            raise ValidationFailedError(f"{where}: key selects in keyed tables; {name!r} is a list")
        if "index" in operation and isinstance(table, KeyedTable):
            raise ValidationFailedError(f"{where}: index selects in list tables; {name!r} is keyed")
        written = self.written.setdefault(name, [])
        if op == "insert":
            self.tables[name] = _insert(table, operation, where, written)
            return
        matches = _match(table, operation)
        if op == "upsert":
            self.tables[name] = _upsert(table, operation, matches, where, written)
            return
        if not matches:
            raise NotFoundError(f"{where}: no record matches", {"operation": where, "table_name": name})
        if op == "delete":
            if isinstance(table, ListTable):
                self.tables[name] = table.delete(cast(list[int], [loc for loc, _ in matches]))
            else:
                self.tables[name] = cast(KeyedTable, table).delete(
                    cast(list[str], [loc for loc, _ in matches])
                )
            return
        updates = cast(dict[str, Any], operation.get("set", {}))
        removals = set(cast(list[str], operation.get("unset", [])))
        for loc, record in matches:
            changed = {k: v for k, v in record.items() if k not in removals} if removals else dict(record)
            changed.update(updates)
            written.append(changed)
            table = _put(table, loc, changed)
        self.tables[name] = table


def _match(table: Table, operation: Mapping[str, Any]) -> list[tuple[int | str, Record]]:
    if "key" in operation:
        key = cast(str, operation["key"])
        found = cast(KeyedTable, table).get(key)
        return [] if found is None else [(key, found)]
    if "index" in operation:
        index = cast(int, operation["index"])
        found = cast(ListTable, table).get(index)
        return [] if found is None else [(index, found)]
    wanted = cast(dict[str, Any], operation["where"]).items()
    return [
        (loc, record)
        for loc, record in table.located()
        if all(field in record and json_equal(record[field], value) for field, value in wanted)
    ]


def _put(table: Table, loc: int | str, record: Record) -> Table:
    if isinstance(table, ListTable):
        return table.replace(cast(int, loc), record)
    return cast(KeyedTable, table).put(cast(str, loc), record)


def _insert(table: Table, operation: Mapping[str, Any], where: str, written: list[Record]) -> Table:
    record = cast(Record, operation["record"])
    written.append(record)
    if isinstance(table, ListTable):
        index = cast(int, operation.get("index", len(table)))
        if index > len(table):
            raise ValidationFailedError(
                f"{where}: insert index {index} is past the end ({len(table)} records)", {"operation": where}
            )
        return table.insert(index, record)
    keyed = cast(KeyedTable, table)
    if "key" not in operation:
        raise ValidationFailedError(f"{where}: insert into a keyed table needs a key", {"operation": where})
    key = cast(str, operation["key"])
    if keyed.get(key) is not None:
        raise ConflictError(f"{where}: key {key!r} is taken", {"operation": where, "key": key})
    return keyed.put(key, record)


def _upsert(
    table: Table,
    operation: Mapping[str, Any],
    matches: list[tuple[int | str, Record]],
    where: str,
    written: list[Record],
) -> Table:
    record = cast(Record, operation["record"])
    if len(matches) > 1:
        raise ConflictError(
            f"{where}: upsert selector matches {len(matches)} records",
            {"operation": where, "matches": len(matches)},
        )
    written.append(record)
    if matches:
        return _put(table, matches[0][0], record)
    if isinstance(table, ListTable):
        return table.insert(len(table), record)
    if "key" not in operation:
        raise ValidationFailedError(
            f"{where}: upsert into a keyed table matched nothing and has no key to insert under",
            {"operation": where},
        )
    return cast(KeyedTable, table).put(cast(str, operation["key"]), record)


def apply_changes(
    lookup: Callable[[str], Table | None],
    changes: Sequence[TableChange],
    validators: Mapping[str, RecordValidator],
) -> tuple[dict[str, Table], int]:
    """Apply every change in order; return the edited tables and the number of operations applied.

    Nothing is modified: the tables returned are new, sharing what they did not change. Raises the
    first operation's error (404 / 409 / 422), or a 422 when a written record violates its table's schema.
    """
    batch = _Batch(lookup)
    applied = 0
    for position, change in enumerate(changes):
        for index, operation in enumerate(change.operations):
            batch.apply(change.table_name, operation, f"changes[{position}].operations[{index}]")
            applied += 1
    for name, records in batch.written.items():
        validator = validators.get(name)
        if validator is not None and records:
            validator.check(records, context=f"table {name!r}")
    return batch.tables, applied
