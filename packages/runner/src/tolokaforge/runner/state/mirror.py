"""The runner's in-memory copy of one trial's tables, written through to the state store.

Python tools read and write this mirror through copy-on-write views (cow.py), so a tool call costs
no fetch. Each completed call's changes go to the store as one atomic batch guarded by the version
the mirror was built from; only after the store accepts them does the mirror apply them, so the two
never disagree about a committed call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tolokaforge.db.client import StateClient

from .cow import apply_changes, clone

__all__ = ["TrialMirror"]


class TrialMirror:
    """One trial's tables as of ``version``, and the client that persists them."""

    def __init__(self, trial_id: str, client: StateClient, tables: dict[str, Any], version: int) -> None:
        self.trial_id = trial_id
        self.client = client
        self.tables = tables
        self.version = version

    @classmethod
    async def create(
        cls,
        trial_id: str,
        client: StateClient,
        tables: Mapping[str, Any],
        *,
        schemas: Sequence[Mapping[str, Any]],
        unstable_fields: Sequence[Mapping[str, Any]],
    ) -> TrialMirror:
        """Initialise the trial in the store and keep a private copy of its tables."""
        hashes = await client.init_trial(trial_id, tables, schemas=schemas, unstable_fields=unstable_fields)
        # The store may keep the objects it was given; the mirror must never share a container with it.
        return cls(trial_id, client, {name: clone(table) for name, table in tables.items()}, hashes.version)

    async def commit(self, changes: Sequence[Mapping[str, Any]]) -> None:
        """Persist one call's changes atomically, then apply them to the mirror."""
        if not changes:
            return
        self.version = await self.client.patch(self.trial_id, changes, expected_version=self.version)
        apply_changes(self.tables, changes)

    async def reload(self) -> None:
        """Replace the mirror with the store's current state (after reset, restore, or a foreign write)."""
        state = await self.client.get_state(self.trial_id)
        self.tables = {name: clone(table) for name, table in state.tables.items()}
        self.version = state.version
