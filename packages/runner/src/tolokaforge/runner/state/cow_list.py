"""The working copy of a list table: a real ``list`` a tool edits, kept from call to call.

Building a list of a table's records costs a pass over every record (each one's reference count is
touched), so the runner builds this view once per table and keeps it in step with the trial's
committed list (its *base*) between calls: :meth:`CowList.settle` puts back, after each call, only
the positions that call touched. Within a call:

- a record is cloned the first time the tool reads it, so in-place edits land on the clone and the
  base's records are never mutated;
- every edit is tracked by position. Inserts and deletes keep two bounds -- positions before
  ``_lo`` are untouched, and so are the last ``_tail`` positions counted from the end -- so the
  diff compares only what lies between them plus the records handed out. An append into a 100k
  record table therefore costs O(1), not a pass over the table;
- an edit whose effect on positions is not tracked (sort, reverse, slice assignment, ``*=``) puts the
  view in *untracked* mode: the diff and the settle then cover the whole table, which is correct
  and O(table).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, SupportsIndex, cast, overload

from .clone import ATOMIC, clone

__all__ = ["CowList", "list_diff"]

# The plain list's own accessors, bypassing the view's overrides (hot paths: no super() lookup).
_get: Callable[[list[Any], Any], Any] = list.__getitem__  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType, reportAssignmentType]
_set: Callable[[list[Any], Any, Any], None] = list.__setitem__  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType, reportAssignmentType]
_raw_copy: Callable[[list[Any]], list[Any]] = list.copy  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType, reportAssignmentType]
_raw_iter: Callable[[list[Any]], Iterator[Any]] = list.__iter__  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType, reportAssignmentType]


class CowList(list[Any]):
    """A list table as one tool call sees it; the base list is never changed through it."""

    def __init__(self, base: list[Any]) -> None:
        super().__init__(base)
        self.base = base
        self.begin()

    def begin(self) -> None:
        """Start tracking a new call. The view must equal its base (a new view, or after settle)."""
        self._owned: set[int] = set()  # positions holding the call's own objects: clones, stored values
        self._structural = False  # an insert or delete happened: positions may have shifted
        self._untracked = False  # an edit the bounds cannot describe happened
        self._lo = 0  # with _structural: positions below it still line up with the base
        self._tail = 0  # with _structural: so do this many positions counted from the end
        self._base_ids: set[int] | None = None

    # -- reads hand out clones --------------------------------------------------------------------
    def _own(self, index: int) -> Any:
        """The record at ``index`` (non-negative, in range), cloned first if it is the base's."""
        item = _get(self, index)
        if type(item) in ATOMIC:
            return item
        if self._untracked:
            # Positions mean nothing any more: recognise the base's records by identity.
            if self._base_ids is None:
                self._base_ids = {id(record) for record in self.base}
            if id(item) not in self._base_ids:
                return item
        elif index in self._owned:
            return item
        item = clone(item)
        _set(self, index, item)
        self._owned.add(index)
        return item

    def _position(self, index: SupportsIndex) -> int:
        position = index.__index__()
        return position + len(self) if position < 0 else position

    @overload
    def __getitem__(self, index: SupportsIndex) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: SupportsIndex | slice) -> Any:
        if isinstance(index, slice):
            return [self._own(i) for i in range(*index.indices(len(self)))]
        _get(self, index)  # raises IndexError exactly as a list would
        return self._own(self._position(index))

    def __iter__(self) -> Iterator[Any]:
        # Re-check the length each step, as a list iterator does, so edits during iteration behave.
        position = 0
        while position < len(self):
            yield self._own(position)
            position += 1

    def __reversed__(self) -> Iterator[Any]:
        position = len(self) - 1
        while position >= 0:
            if position < len(self):
                yield self._own(position)
            position -= 1

    def copy(self) -> list[Any]:
        return list(self)

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [clone(item) for item in _raw_iter(self)]

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple[Any, ...]:
        return (list, (list(self),))

    def __add__(self, other: Iterable[Any]) -> list[Any]:  # pyright: ignore[reportIncompatibleMethodOverride]
        return [*self, *other]

    def __radd__(self, other: Iterable[Any]) -> list[Any]:
        return [*other, *self]

    def __mul__(self, times: SupportsIndex) -> list[Any]:
        return [clone(item) for _ in range(times.__index__()) for item in self]

    __rmul__ = __mul__

    # -- tracked edits ----------------------------------------------------------------------------
    def _shifted(self, at: int, delta: int) -> None:
        """Owned positions from ``at`` on moved by ``delta`` (an insert or delete before them)."""
        if self._owned:
            self._owned = {p + delta if p >= at else p for p in self._owned}

    def _edited_at(self, position: int, after: int) -> None:
        """An insert or delete at ``position``, with ``after`` positions behind it unmoved from the end."""
        if self._structural:
            self._lo = min(self._lo, position)
            self._tail = min(self._tail, after)
        else:
            self._structural, self._lo, self._tail = True, position, after

    def _untrack(self) -> None:
        self._untracked = True

    def __setitem__(self, index: Any, value: Any) -> None:
        if isinstance(index, slice):
            self._untrack()
            _set(self, index, value)
            return
        _set(self, index, value)  # raises IndexError exactly as a list would
        if not self._untracked:
            self._owned.add(self._position(index))

    def insert(self, index: SupportsIndex, value: Any) -> None:
        size = len(self)
        position = min(max(self._position(index), 0), size)
        super().insert(position, value)
        if not self._untracked:
            self._shifted(position, 1)
            self._owned.add(position)
            self._edited_at(position, size - position)

    def append(self, value: Any) -> None:
        self.insert(len(self), value)

    def extend(self, values: Iterable[Any]) -> None:
        items = list(values)  # iterates a view through its clones, never its raw records
        start = len(self)
        super().extend(items)
        if items and not self._untracked:
            self._owned.update(range(start, start + len(items)))
            self._edited_at(start, 0)

    def __iadd__(self, other: Iterable[Any]) -> CowList:  # pyright: ignore[reportIncompatibleMethodOverride]
        self.extend(other)
        return self

    def _delete(self, position: int) -> None:
        size = len(self)
        super().__delitem__(position)
        if not self._untracked:
            self._owned.discard(position)
            self._shifted(position + 1, -1)
            self._edited_at(position, size - 1 - position)

    def __delitem__(self, index: Any) -> None:
        if isinstance(index, slice):
            self._untrack()
            super().__delitem__(cast(slice, index))
            return
        _get(self, index)  # raises IndexError exactly as a list would
        self._delete(self._position(index))

    def pop(self, index: SupportsIndex = -1) -> Any:
        if not self:
            raise IndexError("pop from empty list")
        position = self._position(index)
        if not 0 <= position < len(self):
            raise IndexError("pop index out of range")
        value = self._own(position)  # the caller gets a copy, never the base's record
        self._delete(position)
        return value

    def remove(self, value: Any) -> None:
        try:
            position = self.index(value)
        except ValueError:
            raise ValueError("list.remove(x): x not in list") from None
        self._delete(position)

    def clear(self) -> None:
        super().clear()
        if not self._untracked:
            self._owned = set()
            self._edited_at(0, 0)

    def __imul__(self, times: SupportsIndex) -> CowList:
        self._untrack()
        super().__imul__(times)
        return self

    def sort(self, *, key: Callable[[Any], Any] | None = None, reverse: bool = False) -> None:
        self._untrack()
        super().sort(key=key, reverse=reverse)  # pyright: ignore[reportCallIssue, reportArgumentType]

    def reverse(self) -> None:
        self._untrack()
        super().reverse()

    # -- the diff, and back in step with the base --------------------------------------------------
    def _bounds(self) -> tuple[int, int, int]:
        """(lo, end of the edited middle in this view, end of the edited middle in the base)."""
        return self._lo, len(self) - self._tail, len(self.base) - self._tail

    def operations(self) -> list[dict[str, Any]]:
        """TableChange operations (index selectors, applied in order) that turn the base into this list."""
        base = self.base
        if self._untracked:
            return list_diff(base, _raw_copy(self))
        if not self._structural:
            # Positions line up with the base: only the records handed out or stored can differ.
            return [
                {"op": "upsert", "index": i, "record": _get(self, i)}
                for i in sorted(self._owned)
                if _get(self, i) != base[i]
            ]
        lo, end, base_end = self._bounds()
        operations: list[dict[str, Any]] = []
        # Outside the middle, owned records sit at the base's positions (the suffix counted from the
        # end); upserts there come first, while the base's indexes still hold.
        for i in sorted(self._owned):
            if i < lo or i >= end:
                j = i if i < lo else i - end + base_end
                if _get(self, i) != base[j]:
                    operations.append({"op": "upsert", "index": j, "record": _get(self, i)})
        for operation in list_diff(base[lo:base_end], _get(self, slice(lo, end))):
            operation["index"] += lo
            operations.append(operation)
        return operations

    def settle(self) -> None:
        """Make every position hold its base's record again; call after a commit or a failed call."""
        base = self.base
        if self._untracked:
            _set(self, slice(None), base)
        elif not self._structural:
            for i in self._owned:
                _set(self, i, base[i])
        else:
            lo, end, base_end = self._bounds()
            for i in self._owned:
                if i < lo:
                    _set(self, i, base[i])
                elif i >= end:
                    _set(self, i, base[i - end + base_end])
            _set(self, slice(lo, end), base[lo:base_end])
        self.begin()


def list_diff(base: list[Any], current: list[Any]) -> list[dict[str, Any]]:
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
