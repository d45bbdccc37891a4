"""Copy-on-write views of a trial's tables, handed to python tools as their ``data``.

A tau-style tool mutates ``data`` in place. The runner must (1) leave the trial's tables untouched
until the call completes, so a call that times out or raises changes nothing, and (2) learn exactly
what changed without copying or re-hashing the whole state. So each call gets a :class:`CowTables`:

- a table is wrapped (:class:`CowList` / :class:`CowDict`, real ``list`` / ``dict`` subclasses, so
  ``isinstance``, ``json.dumps`` and friends keep working) the first time the tool touches it;
- a record is cloned the first time the tool reads it through the view, so in-place edits land on
  the clone, never on the trial's record;
- structural edits (append, insert, delete, assignment) are tracked.

:meth:`CowTables.changes` then compares only what the tool touched with the base and returns the
changes as DB-service TableChange operations, which :func:`apply_changes` (runner mirror) and the DB
service (durable store) apply identically. Records of the base are never mutated, only replaced, so a
stale view of a timed-out call cannot corrupt the trial.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, SupportsIndex, cast, overload

__all__ = ["CowDict", "CowList", "CowTables", "TableShapeError", "apply_changes", "clone"]

_ATOMIC: frozenset[type] = frozenset({str, int, float, bool, type(None)})


def clone(value: Any) -> Any:
    """A deep copy of a JSON-shaped value, fast for the dict/list/scalar case."""
    if type(value) in _ATOMIC:  # pyright: ignore[reportUnknownArgumentType]
        return value
    if type(value) is dict:
        record = cast(dict[str, Any], value)
        return {key: item if type(item) in _ATOMIC else clone(item) for key, item in record.items()}  # pyright: ignore[reportUnknownArgumentType]
    if type(value) is list:
        rows = cast(list[Any], value)
        return [item if type(item) in _ATOMIC else clone(item) for item in rows]  # pyright: ignore[reportUnknownArgumentType]
    return copy.deepcopy(value)


class TableShapeError(Exception):
    """A tool added or removed a whole table, or changed a table's shape (list vs keyed)."""


