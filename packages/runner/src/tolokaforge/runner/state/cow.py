"""Copy-on-write views of a trial's tables, handed to python tools as their ``data``.

A tau-style tool mutates ``data`` in place. The runner must (1) leave the trial's tables untouched
until the call completes, so a call that times out or raises changes nothing, and (2) learn exactly
what changed without copying, diffing or re-hashing the whole state. So each call gets a
:class:`CowTables` whose tables are *working views* (:class:`~.cow_list.CowList`,
:class:`~.cow_dict.CowDict`: real ``list`` / ``dict`` subclasses, so ``isinstance``, ``json.dumps``
and friends keep working) that clone a record the first time the tool reads it and track every edit.

Views are built once per table and reused by the trial's next calls: after a call,
:meth:`CowTables.settle` puts back only what that call touched. A call whose thread may still be
running (it timed out) must never share its views again: the mirror drops them instead
(see mirror.py).

:meth:`CowTables.changes` returns the call's effect as DB-service TableChange operations, which
:func:`apply_changes` (runner mirror) and the DB service (durable store) apply identically. Records of
the base are never mutated, only replaced, so a stale view cannot corrupt the trial.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, cast

from tolokaforge.core.value_tables import VALUE_KEY, is_value_table, value_of

from .clone import clone
from .cow_dict import CowDict
from .cow_list import CowList, list_diff

__all__ = ["CowDict", "CowList", "CowTables", "TableShapeError", "TableView", "apply_changes", "clone"]

TableView = CowList | CowDict


class TableShapeError(Exception):
    """A tool added or removed a whole table, or changed a table's shape (list vs keyed)."""


class CowTables(dict[str, Any]):
    """The ``data`` a python tool receives: the trial's tables behind copy-on-write views.

    ``views`` holds the working views kept between calls (table name -> view); a view is taken from
    it, or built and put in it, when the tool first touches the table.
    """

    def __init__(self, base: dict[str, Any], views: dict[str, TableView] | None = None) -> None:
        super().__init__(base)
        self._base = base
        self.views: dict[str, TableView] = {} if views is None else views
        self._active: dict[str, TableView] = {}

    def _view(self, name: str) -> Any:
        value = super().__getitem__(name)
        if name in self._active or value is not self._base.get(name):
            return value
        if is_value_table(value):
            # A plain top-level value (core/value_tables.py): the tool gets its own copy of the value,
            # and changes() compares it with the stored one.
            presented = clone(value_of(value))
            super().__setitem__(name, presented)
            return presented
        view = self.views.get(name)
        if view is None or view.base is not value:
            if type(value) is list:
                view = CowList(cast(list[Any], value))
            elif type(value) is dict:
                view = CowDict(cast(dict[str, Any], value))
            else:
                return value
            self.views[name] = view
        else:
            view.begin()
        self._active[name] = view
        super().__setitem__(name, view)
        return view

    def __getitem__(self, name: str) -> Any:
        return self._view(name)

    def __iter__(self) -> Iterator[str]:
        # As in CowDict: dict(data) and {**data} must go through the views, not copy raw tables in C.
        return iter(super().keys())

    def get(self, name: str, default: Any = None) -> Any:  # pyright: ignore[reportIncompatibleMethodOverride]
        return self._view(name) if super().__contains__(name) else default

    def values(self) -> list[Any]:  # pyright: ignore[reportIncompatibleMethodOverride]
        return [self._view(name) for name in super().keys()]  # noqa: SIM118 -- the dict's own keys, not an override

    def items(self) -> list[tuple[str, Any]]:  # pyright: ignore[reportIncompatibleMethodOverride]
        return [(name, self._view(name)) for name in super().keys()]  # noqa: SIM118 -- the dict's own keys, not an override

    def changes(self) -> list[dict[str, Any]]:
        """The call's effect as DB-service TableChange objects, one per changed table (sorted by name).

        Raises TableShapeError when the tool added or removed a table or changed a table's shape: the
        store's tables are fixed at init.
        """
        if set(super().keys()) != set(self._base):
            added = sorted(set(super().keys()) - set(self._base))
            removed = sorted(set(self._base) - set(super().keys()))
            raise TableShapeError(f"a tool may not add or remove tables (added {added}, removed {removed})")
        changes: list[dict[str, Any]] = []
        for name in sorted(super().keys()):
            value = super().__getitem__(name)
            base: Any = self._base[name]
            if value is base:
                continue
            if is_value_table(base):
                operations = _value_replacement(base, value)
            elif isinstance(value, CowList | CowDict) and self._active.get(name) is value:
                operations = value.operations()
            elif (base_is_list := isinstance(base, list)) and isinstance(value, list):
                replaced = [clone(item) for item in cast(list[Any], value)]
                operations = list_diff(cast(list[Any], base), replaced)
            elif not base_is_list and isinstance(value, dict):
                operations = _keyed_replacement(cast(dict[str, Any], base), cast(dict[str, Any], value))
            else:
                shape = "list" if base_is_list else "keyed object"
                raise TableShapeError(f"table {name!r} changed shape: it must stay a {shape}")
            if operations:
                changes.append({"table_name": name, "operations": operations})
        return changes

    def settle(self) -> None:
        """Put every view this call used back in step with its base (after the commit, or a failure)."""
        for view in self._active.values():
            view.settle()
        self._active.clear()


def _keyed_replacement(base: Mapping[str, Any], value: Mapping[str, Any]) -> list[dict[str, Any]]:
    operations: list[dict[str, Any]] = [
        {"op": "upsert", "key": key, "record": clone(record)}
        for key, record in value.items()
        if key not in base or base[key] != record
    ]
    operations.extend({"op": "delete", "key": key} for key in base if key not in value)
    return operations


def _value_replacement(base: Any, value: Any) -> list[dict[str, Any]]:
    """The upsert that stores a plain value's new state (none when it is equal to the stored one)."""
    new = value_of(value) if is_value_table(value) else value
    if new == value_of(base) and type(new) is type(value_of(base)):
        return []
    return [{"op": "upsert", "key": VALUE_KEY, "record": {"value": clone(new)}}]


def apply_changes(tables: dict[str, Any], changes: Iterable[Mapping[str, Any]]) -> None:
    """Apply TableChange objects produced by :meth:`CowTables.changes` to ``tables`` in place.

    Only the selectors the views emit are handled here (index on lists, key on keyed tables); the
    DB service implements the full operation set.
    """
    for change in changes:
        table: Any = tables[change["table_name"]]
        for operation in change["operations"]:
            op = operation["op"]
            if type(table) is list:  # pyright: ignore[reportUnknownArgumentType]
                rows = cast(list[Any], table)
                index: int = operation["index"]
                if op == "upsert":
                    rows[index] = operation["record"]
                elif op == "insert":
                    rows.insert(index, operation["record"])
                else:
                    del rows[index]
            else:
                keyed = cast(dict[str, Any], table)
                if op == "upsert":
                    keyed[operation["key"]] = operation["record"]
                else:
                    del keyed[operation["key"]]
