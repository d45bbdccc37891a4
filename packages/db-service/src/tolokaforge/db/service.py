"""The DB service's operations, transport-neutral: validate, call the store, shape the answer.

The ASGI app and the in-process client both call this one class, so a request is validated and fails
the same way whichever way it arrives. Checks run in a fixed order: names in the path (422), the body
against its contract schema (422), then the store (404 / 409 / 422).

Answers are the contract's response objects as plain dicts, except the state reads, which are returned
as ready-encoded JSON bytes (the store's canonical encoding, which is valid JSON) to avoid re-encoding.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any, cast

from tolokaforge.db.errors import PayloadTooLargeError, ValidationFailedError
from tolokaforge.db.init_check import InitCheck
from tolokaforge.db.operations import TableChange
from tolokaforge.db.patch_check import PatchCheck
from tolokaforge.db.record_schemas import compile_schemas
from tolokaforge.db.spec import ApiSpec
from tolokaforge.db.store import Hashes, Store, TrialInit
from tolokaforge.db.tables import Record, build_table

MAX_TRIAL_BYTES = 128 * 1024 * 1024
"""A trial's write quota: the bytes of changes it may be sent after its init. With the cap on one
request, it bounds the state one trial can grow to (a state is never larger than what was written
into it), counted from the request's bytes at no extra cost per request."""

__all__ = ["Service"]

_MAX_TABLE_FILTER = 256
_MAX_CHECKED = 1024


def _package_version() -> str:
    try:
        return version("tolokaforge-db")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0+unknown"