class CowList(list[Any]):
    """A list table: records are cloned on first read; edits are tracked."""

    def __init__(self, base: list[Any]) -> None:
        super().__init__(base)
        self._base = base
        self._cloned: set[int] = set()
        self._structural = False
        self._base_ids: set[int] | None = None

    # -- reads hand out clones --------------------------------------------------------------------
    def _own(self, index: int) -> Any:
        if index < 0:
            index += len(self)
        if not self._structural and index not in self._cloned:
            self._cloned.add(index)
            super().__setitem__(index, clone(super().__getitem__(index)))
        elif self._structural:
            # After a structural edit, positions no longer line up with the base: clone any record
            # that is still the base's own object.
            item = super().__getitem__(index)
            if self._base_ids is None:
                self._base_ids = {id(record) for record in self._base}
            if type(item) not in _ATOMIC and id(item) in self._base_ids:
                super().__setitem__(index, clone(item))
        return super().__getitem__(index)

    @overload
    def __getitem__(self, index: SupportsIndex) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: SupportsIndex | slice) -> Any:
        if isinstance(index, slice):
            return [self._own(i) for i in range(*index.indices(len(self)))]
        position = index.__index__()
        super().__getitem__(position)  # raises IndexError exactly as a list would
        return self._own(position)

    def __iter__(self) -> Iterator[Any]:
        for i in range(len(self)):
            yield self._own(i)

    def __reversed__(self) -> Iterator[Any]:
        for i in range(len(self) - 1, -1, -1):
            yield self._own(i)

    def copy(self) -> list[Any]:
        return list(self)

    def __add__(self, other: Iterable[Any]) -> list[Any]:  # pyright: ignore[reportIncompatibleMethodOverride]
        return [*self, *other]

    def __radd__(self, other: Iterable[Any]) -> list[Any]:
        return [*other, *self]

    def __mul__(self, times: SupportsIndex) -> list[Any]:
        return [clone(item) for _ in range(times.__index__()) for item in self]

    __rmul__ = __mul__

    # -- writes are structural --------------------------------------------------------------------
    def _mark(self) -> None:
        self._structural = True

    def __setitem__(self, index: Any, value: Any) -> None:
        self._mark()
        super().__setitem__(index, value)

    def __delitem__(self, index: Any) -> None:
        self._mark()
        super().__delitem__(index)

    def __iadd__(self, other: Iterable[Any]) -> CowList:  # pyright: ignore[reportIncompatibleMethodOverride]
        self.extend(other)
        return self

    def __imul__(self, times: SupportsIndex) -> CowList:
        self._mark()
        super().__imul__(times)
        return self

    def append(self, value: Any) -> None:
        self._mark()
        super().append(value)

    def extend(self, values: Iterable[Any]) -> None:
        self._mark()
        super().extend(values)

    def insert(self, index: SupportsIndex, value: Any) -> None:
        self._mark()
        super().insert(index, value)

    def pop(self, index: SupportsIndex = -1) -> Any:
        self._mark()
        return super().pop(index)

    def remove(self, value: Any) -> None:
        self._mark()
        super().remove(value)

    def clear(self) -> None:
        self._mark()
        super().clear()

    def sort(self, *, key: Callable[[Any], Any] | None = None, reverse: bool = False) -> None:
        self._mark()
        super().sort(key=key, reverse=reverse)  # pyright: ignore[reportCallIssue, reportArgumentType]

    def reverse(self) -> None:
        self._mark()
        super().reverse()

    # -- the diff ---------------------------------------------------------------------------------
    def operations(self) -> list[dict[str, Any]]:
        """TableChange operations that turn the base into this list (index selectors, in order)."""
        base = self._base
        if not self._structural:
            # Positions still line up with the base: only the records handed out can differ.
            read = super().__getitem__
            return [
                {"op": "upsert", "index": i, "record": read(i)}
                for i in sorted(self._cloned)
                if read(i) != base[i]
            ]
        return _list_diff(base, super().copy())


def _list_diff(base: list[Any], current: list[Any]) -> list[dict[str, Any]]:
    """Operations turning ``base`` into ``current``: common prefix and suffix kept, the middle replaced."""
    limit = min(len(base), len(current))
    prefix = 0
    while prefix < limit and (current[prefix] is base[prefix] or current[prefix] == base[prefix]):
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and (
        current[-1 - suffix] is base[-1 - suffix] or current[-1 - suffix] == base[-1 - suffix]
    ):
        suffix += 1
    old_middle = len(base) - prefix - suffix
    new_middle = current[prefix : len(current) - suffix]
    operations: list[dict[str, Any]] = []
    overlap = min(old_middle, len(new_middle))
    for offset in range(overlap):
        operations.append({"op": "upsert", "index": prefix + offset, "record": new_middle[offset]})
    for _ in range(old_middle - overlap):
        operations.append({"op": "delete", "index": prefix + overlap})
    for offset in range(overlap, len(new_middle)):
        operations.append({"op": "insert", "index": prefix + offset, "record": new_middle[offset]})
    return operations


