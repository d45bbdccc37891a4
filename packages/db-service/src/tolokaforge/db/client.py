"""The one interface the runner uses to reach trial state, whichever way it is served.

Two implementations answer it identically: ``HttpStateClient`` (a DB service over HTTP) and
``LocalStateClient`` (a store in this process, the embedded default). The runner codes against
:class:`StateClient` only and never imports a store.

Payloads are plain JSON-shaped Python (dicts and lists), exactly as the OpenAPI document
``contracts/openapi/db-service.yaml`` defines them, so both clients validate and fail the same way.
Failures raise the :mod:`tolokaforge.db.errors` tree, one class per HTTP error status.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["HealthInfo", "LeaseRenewal", "StateClient", "StateHashes", "VersionedState"]

Tables = dict[str, Any]
"""``{table_name: [record, ...] | {key: record}}``."""


@dataclass(frozen=True, slots=True)
class VersionedState:
    """Tables as of one version of a trial."""

    version: int
    tables: Tables


@dataclass(frozen=True, slots=True)
class StateHashes:
    """The stable hash (unstable fields removed) and the full hash, as of one version."""

    version: int
    stable_hash: str
    full_hash: str


@dataclass(frozen=True, slots=True)
class LeaseRenewal:
    """What a lease renewal did: how many trials it renewed and, of the ones it was asked to renew,
    those it did not (the store holds no such trial, or holds it for another owner)."""

    trials: int
    not_renewed: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class HealthInfo:
    status: str
    store: str
    version: str
    num_trials: int


class StateClient(Protocol):
    """Trial-scoped state operations; see contracts/openapi/db-service.yaml for each one's semantics."""

    async def init_trial(
        self,
        trial_id: str,
        tables: Mapping[str, Any] | None,
        *,
        from_state: str | None = None,
        schemas: Sequence[Mapping[str, Any]] = (),
        unstable_fields: Sequence[Mapping[str, Any]] = (),
        owner: str | None = None,
        lease_seconds: float | None = None,
        parsed_json: bool = False,
    ) -> StateHashes:
        """Create the trial at version 0 from ``tables``, or (``tables`` None) from the initial state the
        store holds under the full hash ``from_state`` (NotFoundError with ``details["from_state"]``
        when it holds none: send the tables). ``schemas`` are TableSchema objects, ``unstable_fields``
        UnstableField objects; ``owner`` and ``lease_seconds`` (together) claim it for one runner
        incarnation. ``parsed_json`` says the tables were parsed from JSON text, so JSON can hold
        them: a client in this process need not encode them to find out. Raises ConflictError when
        the trial exists and is not reclaimable."""
        ...

    async def get_state(
        self, trial_id: str, *, tables: Sequence[str] | None = None, stable: bool = False
    ) -> VersionedState:
        """The current state (``stable``: without unstable fields), optionally only some tables."""
        ...

    async def get_hashes(self, trial_id: str) -> StateHashes: ...

    async def patch(
        self,
        trial_id: str,
        changes: Sequence[Mapping[str, Any]],
        *,
        expected_version: int | None = None,
        parsed_json: bool = False,
    ) -> int:
        """Apply TableChange objects as one atomic batch; return the new version. ``parsed_json``: the
        changes were parsed from JSON text, so an in-process store may take them as they are (the
        records are never changed in place by either side)."""
        ...

    async def create_snapshot(self, trial_id: str, name: str) -> int:
        """Save the current state under ``name``; return the version saved. ConflictError if taken."""
        ...

    async def restore_snapshot(self, trial_id: str, name: str) -> StateHashes: ...

    async def delete_snapshot(self, trial_id: str, name: str) -> None: ...

    async def reset(self, trial_id: str) -> StateHashes: ...

    async def delete_trial(self, trial_id: str, *, owner: str | None = None) -> None:
        """Delete the trial; with ``owner``, ConflictError when another owner's live lease holds it."""
        ...

    async def renew_lease(self, owner: str, trial_ids: Collection[str] | None = None) -> LeaseRenewal:
        """Extend the lease of every trial ``owner`` holds or, with ``trial_ids``, only of those of them
        it holds (at most 10,000 per call): the owner's other trials are left to run out."""
        ...

    async def health(self) -> HealthInfo: ...

    async def aclose(self) -> None: ...