class Service:
    """One store behind the contract's operations."""

    def __init__(self, store: Store, spec: ApiSpec, *, max_trial_bytes: int = MAX_TRIAL_BYTES) -> None:
        self.store = store
        self.spec = spec
        self.max_trial_bytes = max_trial_bytes
        self._written: dict[str, int] = {}
        """Bytes of changes each trial was sent since its init (its write quota's count). The count is
        this process's: a durable store's trial starts a fresh count in a new service process."""
        self.version = _package_version()
        self._init_check = InitCheck(spec)
        self._patch_check = PatchCheck(spec)
        # (initial state's full hash, record schemas) already checked: a trial created from_state with
        # the same schemas as an earlier one needs no pass over its records.
        self._checked: set[tuple[str, str]] = set()

    def _trial_id(self, trial_id: str) -> None:
        self.spec.check_name("TrialId", trial_id, "trial_id")

    def _table_name(self, name: str) -> None:
        self.spec.check_name("TableName", name, "table_name")

    async def health(self) -> dict[str, Any]:
        return {
            "status": "healthy",
            "store": self.store.kind,
            "version": self.version,
            "num_trials": await self.store.count_trials(),
        }

    async def init_trial(self, trial_id: str, body: Any) -> dict[str, Any]:
        self._trial_id(trial_id)
        self._init_check.validate(body)
        request = cast(dict[str, Any], body)
        from_state = cast(str | None, request.get("from_state"))
        if from_state is not None:
            tables = dict(await self.store.initial_tables(from_state))
        else:
            raw_tables = cast(dict[str, Any], request["tables"])
            for name in raw_tables:
                self._table_name(name)
            tables = {name: build_table(value) for name, value in raw_tables.items()}
        schemas = cast(list[dict[str, Any]], request.get("schemas", []))
        validators = compile_schemas(schemas)
        checked = None if from_state is None else (from_state, json.dumps(schemas, sort_keys=True))
        if checked not in self._checked:
            for name, validator in validators.items():
                # A schema (like an unstable field) naming a table this trial lacks is inert: no batch
                # can create a table, so it never meets a record.
                table = tables.get(name)
                if table is not None:
                    validator.check((record for _, record in table.located()), context="init")
        if checked is not None:
            if len(self._checked) >= _MAX_CHECKED:
                self._checked.clear()
            self._checked.add(checked)
        unstable: dict[str, set[str]] = {}
        for name in validators:
            self._table_name(name)
        for spec in cast(list[dict[str, str]], request.get("unstable_fields", [])):
            self._table_name(spec["table_name"])
            unstable.setdefault(spec["table_name"], set()).add(spec["field_name"])
        lease = request.get("lease_seconds")
        init = TrialInit(
            tables=tables,
            unstable={name: frozenset(fields) for name, fields in unstable.items()},
            schemas=schemas,
            validators=validators,
            owner=cast(str | None, request.get("owner")),
            lease_seconds=None if lease is None else float(lease),
            from_state=from_state,
        )
        hashes = await self.store.init_trial(trial_id, init)
        self._written.pop(trial_id, None)  # a new trial under this id: a fresh quota
        return {
            "trial_id": trial_id,
            "version": hashes.version,
            "tables": sorted(tables),
            "stable_hash": hashes.stable_hash,
        }

    async def get_state(self, trial_id: str, *, stable: bool, tables: Sequence[str] | None) -> bytes:
        """The StateResponse body, encoded."""
        self._trial_id(trial_id)
        if tables is not None:
            if len(tables) > _MAX_TABLE_FILTER:
                raise ValidationFailedError(f"at most {_MAX_TABLE_FILTER} tables per request")
            for name in tables:
                self._table_name(name)
            tables = list(dict.fromkeys(tables))
        version, encoded = await self.store.read_state(trial_id, stable=stable, names=tables)
        # trial_id matched the TrialId pattern: plain ASCII, nothing to escape.
        return b'{"trial_id":"%s","version":%d,"tables":%s}' % (trial_id.encode(), version, encoded)

    async def get_hashes(self, trial_id: str) -> dict[str, Any]:
        self._trial_id(trial_id)
        hashes = await self.store.hashes(trial_id)
        return {
            "trial_id": trial_id,
            "version": hashes.version,
            "stable_hash": hashes.stable_hash,
            "full_hash": hashes.full_hash,
        }

    async def patch_table(
        self, trial_id: str, table_name: str, body: Any, *, size: int | None = None
    ) -> dict[str, Any]:
        """``size``: the body's bytes when it came encoded (None: measured here), for the write quota."""
        self._trial_id(trial_id)
        self._table_name(table_name)
        self._patch_check.validate("TablePatchRequest", body)
        request = cast(dict[str, Any], body)
        change = TableChange(table_name, cast(list[Record], request["operations"]))
        return await self._patch(
            trial_id, [change], cast(int | None, request.get("expected_version")), _size(body, size)
        )

    async def patch_state(self, trial_id: str, body: Any, *, size: int | None = None) -> dict[str, Any]:
        """``size``: the body's bytes when it came encoded (None: measured here), for the write quota."""
        self._trial_id(trial_id)
        self._patch_check.validate("StatePatchRequest", body)
        request = cast(dict[str, Any], body)
        changes: list[TableChange] = []
        for change in cast(list[Mapping[str, Any]], request["changes"]):
            self._table_name(cast(str, change["table_name"]))
            changes.append(TableChange(cast(str, change["table_name"]), change["operations"]))
        return await self._patch(
            trial_id, changes, cast(int | None, request.get("expected_version")), _size(body, size)
        )

    async def _patch(
        self, trial_id: str, changes: Sequence[TableChange], expected_version: int | None, size: int
    ) -> dict[str, Any]:
        used = self._written.get(trial_id, 0) + size
        if used > self.max_trial_bytes:  # refused before anything is applied
            raise PayloadTooLargeError(
                f"trial {trial_id!r} is over its write quota of {self.max_trial_bytes} bytes of changes",
                {"limit": self.max_trial_bytes, "trial_id": trial_id},
            )
        # JSON Schema counts 3.0 as an integer; the store compares versions as ints.
        expected = None if expected_version is None else int(expected_version)
        for change in changes:
            for operation in change.operations:
                if "index" in operation:
                    cast(dict[str, Any], operation)["index"] = int(operation["index"])
        # Reserved before the store awaits, so concurrent patches of one trial see each other's bytes;
        # given back if the batch is refused (an unknown trial or a refused batch costs nothing).
        self._written[trial_id] = used
        try:
            new_version, applied = await self.store.patch(trial_id, changes, expected)
        except BaseException:
            left = self._written.get(trial_id, 0) - size
            if left > 0:
                self._written[trial_id] = left
            else:
                self._written.pop(trial_id, None)
            raise
        return {"trial_id": trial_id, "version": new_version, "applied": applied}

    def _names(self, trial_id: str, snapshot_name: str) -> None:
        self._trial_id(trial_id)
        self.spec.check_name("SnapshotName", snapshot_name, "snapshot_name")

    async def create_snapshot(self, trial_id: str, snapshot_name: str) -> dict[str, Any]:
        self._names(trial_id, snapshot_name)
        saved = await self.store.create_snapshot(trial_id, snapshot_name)
        return {"trial_id": trial_id, "snapshot_name": snapshot_name, "version": saved}

    async def restore_snapshot(self, trial_id: str, snapshot_name: str) -> dict[str, Any]:
        self._names(trial_id, snapshot_name)
        return _state_version(trial_id, await self.store.restore_snapshot(trial_id, snapshot_name))

    async def delete_snapshot(self, trial_id: str, snapshot_name: str) -> None:
        self._names(trial_id, snapshot_name)
        await self.store.delete_snapshot(trial_id, snapshot_name)

    async def reset(self, trial_id: str) -> dict[str, Any]:
        self._trial_id(trial_id)
        return _state_version(trial_id, await self.store.reset(trial_id))

    async def delete_trial(self, trial_id: str, owner: str | None = None) -> None:
        self._trial_id(trial_id)
        if owner is not None:
            self.spec.check_name("OwnerId", owner, "owner")
        await self.store.delete_trial(trial_id, owner)
        self._written.pop(trial_id, None)

    async def renew_lease(self, owner: str) -> dict[str, Any]:
        """LeaseInfo, after renewing every trial ``owner`` holds (a request without a body)."""
        self.spec.check_name("OwnerId", owner, "owner")
        renewed, _ = await self.store.renew_lease(owner)
        return {"owner": owner, "trials": renewed}

    async def renew_named_leases(self, owner: str, body: Any) -> dict[str, Any]:
        """LeaseInfo, after renewing those of the trials a LeaseRequest names that ``owner`` holds."""
        self.spec.check_name("OwnerId", owner, "owner")
        self.spec.validate("LeaseRequest", body)
        named = cast(list[str], cast(dict[str, Any], body)["trial_ids"])
        renewed, not_renewed = await self.store.renew_lease(owner, named)
        return {"owner": owner, "trials": renewed, "not_renewed": not_renewed}


def _state_version(trial_id: str, hashes: Hashes) -> dict[str, Any]:
    return {"trial_id": trial_id, "version": hashes.version, "stable_hash": hashes.stable_hash}


def _size(body: Any, size: int | None) -> int:
    """A patch body's bytes: as received, or encoded once here (the in-process client's changes; the
    cost of encoding what changed, never the state)."""
    return size if size is not None else len(json.dumps(body, separators=(",", ":"), default=str))
