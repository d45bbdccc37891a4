"""The runner's in-memory copy of one trial's tables, written through to the state store.

Python tools read and write this mirror through copy-on-write views (cow.py), so a tool call costs
no fetch. Each completed call's changes go to the store as one atomic batch guarded by the version
the mirror was built from; only after the store accepts them does the mirror apply them, so the two
never disagree about a committed call.

The mirror also keeps the trial's working views between calls (:meth:`open_call` /
:meth:`close_call`), so a call into a large table costs what it touches, not the table's size; and
grading sets the whole mirror aside while it replays on fresh state (:meth:`set_aside` /
:meth:`put_back`) instead of reloading it from the store afterwards.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from tolokaforge.db import (
    NotFoundError,
    StateClient,
    StoreUnreachableError,
    VersionConflictError,
)

from .cow import CowTables, TableView, apply_changes, clone

__all__ = ["SetAside", "TrialMirror", "in_key_order"]


@dataclass(frozen=True, slots=True)
class SetAside:
    """A mirror's tables and views as of ``version``, kept while the mirror works on other state."""

    tables: dict[str, Any]
    views: dict[str, TableView]
    version: int
    owned: frozenset[str]


class TrialMirror:
    """One trial's tables as of ``version``, and the client that persists them.

    ``tables`` maps each name to a table object that is either the trial's own or shared -- with the
    task's initial state, which every trial of the task starts from, or with a state set aside. A
    shared table is never changed in place: the first commit touching it copies it (a shallow copy:
    records are never mutated, only replaced), so starting a trial or going back to its initial state
    costs nothing in the state's size.
    """

    def __init__(
        self,
        trial_id: str,
        client: StateClient,
        tables: Mapping[str, Any],
        version: int,
        *,
        owned: Collection[str] = (),
    ) -> None:
        self.trial_id = trial_id
        self.client = client
        self.tables: dict[str, Any] = dict(tables)
        self.version = version
        self._owned: set[str] = set(owned)
        self._views: dict[str, TableView] = {}
        self.stale = False
        """The store may differ from this copy (a write whose reply was lost, a version conflict):
        :meth:`refresh` re-reads it before the next call trusts the copy."""

    @classmethod
    async def create(
        cls,
        trial_id: str,
        client: StateClient,
        initial: Mapping[str, Any],
        *,
        full_hash: str | None,
        schemas: Sequence[Mapping[str, Any]],
        unstable_fields: Sequence[Mapping[str, Any]],
        owner: str | None = None,
        lease_seconds: float | None = None,
        parsed_json: bool = False,
    ) -> TrialMirror:
        """Initialise the trial in the store (claimed by ``owner``) from ``initial``, shared, never changed.

        ``full_hash`` is the initial state's full hash: the store is first asked to start the trial
        from the initial state it holds under that hash (another trial's, of this task or another with
        the same tables), which costs nothing in the state's size; only a store holding none gets the
        tables. ``parsed_json``: they were parsed from JSON text (the store's client may skip checking
        that JSON can hold them).
        """

        async def init(tables: Mapping[str, Any] | None, from_state: str | None) -> int:
            hashes = await client.init_trial(
                trial_id,
                tables,
                from_state=from_state,
                schemas=schemas,
                unstable_fields=unstable_fields,
                owner=owner,
                lease_seconds=lease_seconds,
                parsed_json=parsed_json,
            )
            return hashes.version

        version: int | None = None
        if full_hash is not None:
            with contextlib.suppress(NotFoundError):  # held by none (evicted, another store): send it
                version = await init(None, full_hash)
        if version is None:
            version = await init(initial, None)
        return cls(trial_id, client, initial, version)

    def open_call(self) -> CowTables:
        """The ``data`` for one python tool call (calls on a trial run one at a time)."""
        return CowTables(self.tables, self._views)

    def close_call(self, data: CowTables, *, finished: bool) -> None:
        """End a call opened by :meth:`open_call`, after its commit or failure.

        ``finished`` says the tool's thread has returned. If it has not (the call timed out), the
        thread may still write to its views, so they are dropped and the next call builds new ones.
        """
        if data.views is not self._views:
            return  # the mirror was reloaded meanwhile: those views are gone already
        if finished:
            data.settle()
        else:
            self._views = {}

    async def commit(self, changes: Sequence[Mapping[str, Any]], *, parsed_json: bool = False) -> None:
        """Persist one call's changes atomically, then apply them to the mirror. ``parsed_json``: the
        changes were parsed from JSON text (StateClient.patch)."""
        if not changes:
            return
        try:
            self.version = await self.client.patch(
                self.trial_id, changes, expected_version=self.version, parsed_json=parsed_json
            )
        except StoreUnreachableError as error:
            # The batch may have been applied with only its reply lost: the store is the truth now.
            self.stale = self.stale or error.outcome_unknown
            raise
        except VersionConflictError:
            self.stale = True  # someone else moved the trial
            raise
        for change in changes:
            name = change["table_name"]
            if name not in self._owned:
                self.tables[name] = _own(self.tables[name])
                self._owned.add(name)
        apply_changes(self.tables, changes)

    async def refresh(self) -> None:
        """Re-read the trial from the store if this copy may be out of step with it."""
        if self.stale:
            await self.reload()

    def set_aside(self) -> SetAside:
        """The mirror as it is now, to :meth:`put_back` once the store is restored to this version.

        Until then the mirror works on other tables (:meth:`start_from`, :meth:`reload`), so what is
        set aside stays untouched.
        """
        return SetAside(self.tables, self._views, self.version, frozenset(self._owned))

    def put_back(self, saved: SetAside, version: int) -> None:
        """Resume from ``saved``: the store holds that state again (restored), now at ``version``."""
        self.tables, self._views, self.version = saved.tables, saved.views, version
        self._owned = set(saved.owned)

    def start_from(self, tables: Mapping[str, Any], version: int) -> None:
        """Work on ``tables`` (shared, never changed in place): the store holds them now, at ``version``
        (after a reset to the initial state, or a restore of a state :meth:`share` gave)."""
        self.tables, self._views, self.version = dict(tables), {}, version
        self._owned = set()
        self.stale = False

    def share(self) -> dict[str, Any]:
        """The tables as they are now, to :meth:`start_from` later: from here on they are shared, so the
        next commit touching one copies it first."""
        self._owned.clear()
        return dict(self.tables)

    async def reload(self) -> None:
        """Replace the mirror with the store's current state (after a foreign write, or a lost reply)."""
        state = await self.client.get_state(self.trial_id)
        # Parsed from the store's answer, the tables are new objects already: no copy needed.
        self.tables = {name: in_key_order(table) for name, table in state.tables.items()}
        self._owned = set(self.tables)
        self.version = state.version
        self._views = {}
        self.stale = False


def _own(table: Any) -> Any:
    """A copy of a shared table the mirror may change in place (the records stay shared)."""
    if type(table) is list:
        return list(cast(list[Any], table))
    if type(table) is dict:
        return dict(cast(dict[str, Any], table))
    return clone(table)


def in_key_order(table: Any) -> Any:
    """``table``, a keyed table with its keys sorted -- the order the store returns it in.

    So a tool that iterates a keyed table sees the same order at registration as after a reload, and
    the trial and its golden replay stay comparable.
    """
    if not isinstance(table, dict):
        return table
    keyed = cast(dict[str, Any], table)
    keys = list(keyed)
    if keys == sorted(keys):
        return keyed
    return {key: keyed[key] for key in sorted(keys)}
