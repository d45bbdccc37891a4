"""The working copy of a keyed table: a real ``dict`` a tool edits, kept from call to call.

Like :mod:`.cow_list`: built once per table, records cloned on first read, every touched key tracked,
and :meth:`CowDict.settle` puts back only the touched keys after each call -- in the base's order,
so iterating the view after a call gives the same order as iterating the trial's table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import Any, SupportsIndex

from .clone import ATOMIC, clone

__all__ = ["CowDict"]

# The plain dict's own accessors, bypassing the view's overrides (hot paths: no super() lookup).
_contains: Callable[[dict[str, Any], str], bool] = dict.__contains__  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType, reportAssignmentType]
_get: Callable[[dict[str, Any], str], Any] = dict.__getitem__  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType, reportAssignmentType]
_set: Callable[[dict[str, Any], str, Any], None] = dict.__setitem__  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType, reportAssignmentType]
_keys: Callable[[dict[str, Any]], Iterable[str]] = dict.keys  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType, reportAssignmentType]
_raw_items: Callable[[dict[str, Any]], Iterable[tuple[str, Any]]] = dict.items  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType, reportAssignmentType]
_reversed_keys: Callable[[dict[str, Any]], Iterator[str]] = dict.__reversed__  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType, reportAssignmentType]
_remove: Callable[[dict[str, Any], str], None] = dict.__delitem__  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType, reportAssignmentType]


class CowDict(dict[str, Any]):
    """A keyed table as one tool call sees it; the base mapping is never changed through it."""

    def __init__(self, base: dict[str, Any]) -> None:
        super().__init__(base)
        self.base = base
        self.begin()

    def begin(self) -> None:
        """Start tracking a new call. The view must equal its base (a new view, or after settle)."""
        self._touched: dict[str, bool] = {}  # key -> whether the base had it when the call began
        self._removed: set[str] = set()  # keys deleted at some point during the call

    def _touch(self, key: str) -> None:
        if key not in self._touched:
            self._touched[key] = key in self.base

    def _own(self, key: str) -> Any:
        value = _get(self, key)
        if key not in self._touched:
            self._touched[key] = key in self.base
            if type(value) not in ATOMIC:
                value = clone(value)
                _set(self, key, value)
        return value

    # -- reads hand out clones --------------------------------------------------------------------
    def __getitem__(self, key: str) -> Any:
        return self._own(key)

    def __iter__(self) -> Iterator[str]:
        # Defining __iter__ makes dict(view), {**view} and dict.update(view) go through keys() and
        # __getitem__ (so through the clones) instead of copying the raw records in C.
        return iter(_keys(self))

    def get(self, key: str, default: Any = None) -> Any:  # pyright: ignore[reportIncompatibleMethodOverride]
        return self._own(key) if _contains(self, key) else default

    def values(self) -> list[Any]:  # pyright: ignore[reportIncompatibleMethodOverride]
        return [self._own(key) for key in list(_keys(self))]

    def items(self) -> list[tuple[str, Any]]:  # pyright: ignore[reportIncompatibleMethodOverride]
        return [(key, self._own(key)) for key in list(_keys(self))]

    def copy(self) -> dict[str, Any]:
        return dict(self.items())

    def __copy__(self) -> dict[str, Any]:
        return self.copy()

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return {key: clone(value) for key, value in _raw_items(self)}

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple[Any, ...]:
        return (dict, (self.copy(),))

    def __or__(self, other: Any) -> dict[str, Any]:  # pyright: ignore[reportIncompatibleMethodOverride]
        merged = self.copy()
        merged.update(other)
        return merged

    def __ror__(self, other: Any) -> dict[str, Any]:  # pyright: ignore[reportIncompatibleMethodOverride]
        merged = dict(other)
        merged.update(self.copy())
        return merged

    # -- tracked edits ----------------------------------------------------------------------------
    def __setitem__(self, key: str, value: Any) -> None:
        self._touch(key)
        _set(self, key, value)

    def __delitem__(self, key: str) -> None:
        _remove(self, key)  # raises KeyError exactly as a dict would
        self._touch(key)
        self._removed.add(key)

    def pop(self, key: str, *default: Any) -> Any:  # pyright: ignore[reportIncompatibleMethodOverride]
        if _contains(self, key):
            value = self._own(key)  # the caller gets a copy, never the base's record
            del self[key]
            return value
        if default:
            return default[0]
        raise KeyError(key)

    def popitem(self) -> tuple[str, Any]:
        if not self:
            raise KeyError("popitem(): dictionary is empty")
        key = next(_reversed_keys(self))
        return key, self.pop(key)

    def setdefault(self, key: str, default: Any = None) -> Any:  # pyright: ignore[reportIncompatibleMethodOverride]
        if _contains(self, key):
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
        for key in _keys(self):
            self._touch(key)
            self._removed.add(key)
        super().clear()

    # -- the diff, and back in step with the base --------------------------------------------------
    def _inserted(self) -> int:
        """How many keys were (re)inserted during the call and are still here: the view's last ones."""
        return sum(
            1
            for key, had in self._touched.items()
            if (not had or key in self._removed) and _contains(self, key)
        )

    def _tail(self, mapping: dict[str, Any], count: int) -> list[str]:
        return list(islice(_reversed_keys(mapping), count))[::-1]

    def operations(self) -> list[dict[str, Any]]:
        """TableChange operations (key selectors) that turn the base into this mapping.

        Applied in order to a dict, they also reproduce this view's key order: keys the tool
        (re)inserted are appended in the order it inserted them, as a dict does, after a delete for
        a key the base had that was deleted and added back.
        """
        base = self.base
        operations: list[dict[str, Any]] = []
        for key in sorted(self._touched):
            had = self._touched[key]
            if _contains(self, key):
                if had and key in self._removed:
                    operations.append({"op": "delete", "key": key})
                elif had and base[key] != _get(self, key):
                    operations.append({"op": "upsert", "key": key, "record": _get(self, key)})
            elif had:
                operations.append({"op": "delete", "key": key})
        operations.extend(
            {"op": "upsert", "key": key, "record": _get(self, key)}
            for key in self._tail(self, self._inserted())
        )
        return operations

    def settle(self) -> None:
        """Make the view equal its base again, in the base's order; call after a commit or a failed call."""
        base = self.base
        for key in self._touched:
            if key not in base:
                super().pop(key, None)  # order of the rest is unaffected
        moved = [key for key in self._removed if key in base]
        if moved:
            # After a commit, keys deleted and added back sit at the end of both mappings, in the same
            # order; after a failure the base still has them where they were, and only a rebuild puts
            # them back there (O(table), for a failed call that deleted a record: rare).
            inserted = self._inserted()
            if not all(_contains(self, key) for key in moved) or self._tail(self, inserted) != self._tail(
                base, inserted
            ):
                super().clear()
                super().update(base)
                self.begin()
                return
        for key in self._touched:
            if key in base:
                _set(self, key, base[key])
        self.begin()
