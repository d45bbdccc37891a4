"""The ASGI app: the contract's routes, the error-handler map and the lifespan, over one Service.

Routes are exactly the OpenAPI document's paths and methods (tests compare them), plus the document
itself at ``/openapi.yaml`` (the file, byte for byte) and ``/openapi.json``. Every error answers with the
contract's ``Error`` body: handlers map the errors.py tree, unknown paths and wrong methods to it.
Bodies are read with a size limit (413) before anything parses them, and a trial's bodies add up
to a write quota (413 too). Every request but the documents' presents the service's token (auth.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Route
from starlette.types import Scope

from tolokaforge.core.credentials import new_token
from tolokaforge.db.auth import TokenGate
from tolokaforge.db.errors import DBServiceError, PayloadTooLargeError
from tolokaforge.db.service import Service
from tolokaforge.db.settings import Settings
from tolokaforge.db.spec import ApiSpec
from tolokaforge.db.store import Store
from tolokaforge.db.wire import dump_body, parse_body

__all__ = ["DOC_PATHS", "create_app", "make_store"]

DOC_PATHS = ("/openapi.yaml", "/openapi.json")
_JSON = "application/json"
Handler = Callable[[Request], Awaitable[Response]]


def make_store(settings: Settings) -> Store:
    """The store ``settings.store`` names (not started: the app's lifespan starts it)."""
    if settings.store == "postgres":
        from tolokaforge.db.postgres import PostgresStore

        if not settings.dsn:
            raise ValueError("the postgres store needs a DSN: there is no default database")
        return PostgresStore(settings.dsn)
    from tolokaforge.db.memory import MemoryStore

    return MemoryStore()


def _json(body: dict[str, Any], status: int = 200) -> Response:
    return Response(dump_body(body), status_code=status, media_type=_JSON)


def _error(exc: DBServiceError, headers: dict[str, str] | None = None) -> Response:
    return Response(dump_body(exc.to_body()), status_code=exc.status, media_type=_JSON, headers=headers)


class _Endpoints:
    """One coroutine per operation: decode the request, call the service, encode the answer."""

    def __init__(self, service: Service, max_body_bytes: int) -> None:
        self.service = service
        self.max_body_bytes = max_body_bytes

    async def _body(self, request: Request) -> Any:
        return parse_body(await self._read(request))

    async def _read(self, request: Request) -> bytes:
        declared = request.headers.get("content-length")
        limit = self.max_body_bytes
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise PayloadTooLargeError(f"the body is over {limit} bytes", {"limit": limit})
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise PayloadTooLargeError(f"the body is over {limit} bytes", {"limit": limit})
            chunks.append(chunk)
        return b"".join(chunks)

    @staticmethod
    def _path(request: Request, name: str) -> str:
        return str(request.path_params[name])

    async def health(self, request: Request) -> Response:
        return _json(await self.service.health())

    async def init_trial(self, request: Request) -> Response:
        body = await self._body(request)
        return _json(await self.service.init_trial(self._path(request, "trial_id"), body), 201)

    async def _state(self, request: Request, stable: bool) -> Response:
        names = request.query_params.getlist("tables") if "tables" in request.query_params else None
        encoded = await self.service.get_state(self._path(request, "trial_id"), stable=stable, tables=names)
        return Response(encoded, media_type=_JSON)

    async def get_state(self, request: Request) -> Response:
        return await self._state(request, stable=False)

    async def get_stable_state(self, request: Request) -> Response:
        return await self._state(request, stable=True)

    async def get_hashes(self, request: Request) -> Response:
        return _json(await self.service.get_hashes(self._path(request, "trial_id")))

    async def patch_state(self, request: Request) -> Response:
        data = await self._read(request)
        trial_id = self._path(request, "trial_id")
        return _json(await self.service.patch_state(trial_id, parse_body(data), size=len(data)))

    async def patch_table(self, request: Request) -> Response:
        data = await self._read(request)
        trial_id, table_name = self._path(request, "trial_id"), self._path(request, "table_name")
        return _json(await self.service.patch_table(trial_id, table_name, parse_body(data), size=len(data)))

    async def create_snapshot(self, request: Request) -> Response:
        names = self._path(request, "trial_id"), self._path(request, "snapshot_name")
        return _json(await self.service.create_snapshot(*names), 201)

    async def delete_snapshot(self, request: Request) -> Response:
        await self.service.delete_snapshot(
            self._path(request, "trial_id"), self._path(request, "snapshot_name")
        )
        return Response(status_code=204)

    async def restore_snapshot(self, request: Request) -> Response:
        names = self._path(request, "trial_id"), self._path(request, "snapshot_name")
        return _json(await self.service.restore_snapshot(*names))

    async def reset(self, request: Request) -> Response:
        return _json(await self.service.reset(self._path(request, "trial_id")))

    async def delete_trial(self, request: Request) -> Response:
        await self.service.delete_trial(self._path(request, "trial_id"), request.query_params.get("owner"))
        return Response(status_code=204)

    async def renew_lease(self, request: Request) -> Response:
        owner, data = self._path(request, "owner"), await self._read(request)
        if not data:  # the body is optional: without one, every trial of the owner is renewed
            return _json(await self.service.renew_lease(owner))
        return _json(await self.service.renew_named_leases(owner, parse_body(data)))


class _ContractRoute(Route):
    """A route matched as OpenAPI matches paths: a concrete path wins over a templated one.

    ``/trials/{id}/state/stable`` is its own path, so PATCH there is a 405, not a PATCH of a table named
    "stable" (such a table is reached through ``PATCH /trials/{id}/state``). Starlette alone would pick
    whichever route matches both path and method.
    """

    def __init__(self, path: str, endpoint: Handler, method: str) -> None:
        super().__init__(path, endpoint, methods=[method])
        # Starlette answers HEAD for every GET route; the contract declares no HEAD, so neither do we.
        if self.methods is not None:
            self.methods.discard("HEAD")
        self.specificity = path.count("{")
        self.shadowed_by: list[re.Pattern[str]] = []

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] == "http" and any(regex.match(scope["path"]) for regex in self.shadowed_by):
            return Match.NONE, {}
        return super().matches(scope)