class CowDict(dict[str, Any]):
    """A keyed table: records are cloned on first read; key assignments and deletions are tracked."""

    def __init__(self, base: dict[str, Any]) -> None:
        super().__init__(base)
        self._base = base
        self._touched: set[str] = set()

    def _own(self, key: str) -> Any:
        value = super().__getitem__(key)
        if key not in self._touched:
            self._touched.add(key)
            value = clone(value)
            super().__setitem__(key, value)
        return value

    def __getitem__(self, key: str) -> Any:
        return self._own(key)

    def get(self, key: str, default: Any = None) -> Any:  # pyright: ignore[reportIncompatibleMethodOverride]
        return self._own(key) if super().__contains__(key) else default

    def values(self) -> list[Any]:  # pyright: ignore[reportIncompatibleMethodOverride]
        return [self._own(key) for key in super().keys()]  # noqa: SIM118 -- the dict's own keys, not an override

    def items(self) -> list[tuple[str, Any]]:  # pyright: ignore[reportIncompatibleMethodOverride]
        return [(key, self._own(key)) for key in super().keys()]  # noqa: SIM118 -- the dict's own keys, not an override

    def copy(self) -> dict[str, Any]:
        return dict(self.items())

    def __setitem__(self, key: str, value: Any) -> None:
        self._touched.add(key)
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        self._touched.add(key)
        super().__delitem__(key)

    def pop(self, key: str, *default: Any) -> Any:  # pyright: ignore[reportIncompatibleMethodOverride]
        if super().__contains__(key):
            value = self._own(key)
            super().__delitem__(key)
            return value
        if default:
            return default[0]
        raise KeyError(key)

    def popitem(self) -> tuple[str, Any]:
        key = next(reversed(list(super().keys())))
        return key, self.pop(key)

    def setdefault(self, key: str, default: Any = None) -> Any:  # pyright: ignore[reportIncompatibleMethodOverride]
        if super().__contains__(key):
            return self._own(key)
        self[key] = default
        return default

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def __ior__(self, other: Any) -> CowDict:  # pyright: ignore[reportIncompatibleMethodOverride]
        self.update(other)
        return self

    def clear(self) -> None:
        self._touched.update(super().keys())
        super().clear()

    def operations(self) -> list[dict[str, Any]]:
        """TableChange operations (key selectors) that turn the base into this mapping."""
        operations: list[dict[str, Any]] = []
        base = self._base
        for key in sorted(self._touched):
            present = super().__contains__(key)
            if present:
                value = super().__getitem__(key)
                if key not in base or base[key] != value:
                    operations.append({"op": "upsert", "key": key, "record": value})
            elif key in base:
                operations.append({"op": "delete", "key": key})
        return operations


class CowTables(dict[str, Any]):
    """The ``data`` a python tool receives: the trial's tables behind copy-on-write views."""

    def __init__(self, base: dict[str, Any]) -> None:
        super().__init__(base)
        self._base = base
        self._views: dict[str, CowList | CowDict] = {}

    def _view(self, name: str) -> Any:
        value = super().__getitem__(name)
        if name in self._views or value is not self._base.get(name):
            return value
        if type(value) is list:
            view: CowList | CowDict = CowList(cast(list[Any], value))
        elif type(value) is dict:
            view = CowDict(cast(dict[str, Any], value))
        else:
            return value
        self._views[name] = view
        super().__setitem__(name, view)
        return view

    def __getitem__(self, name: str) -> Any:
        return self._view(name)

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
            if isinstance(value, CowList | CowDict) and self._views.get(name) is value:
                operations = value.operations()
            elif (base_is_list := isinstance(base, list)) and isinstance(value, list):
                replaced = [clone(item) for item in cast(list[Any], value)]
                operations = _list_diff(cast(list[Any], base), replaced)
            elif not base_is_list and isinstance(value, dict):
                operations = _keyed_replacement(cast(dict[str, Any], base), cast(dict[str, Any], value))
            else:
                shape = "list" if base_is_list else "keyed object"
                raise TableShapeError(f"table {name!r} changed shape: it must stay a {shape}")
            if operations:
                changes.append({"table_name": name, "operations": operations})
        return changes


def _keyed_replacement(base: Mapping[str, Any], value: Mapping[str, Any]) -> list[dict[str, Any]]:
    operations: list[dict[str, Any]] = [
        {"op": "upsert", "key": key, "record": clone(record)}
        for key, record in value.items()
        if key not in base or base[key] != record
    ]
    operations.extend({"op": "delete", "key": key} for key in base if key not in value)
    return operations


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
