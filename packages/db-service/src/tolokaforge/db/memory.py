"""The memory store (the embedded default): immutable trial states, so snapshots are references.

Every method runs without awaiting, so on one event loop each call is atomic and calls on a trial
serialize by construction. A batch builds new tables and swaps them in only when all of it succeeded.
Snapshot, restore and reset swap one reference (and reuse the memoised hashes of the state restored).

Initial states are held by their full hash while any trial starts from one (and the last few after
that), so a trial created ``from_state`` shares its initial state -- tables, chunks, cached encodings
and hashes -- with every other trial of the same task, at a cost independent of the state's size.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cachetools import LRUCache

from tolokaforge.db.errors import ConflictError, NotFoundError, VersionConflictError
from tolokaforge.db.operations import TableChange, apply_changes
from tolokaforge.db.record_schemas import RecordValidator
from tolokaforge.db.state import TrialState
from tolokaforge.db.store import Hashes, TrialInit
from tolokaforge.db.tables import Table

__all__ = ["MemoryStore"]

RECENT_INITIAL_STATES = 4
"""Initial states kept after their last trial is gone, for the next run of the same tasks."""


@dataclass(slots=True)
class _Trial:
    initial: TrialState
    current: TrialState
    validators: dict[str, RecordValidator]
    version: int = 0
    snapshots: dict[str, TrialState] = field(default_factory=dict[str, TrialState])
    owner: str | None = None
    lease_seconds: float = 0.0
    lease_expires: float = 0.0
    """``time.monotonic()`` after which an owned trial is reclaimable."""

    def reclaimable(self, now: float) -> bool:
        return self.owner is not None and now >= self.lease_expires

    def hashes(self) -> Hashes:
        return Hashes(self.version, self.current.stable_hash, self.current.full_hash)


class MemoryStore:
    """Trials in this process's memory; gone when the process ends."""

    kind = "memory"

    def __init__(self) -> None:
        self._trials: dict[str, _Trial] = {}
        # Every initial state a live trial started from, by full hash (and by full hash and unstable
        # fields: those decide the stable hash); plus the few most recent.
        self._initial: weakref.WeakValueDictionary[str, TrialState] = weakref.WeakValueDictionary()
        self._variants: weakref.WeakValueDictionary[_Variant, TrialState] = weakref.WeakValueDictionary()
        self._recent: LRUCache[str, TrialState] = LRUCache(maxsize=RECENT_INITIAL_STATES)

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        self._trials.clear()
        self._recent.clear()

    def _initial_state(self, full_hash: str) -> TrialState:
        state = self._initial.get(full_hash)
        if state is None:
            raise NotFoundError(
                f"no initial state with full hash {full_hash} is held here; send the tables",
                {"from_state": full_hash},
            )
        return state

    def _start(self, full_hash: str, unstable: Mapping[str, frozenset[str]]) -> TrialState:
        """The held initial state under other unstable fields, derived once and shared from then on."""
        variant = (full_hash, _variant(unstable))
        state = self._variants.get(variant)
        if state is None:
            state = self._initial_state(full_hash).with_unstable(unstable)
            self._variants[variant] = state
        return state

    def _hold(self, state: TrialState) -> None:
        full_hash = state.full_hash
        self._initial.setdefault(full_hash, state)
        self._variants.setdefault((full_hash, _variant(state.unstable)), state)
        self._recent[full_hash] = self._initial[full_hash]

    async def initial_tables(self, full_hash: str) -> Mapping[str, Table]:
        return self._initial_state(full_hash).tables

    async def count_trials(self) -> int:
        return len(self._trials)

    def _trial(self, trial_id: str) -> _Trial:
        trial = self._trials.get(trial_id)
        if trial is None:
            raise NotFoundError(f"no trial {trial_id!r}", {"trial_id": trial_id})
        return trial

    async def init_trial(self, trial_id: str, init: TrialInit) -> Hashes:
        now = time.monotonic()
        existing = self._trials.get(trial_id)
        if existing is not None and not existing.reclaimable(now):
            raise ConflictError(
                _held(trial_id, existing, now), {"trial_id": trial_id, "owner": existing.owner}
            )
        if init.from_state is not None:
            state = self._start(init.from_state, init.unstable)
        else:
            state = TrialState(dict(init.tables), dict(init.unstable))
        self._hold(state)
        trial = _Trial(initial=state, current=state, validators=dict(init.validators))
        if init.owner is not None:
            trial.owner, trial.lease_seconds = init.owner, init.lease_seconds or 0.0
            trial.lease_expires = now + trial.lease_seconds
        self._trials[trial_id] = trial
        return trial.hashes()

    async def read_state(
        self, trial_id: str, *, stable: bool, names: Sequence[str] | None
    ) -> tuple[int, bytes]:
        trial = self._trial(trial_id)
        for name in names or ():
            if name not in trial.current.tables:
                raise NotFoundError(f"no table {name!r} in trial {trial_id!r}", {"table_name": name})
        return trial.version, trial.current.encode(stable=stable, names=names)

    async def hashes(self, trial_id: str) -> Hashes:
        return self._trial(trial_id).hashes()

    async def patch(
        self, trial_id: str, changes: Sequence[TableChange], expected_version: int | None
    ) -> tuple[int, int]:
        trial = self._trial(trial_id)
        if expected_version is not None and expected_version != trial.version:
            raise VersionConflictError(
                f"trial {trial_id!r} is at version {trial.version}, not {expected_version}",
                {"version": trial.version, "expected_version": expected_version},
            )
        tables, applied = apply_changes(trial.current.tables.get, changes, trial.validators)
        trial.current = trial.current.replace_tables(tables)
        trial.version += 1
        return trial.version, applied

    async def create_snapshot(self, trial_id: str, name: str) -> int:
        trial = self._trial(trial_id)
        if name in trial.snapshots:
            raise ConflictError(f"snapshot {name!r} exists", {"snapshot_name": name})
        trial.snapshots[name] = trial.current
        return trial.version

    async def restore_snapshot(self, trial_id: str, name: str) -> Hashes:
        trial = self._trial(trial_id)
        snapshot = trial.snapshots.get(name)
        if snapshot is None:
            raise NotFoundError(f"no snapshot {name!r}", {"snapshot_name": name})
        trial.current = snapshot
        trial.version += 1
        return trial.hashes()

    async def delete_snapshot(self, trial_id: str, name: str) -> None:
        trial = self._trial(trial_id)
        if trial.snapshots.pop(name, None) is None:
            raise NotFoundError(f"no snapshot {name!r}", {"snapshot_name": name})

    async def reset(self, trial_id: str) -> Hashes:
        trial = self._trial(trial_id)
        trial.current = trial.initial
        trial.version += 1
        return trial.hashes()

    async def delete_trial(self, trial_id: str, owner: str | None = None) -> None:
        trial = self._trial(trial_id)
        now = time.monotonic()
        if owner is not None and trial.owner not in (None, owner) and not trial.reclaimable(now):
            raise ConflictError(_held(trial_id, trial, now), {"trial_id": trial_id, "owner": trial.owner})
        del self._trials[trial_id]

    async def renew_lease(self, owner: str, trial_ids: Sequence[str] | None = None) -> tuple[int, list[str]]:
        now = time.monotonic()
        held: list[_Trial] = []
        not_renewed: list[str] = []
        if trial_ids is None:
            held = [trial for trial in self._trials.values() if trial.owner == owner]
        else:
            for trial_id in dict.fromkeys(trial_ids):
                trial = self._trials.get(trial_id)
                if trial is not None and trial.owner == owner:
                    held.append(trial)
                else:
                    not_renewed.append(trial_id)
        for trial in held:
            trial.lease_expires = now + trial.lease_seconds
        return len(held), not_renewed


_Variant = tuple[str, frozenset[tuple[str, str]]]


def _variant(unstable: Mapping[str, frozenset[str]]) -> frozenset[tuple[str, str]]:
    return frozenset((table, name) for table, names in unstable.items() for name in names)


def _held(trial_id: str, trial: _Trial, now: float) -> str:
    if trial.owner is None:
        return f"trial {trial_id!r} exists"
    left = trial.lease_expires - now
    return f"trial {trial_id!r} exists, held by {trial.owner!r} (lease expires in {left:.1f}s)"