def _shadow(routes: list[_ContractRoute]) -> None:
    """Tell each templated route which more concrete paths take precedence over it."""
    for route in routes:
        for other in routes:
            if other.specificity < route.specificity and route.path_regex.match(other.path):
                route.shadowed_by.append(other.path_regex)


def _routes(endpoints: _Endpoints, spec: ApiSpec) -> list[BaseRoute]:
    by_path: dict[str, list[tuple[str, Handler]]] = {
        "/health": [("GET", endpoints.health)],
        "/trials/{trial_id}/init": [("POST", endpoints.init_trial)],
        "/trials/{trial_id}": [("DELETE", endpoints.delete_trial)],
        "/trials/{trial_id}/state": [("GET", endpoints.get_state), ("PATCH", endpoints.patch_state)],
        "/trials/{trial_id}/state/stable": [("GET", endpoints.get_stable_state)],
        "/trials/{trial_id}/state/hash": [("GET", endpoints.get_hashes)],
        "/trials/{trial_id}/state/{table_name}": [("PATCH", endpoints.patch_table)],
        "/trials/{trial_id}/snapshots/{snapshot_name}": [
            ("POST", endpoints.create_snapshot),
            ("DELETE", endpoints.delete_snapshot),
        ],
        "/trials/{trial_id}/snapshots/{snapshot_name}/restore": [("POST", endpoints.restore_snapshot)],
        "/trials/{trial_id}/reset": [("POST", endpoints.reset)],
        "/owners/{owner}/lease": [("POST", endpoints.renew_lease)],
    }
    document_json = json.dumps(spec.document).encode("utf-8")
    document_yaml = spec.text.encode("utf-8")

    async def openapi_yaml(request: Request) -> Response:
        return Response(document_yaml, media_type="application/yaml")

    async def openapi_json(request: Request) -> Response:
        return Response(document_json, media_type=_JSON)

    routes = [
        _ContractRoute(path, handler, method) for path, pairs in by_path.items() for method, handler in pairs
    ]
    routes += [
        _ContractRoute(DOC_PATHS[0], openapi_yaml, "GET"),
        _ContractRoute(DOC_PATHS[1], openapi_json, "GET"),
    ]
    _shadow(routes)
    return list[BaseRoute](routes)


def _http_exception_handler(routes: Sequence[BaseRoute]) -> Callable[[Request, Exception], Response]:
    """404 for unknown paths; 405 with ``Allow`` listing every method served at that path."""
    served = [route for route in routes if isinstance(route, _ContractRoute)]

    def handle(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        path = request.url.path
        if exc.status_code == 405:
            matching = [route for route in served if route.path_regex.match(path)]
            most_concrete = min((route.specificity for route in matching), default=0)
            allowed = sorted(
                {m for route in matching if route.specificity == most_concrete for m in route.methods or ()}
            )
            body: dict[str, Any] = {
                "error": "bad_request",
                "message": f"{request.method} is not allowed here",
                "details": {},
            }
            return Response(
                dump_body(body), status_code=405, media_type=_JSON, headers={"Allow": ", ".join(allowed)}
            )
        body = {"error": "not_found", "message": f"no route {path[:200]}", "details": {}}  # pyright: ignore[reportUnknownVariableType]
        return Response(dump_body(body), status_code=404, media_type=_JSON)

    return handle


def _service_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, DBServiceError)
    return _error(exc)


def create_app(
    settings: Settings,
    *,
    store: Store | None = None,
    spec: ApiSpec | None = None,
    extra_routes: Sequence[BaseRoute] = (),
    owns_store: bool = True,
    service: Service | None = None,
) -> Starlette:
    """The app for ``settings``; ``store`` and ``spec`` default to what the settings name. ``service``:
    serve an existing Service (its store, spec and write-quota counts) rather than a new one.

    Requests must present ``settings.token`` (None: a fresh token, kept in ``app.state.token``).
    The lifespan starts the store and closes it, unless ``owns_store`` is false (a store that is already
    started and belongs to someone else). ``extra_routes`` exist for benchmarks (an echo route beside
    the real ones); the service's own routes are always exactly the contract's.
    """
    if service is None:
        spec = spec or ApiSpec.load(settings.spec_path)
        service = Service(store or make_store(settings), spec, max_trial_bytes=settings.max_trial_bytes)
    store, spec = service.store, service.spec
    endpoints = _Endpoints(service, settings.max_body_bytes)
    token = settings.token or new_token()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncGenerator[None, None]:
        if not owns_store:
            yield
            return
        await store.start()
        try:
            yield
        finally:
            await store.close()

    routes = [*_routes(endpoints, spec), *extra_routes]
    app = Starlette(
        routes=routes,
        exception_handlers={HTTPException: _http_exception_handler(routes), DBServiceError: _service_error},
        lifespan=lifespan,
        middleware=[Middleware(TokenGate, token=token, open_paths=frozenset(DOC_PATHS))],
    )
    # No redirect for a trailing slash (or a path that normalises to another route): a 307 carries no
    # Error body, and the contract's paths have exactly one spelling. Such paths answer 404 with one.
    app.router.redirect_slashes = False
    app.state.service = service
    app.state.token = token
    return app
