"""``HttpStateClient``: the StateClient over HTTP, on aiohttp.

aiohttp, not httpx: measured here against the same uvicorn app (tools/bench/db_store.py prints it),
aiohttp keeps its throughput with many requests in flight where httpx.AsyncClient falls by an order of
magnitude. One session (one connection pool) per client; share the client between tasks.

Error answers map back to the errors.py class of their status, so code catches the same exceptions
whichever client it holds. Transport failures (refused connection, timeout, a lost reply) raise StoreUnreachableError.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Collection, Mapping, Sequence
from typing import Any, cast
from urllib.parse import quote

import aiohttp

from tolokaforge.core.credentials import bearer
from tolokaforge.db.client import HealthInfo, LeaseRenewal, StateHashes, VersionedState
from tolokaforge.db.errors import (
    BadRequestError,
    ConflictError,
    DBServiceError,
    ForbiddenError,
    NotFoundError,
    PayloadTooLargeError,
    StoreUnreachableError,
    UnauthorizedError,
    ValidationFailedError,
    VersionConflictError,
)
from tolokaforge.db.spec import ApiSpec
from tolokaforge.db.wire import dump_body

__all__ = ["HttpStateClient"]

_BY_STATUS: dict[int, type[DBServiceError]] = {
    cls.status: cls
    for cls in (
        BadRequestError,
        UnauthorizedError,
        ForbiddenError,
        NotFoundError,
        ConflictError,
        PayloadTooLargeError,
        ValidationFailedError,
    )
}
_JSON_HEADERS = {"Content-Type": "application/json"}


def _error(status: int, body: bytes) -> DBServiceError:
    try:
        decoded = cast(dict[str, Any], json.loads(body))
        message = str(decoded.get("message", ""))
        details = cast(dict[str, Any], decoded.get("details") or {})
    except (ValueError, AttributeError, TypeError):
        message, details = body[:200].decode("utf-8", "replace"), {}
    cls = _BY_STATUS.get(status, DBServiceError)
    if cls is ConflictError and "expected_version" in details:
        cls = VersionConflictError
    return cls(
        message or f"HTTP {status}", {**details, "status": status} if cls is DBServiceError else details
    )


class HttpStateClient:
    """A StateClient for a DB service at ``base_url`` (e.g. ``http://127.0.0.1:8765``), presenting
    ``token`` (the service's, docs/services.md) on every request."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None,
        ssl_context: ssl.SSLContext | None = None,
        session: aiohttp.ClientSession | None = None,
        timeout_s: float = 60.0,
        max_connections: int = 100,
    ) -> None:
        self._base = base_url.rstrip("/")
        self._owns_session = session is None
        self._session = session or aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=max_connections, ssl=ssl_context or True),
            timeout=aiohttp.ClientTimeout(total=timeout_s),
        )
        authorization = {} if token is None else {"Authorization": bearer(token)}
        self._headers = authorization
        self._json_headers = {**_JSON_HEADERS, **authorization}

    async def _call(self, method: str, path: str, body: Any = None, params: Any = None) -> Any:
        data = None if body is None else dump_body(body)
        try:
            async with self._session.request(
                method,
                self._base + path,
                data=data,
                params=params,
                headers=self._json_headers if data is not None else self._headers,
            ) as response:
                payload = await response.read()
        except aiohttp.ClientConnectorError as error:
            # Never connected: the request was not sent, so nothing of it can have been applied.
            raise StoreUnreachableError(
                f"the DB service at {self._base} is unreachable: {error}",
                {"method": method, "path": path},
                outcome_unknown=False,
            ) from error
        except (aiohttp.ClientError, TimeoutError) as error:
            raise StoreUnreachableError(
                f"no answer from the DB service at {self._base} to {method} {path}: "
                f"{type(error).__name__}: {error}",
                {"method": method, "path": path},
                outcome_unknown=True,
            ) from error
        if response.status >= 400:
            raise _error(response.status, payload)
        return json.loads(payload) if payload else None

    @staticmethod
    def _name(schema: str, value: str, what: str) -> str:
        """A name bound for the URL path, checked by the contract's own pattern before it is sent: a ``/``
        or ``..`` would change which route it reaches, so it fails here with the service's own 422."""
        ApiSpec.load().check_name(schema, value, what)
        return value

    @staticmethod
    def _trial(trial_id: str) -> str:
        return "/trials/" + quote(HttpStateClient._name("TrialId", trial_id, "trial_id"), safe="")

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
        """Create the trial; the full hash comes from a second request (TrialInfo carries the stable one).
        ``parsed_json`` changes nothing here: the tables are encoded to be sent anyway."""
        body: dict[str, Any] = {"schemas": list(schemas), "unstable_fields": list(unstable_fields)}
        if tables is not None:
            body["tables"] = tables
        if from_state is not None:
            body["from_state"] = from_state
        if owner is not None or lease_seconds is not None:
            body["owner"], body["lease_seconds"] = owner, lease_seconds
        await self._call("POST", self._trial(trial_id) + "/init", body)
        return await self.get_hashes(trial_id)

    async def get_state(
        self, trial_id: str, *, tables: Sequence[str] | None = None, stable: bool = False
    ) -> VersionedState:
        params = (
            None
            if tables is None
            else [("tables", self._name("TableName", name, "table_name")) for name in tables]
        )
        path = self._trial(trial_id) + ("/state/stable" if stable else "/state")
        body = cast(dict[str, Any], await self._call("GET", path, params=params))
        return VersionedState(version=body["version"], tables=body["tables"])

    async def get_hashes(self, trial_id: str) -> StateHashes:
        body = cast(dict[str, Any], await self._call("GET", self._trial(trial_id) + "/state/hash"))
        return StateHashes(body["version"], body["stable_hash"], body["full_hash"])

    async def patch(
        self,
        trial_id: str,
        changes: Sequence[Mapping[str, Any]],
        *,
        expected_version: int | None = None,
        parsed_json: bool = False,  # the wire encodes them anyway
    ) -> int:
        body: dict[str, Any] = {"changes": list(changes)}
        if expected_version is not None:
            body["expected_version"] = expected_version
        answer = cast(dict[str, Any], await self._call("PATCH", self._trial(trial_id) + "/state", body))
        return cast(int, answer["version"])

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
        path = self._trial(trial_id) + "/state/" + self._name("TableName", table_name, "table_name")
        return cast(int, cast(dict[str, Any], await self._call("PATCH", path, body))["version"])

    def _snapshot(self, trial_id: str, name: str) -> str:
        return (
            self._trial(trial_id)
            + "/snapshots/"
            + quote(self._name("SnapshotName", name, "snapshot_name"), safe="")
        )

    async def create_snapshot(self, trial_id: str, name: str) -> int:
        answer = cast(dict[str, Any], await self._call("POST", self._snapshot(trial_id, name)))
        return cast(int, answer["version"])

    async def restore_snapshot(self, trial_id: str, name: str) -> StateHashes:
        await self._call("POST", self._snapshot(trial_id, name) + "/restore")
        return await self.get_hashes(trial_id)

    async def delete_snapshot(self, trial_id: str, name: str) -> None:
        await self._call("DELETE", self._snapshot(trial_id, name))

    async def reset(self, trial_id: str) -> StateHashes:
        await self._call("POST", self._trial(trial_id) + "/reset")
        return await self.get_hashes(trial_id)

    async def delete_trial(self, trial_id: str, *, owner: str | None = None) -> None:
        params = None if owner is None else {"owner": self._name("OwnerId", owner, "owner")}
        await self._call("DELETE", self._trial(trial_id), params=params)

    async def renew_lease(self, owner: str, trial_ids: Collection[str] | None = None) -> LeaseRenewal:
        path = "/owners/" + quote(self._name("OwnerId", owner, "owner"), safe="") + "/lease"
        body = None if trial_ids is None else {"trial_ids": list(trial_ids)}
        answer = cast(dict[str, Any], await self._call("POST", path, body))
        return LeaseRenewal(answer["trials"], tuple(answer.get("not_renewed", ())))

    async def health(self) -> HealthInfo:
        body = cast(dict[str, Any], await self._call("GET", "/health"))
        return HealthInfo(body["status"], body["store"], body["version"], body["num_trials"])

    async def aclose(self) -> None:
        if self._owns_session:
            await self._session.close()
