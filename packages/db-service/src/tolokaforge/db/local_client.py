"""``LocalStateClient``: the StateClient over a store in this process (the embedded default).

It calls the same :class:`~tolokaforge.db.service.Service` the HTTP app calls, and passes every body
through the same JSON encoding the wire does (refusing what JSON cannot hold). So it validates and
fails exactly as the HTTP client does, and the caller's objects and the store's never alias: mutating
what you sent or what you got back cannot change the stored state -- with one exception, for speed:
the records of ``init_trial``'s tables are checked as the wire would check them (unless the caller
parsed them from JSON: ``parsed_json``) but kept, not copied
(a large initial state would otherwise be encoded and parsed again), so they must never change
afterwards. The runner's initial tables never do: they are shared by every trial of a task.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from tolokaforge.db.client import HealthInfo, LeaseRenewal, StateHashes, VersionedState
from tolokaforge.db.memory import MemoryStore
from tolokaforge.db.service import Service
from tolokaforge.db.spec import ApiSpec
from tolokaforge.db.store import Store
from tolokaforge.db.wire import dump_body

__all__ = ["LocalStateClient"]


def _wire(value: Any) -> Any:
    """``value`` as the service would receive it over HTTP: encoded (refusing what JSON cannot hold), then
    parsed back. dump_body only writes finite, valid JSON, so the strict parser's per-number checks
    (parse_body, for bodies from outside) would find nothing here; the plain C parser is exact."""
    return json.loads(dump_body(value))


class LocalStateClient:
    """A StateClient on an in-process store. Create with :meth:`open`; close with :meth:`aclose`."""

    def __init__(self, service: Service, *, owns_store: bool) -> None:
        self._service = service
        self._owns_store = owns_store

    @classmethod
    async def open(cls, store: Store | None = None, *, spec: ApiSpec | None = None) -> LocalStateClient:
        """A client on ``store`` (started here), by default a new memory store closed by :meth:`aclose`."""
        owns = store is None
        store = store or MemoryStore()
        await store.start()
        return cls(Service(store, spec or ApiSpec.load()), owns_store=owns)

    @property
    def service(self) -> Service:
        return self._service

    @contextlib.asynccontextmanager
    async def serve_http(self, *, token: str, uds: Path | None = None) -> AsyncGenerator[str, None]:
        """Serve this client's store as the DB service over HTTP, requests presenting ``token``, on the
        unix socket ``uds`` or else an ephemeral loopback port; yield its base URL. For processes that
        need a URL (MCP servers) while the store lives in this process. The store is not closed when
        serving stops: it still belongs to this client."""
        # Imported here: only the embedded runner that starts an MCP server pays for the HTTP stack.
        from tolokaforge.db.app import create_app
        from tolokaforge.db.server import serve_app
        from tolokaforge.db.settings import Settings

        # The same Service: one write-quota count per trial, whichever door its changes come through.
        app = create_app(Settings(token=token), service=self._service, owns_store=False)
        async with serve_app(app, uds=None if uds is None else str(uds)) as url:
            yield url

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
        body: dict[str, Any] = {"schemas": list(schemas), "unstable_fields": list(unstable_fields)}
        if from_state is not None:
            body["from_state"] = from_state
        if owner is not None or lease_seconds is not None:
            body["owner"], body["lease_seconds"] = owner, lease_seconds
        body = _wire(body)
        if tables is not None:
            if not parsed_json:  # tables parsed from JSON text are JSON by construction
                dump_body(tables)  # refuses what JSON cannot hold, as the wire would
            body["tables"] = dict(tables)
        await self._service.init_trial(trial_id, body)
        return await self.get_hashes(trial_id)

    async def get_state(
        self, trial_id: str, *, tables: Sequence[str] | None = None, stable: bool = False
    ) -> VersionedState:
        names = None if tables is None else list(tables)
        encoded = await self._service.get_state(trial_id, stable=stable, tables=names)
        body = cast(dict[str, Any], json.loads(encoded))  # the store's own canonical encoding
        return VersionedState(version=body["version"], tables=body["tables"])

    async def get_hashes(self, trial_id: str) -> StateHashes:
        body = await self._service.get_hashes(trial_id)
        return StateHashes(body["version"], body["stable_hash"], body["full_hash"])

    async def patch(
        self,
        trial_id: str,
        changes: Sequence[Mapping[str, Any]],
        *,
        expected_version: int | None = None,
        parsed_json: bool = False,
    ) -> int:
        body: dict[str, Any] = {"changes": list(changes)}
        if expected_version is not None:
            body["expected_version"] = expected_version
        # Changes parsed from JSON text are JSON by construction: the round trip would give equal copies.
        # The store validates the body either way, and neither side changes a record in place.
        wire = body if parsed_json else _wire(body)
        return cast(int, (await self._service.patch_state(trial_id, wire))["version"])

    async def patch_table(
        self,
        trial_id: str,
        table_name: str,
        operations: Sequence[Mapping[str, Any]],
        *,
        expected_version: int | None = None,
    ) -> int:
        """PATCH one table (``/state/{table_name}``); return the new version."""
        body: dict[str, Any] = {"operations": list(operations)}
        if expected_version is not None:
            body["expected_version"] = expected_version
        return cast(int, (await self._service.patch_table(trial_id, table_name, _wire(body)))["version"])

    async def create_snapshot(self, trial_id: str, name: str) -> int:
        return cast(int, (await self._service.create_snapshot(trial_id, name))["version"])

    async def restore_snapshot(self, trial_id: str, name: str) -> StateHashes:
        await self._service.restore_snapshot(trial_id, name)
        return await self.get_hashes(trial_id)

    async def delete_snapshot(self, trial_id: str, name: str) -> None:
        await self._service.delete_snapshot(trial_id, name)

    async def reset(self, trial_id: str) -> StateHashes:
        await self._service.reset(trial_id)
        return await self.get_hashes(trial_id)

    async def delete_trial(self, trial_id: str, *, owner: str | None = None) -> None:
        await self._service.delete_trial(trial_id, owner)

    async def renew_lease(self, owner: str, trial_ids: Collection[str] | None = None) -> LeaseRenewal:
        if trial_ids is None:
            return LeaseRenewal(cast(int, (await self._service.renew_lease(owner))["trials"]))
        answer = await self._service.renew_named_leases(owner, {"trial_ids": list(trial_ids)})
        return LeaseRenewal(cast(int, answer["trials"]), tuple(cast(list[str], answer["not_renewed"])))

    async def health(self) -> HealthInfo:
        body = await self._service.health()
        return HealthInfo(body["status"], body["store"], body["version"], body["num_trials"])

    async def aclose(self) -> None:
        if self._owns_store:
            await self._service.store.close()
