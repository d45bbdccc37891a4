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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from tolokaforge.db import ConflictError, StateClient, StoreUnreachableError

from .cow import CowTables, TableView, apply_changes, clone

__all__ = ["SetAside", "TrialMirror"]


@dataclass(frozen=True, slots=True)
class SetAside:
    """A mirror's tables and views as of ``version``, kept while the mirror works on other state."""

    tables: dict[str, Any]
    views: dict[str, TableView]
    version: int


class TrialMirror:
    """One trial's tables as of ``version``, and the client that persists them."""

    def __init__(self, trial_id: str, client: StateClient, tables: dict[str, Any], version: int) -> None:
        self.trial_id = trial_id
        self.client = client
        self.tables = tables
        self.version = version
        self._views: dict[str, TableView] = {}
        self.stale = False
        """The store may differ from this copy (a write whose reply was lost, a version conflict):
        :meth:`refresh` re-reads it before the next call trusts the copy."""

    @classmethod
    async def create(
        cls,
        trial_id: str,
        client: StateClient,
        tables: Mapping[str, Any],
        *,
        schemas: Sequence[Mapping[str, Any]],
        unstable_fields: Sequence[Mapping[str, Any]],
        owner: str | None = None,
        lease_seconds: float | None = None,
    ) -> TrialMirror:
        """Initialise the trial in the store (claimed by ``owner``) and keep a private copy of its tables."""
        hashes = await client.init_trial(
            trial_id,
            tables,
            schemas=schemas,
            unstable_fields=unstable_fields,
            owner=owner,
            lease_seconds=lease_seconds,
        )
        # The store may keep the objects it was given; the mirror must never share a container with it.
        return cls(
            trial_id, client, {name: _canonical(table) for name, table in tables.items()}, hashes.version
        )

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

    async def commit(self, changes: Sequence[Mapping[str, Any]]) -> None:
        """Persist one call's changes atomically, then apply them to the mirror."""
        if not changes:
            return
        try:
            self.version = await self.client.patch(self.trial_id, changes, expected_version=self.version)
        except StoreUnreachableError as error:
            # The batch may have been applied with only its reply lost: the store is the truth now.
            self.stale = self.stale or error.outcome_unknown
            raise
        except ConflictError as error:
            self.stale = self.stale or "version" in error.details  # someone else moved the trial
            raise
        apply_changes(self.tables, changes)

    async def refresh(self) -> None:
        """Re-read the trial from the store if this copy may be out of step with it."""
        if self.stale:
            await self.reload()

    def set_aside(self) -> SetAside:
        """The mirror as it is now, to :meth:`put_back` once the store is restored to this version.

        The mirror's next :meth:`reload` gives it new objects, so what is set aside stays untouched.
        """
        return SetAside(self.tables, self._views, self.version)

    def put_back(self, saved: SetAside, version: int) -> None:
        """Resume from ``saved``: the store holds that state again (restored), now at ``version``."""
        self.tables, self._views, self.version = saved.tables, saved.views, version

    async def reload(self) -> None:
        """Replace the mirror with the store's current state (after reset, restore, or a foreign write)."""
        state = await self.client.get_state(self.trial_id)
        # Parsed from the store's answer, the tables are new objects already: no copy needed.
        self.tables = {name: _in_key_order(table) for name, table in state.tables.items()}
        self.version = state.version
        self._views = {}
        self.stale = False


def _canonical(table: Any) -> Any:
    """A private copy of a table, a keyed table in key order -- the order the store returns it in.

    So a tool that iterates a keyed table sees the same order at registration as after a reload
    (ResetTrial, grading's replay), and the trial and its golden replay stay comparable.
    """
    return _in_key_order(clone(table))


def _in_key_order(table: Any) -> Any:
    if not isinstance(table, dict):
        return table
    keyed = cast(dict[str, Any], table)
    keys = list(keyed)
    if keys == sorted(keys):
        return keyed
    return {key: keyed[key] for key in sorted(keys)}
