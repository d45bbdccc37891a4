"""The store interface: what the service needs from a backend, whichever one holds the tables.

Inputs arrive validated (names, bodies, record schemas compiled); a store enforces only what needs its
data: existence (404), uniqueness and versions (409), and record schemas after a batch (422). Every
mutating call is atomic and bumps the version by one; calls on one trial serialize.

States leave a store as canonical JSON bytes, ready to hash or to send, so a store never has to rebuild
Python objects to answer a read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tolokaforge.db.operations import TableChange
from tolokaforge.db.record_schemas import RecordValidator
from tolokaforge.db.tables import Table

__all__ = ["Hashes", "Store", "TrialInit"]


@dataclass(frozen=True, slots=True)
class TrialInit:
    """A validated InitRequest: tables built and checked against their record schemas."""

    tables: Mapping[str, Table]
    """The initial tables; for ``from_state``, the held initial state's (see :meth:`Store.initial_tables`)."""
    unstable: Mapping[str, frozenset[str]]
    schemas: Sequence[Mapping[str, Any]]
    """TableSchema objects as sent (a durable store keeps them to rebuild ``validators``)."""
    validators: Mapping[str, RecordValidator]
    owner: str | None = None
    """The runner incarnation owning the trial (None: unowned, never reclaimed)."""
    lease_seconds: float | None = None
    """How long the owner's claim lasts without a renewal (set exactly when ``owner`` is)."""
    from_state: str | None = None
    """The full hash of the held initial state ``tables`` came from (InitRequest.from_state)."""


@dataclass(frozen=True, slots=True)
class Hashes:
    version: int
    stable_hash: str
    full_hash: str


class Store(Protocol):
    """A backend holding every trial's current state, initial state and snapshots."""

    kind: str
    """``memory`` or ``postgres`` (HealthResponse.store)."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def count_trials(self) -> int: ...

    async def init_trial(self, trial_id: str, init: TrialInit) -> Hashes:
        """Create the trial at version 0, replacing one whose lease has expired. ConflictError if it
        exists otherwise (unowned, or under a live lease)."""
        ...

    async def initial_tables(self, full_hash: str) -> Mapping[str, Table]:
        """The tables of an initial state this store holds under its full hash, for InitRequest.from_state.
        NotFoundError (``details.from_state``) when it holds none; a store may hold none at all."""
        ...

    async def read_state(
        self, trial_id: str, *, stable: bool, names: Sequence[str] | None
    ) -> tuple[int, bytes]:
        """``(version, canonical encoding of the tables)``; NotFoundError for an unknown trial or table."""
        ...

    async def hashes(self, trial_id: str) -> Hashes: ...

    async def patch(
        self, trial_id: str, changes: Sequence[TableChange], expected_version: int | None
    ) -> tuple[int, int]:
        """Apply ``changes`` as one batch; ``(new version, operations applied)``."""
        ...

    async def create_snapshot(self, trial_id: str, name: str) -> int:
        """Save the current state; return its version. ConflictError if ``name`` is taken."""
        ...

    async def restore_snapshot(self, trial_id: str, name: str) -> Hashes: ...

    async def delete_snapshot(self, trial_id: str, name: str) -> None: ...

    async def reset(self, trial_id: str) -> Hashes: ...

    async def delete_trial(self, trial_id: str, owner: str | None = None) -> None:
        """Delete the trial. With ``owner``: only if that owner holds it, it is unowned, or its lease
        has expired (ConflictError otherwise, nothing changes)."""
        ...

    async def renew_lease(self, owner: str, trial_ids: Sequence[str] | None = None) -> tuple[int, list[str]]:
        """Extend the lease of every trial ``owner`` holds, or (``trial_ids``) of those of the named
        trials it holds; ``(how many were renewed, the named ids that were not)``. A trial of the owner
        that is not named is left alone: its lease runs out. One atomic step."""
        ...
