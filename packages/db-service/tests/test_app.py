"""The app over a real uvicorn server on loopback: routes equal the contract, every error has one body."""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
import yarl
from starlette.routing import Route

from tolokaforge.db.app import DOC_PATHS, create_app
from tolokaforge.db.memory import MemoryStore
from tolokaforge.db.server import serve_app
from tolokaforge.db.settings import Settings
from tolokaforge.db.spec import ApiSpec

MAX_BODY = 4096
TOKEN = secrets.token_urlsafe(32)


@pytest.fixture
async def http(spec: ApiSpec) -> AsyncIterator[tuple[str, aiohttp.ClientSession]]:
    app = create_app(Settings(max_body_bytes=MAX_BODY, token=TOKEN), store=MemoryStore(), spec=spec)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with serve_app(app) as base_url, aiohttp.ClientSession(headers=headers) as session:
        yield base_url, session


Http = tuple[str, aiohttp.ClientSession]


async def _call(http: Http, method: str, path: str, data: bytes | None = None) -> tuple[int, Any]:
    base_url, session = http
    async with session.request(method, base_url + path, data=data) as response:
        body = await response.read()
        assert response.status < 500, body
        if response.status == 204:
            return response.status, None
        assert response.headers["content-type"].startswith("application/"), response.headers
        return response.status, json.loads(body) if body else None


def _is_error(body: Any, code: str) -> bool:
    return set(body) == {"error", "message", "details"} and body["error"] == code


def test_served_routes_are_exactly_the_contracts(spec: ApiSpec) -> None:
    app = create_app(Settings(), store=MemoryStore(), spec=spec)
    served = {
        (method, route.path)
        for route in app.routes
        if isinstance(route, Route) and route.path not in DOC_PATHS
        for method in route.methods or ()
    }
    assert served == spec.operations


async def test_the_contract_is_served_as_is(http: Http, spec: ApiSpec) -> None:
    base_url, session = http
    async with session.get(base_url + "/openapi.yaml") as response:
        assert await response.text() == spec.text
    status, document = await _call(http, "GET", "/openapi.json")
    assert status == 200 and document == spec.document


async def test_health(http: Http) -> None:
    status, body = await _call(http, "GET", "/health")
    assert status == 200 and body["status"] == "healthy" and body["store"] == "memory"


async def test_every_error_status_answers_with_the_error_body(
    http: Http, new_trial_id: Callable[[], str]
) -> None:
    trial = new_trial_id()
    init = json.dumps({"tables": {"t": [{"id": 1}]}}).encode()
    assert (await _call(http, "POST", f"/trials/{trial}/init", init))[0] == 201
    expectations = [
        ("POST", f"/trials/{trial}/init", b"{not json", 400, "bad_request"),
        ("POST", f"/trials/{trial}/init", b"", 400, "bad_request"),
        ("POST", f"/trials/{trial}/init", b'{"tables": {"t": [{"x": NaN}]}}', 400, "bad_request"),
        ("POST", f"/trials/{trial}/init", b'{"tables": {"t": [{"x": 1e999}]}}', 400, "bad_request"),
        ("POST", f"/trials/{trial}/init", b"[" * 100_000, 413, "payload_too_large"),
        ("POST", f"/trials/{trial}/init", init, 409, "conflict"),
        ("POST", f"/trials/{trial}/init", b'{"tables": {}, "extra": 1}', 422, "validation_error"),
        ("POST", f"/trials/{trial}/init", b'{"tables": {"bad-name": []}}', 422, "validation_error"),
        ("GET", "/trials/nope:0/state", None, 404, "not_found"),
        ("GET", f"/trials/{trial}/state?tables=zz", None, 404, "not_found"),
        ("GET", f"/trials/{trial}/state?tables=a%0A", None, 422, "validation_error"),
        ("GET", "/trials/-bad/state", None, 422, "validation_error"),
        ("GET", "/trials/a%2F..%2Fb/state", None, 404, "not_found"),
        ("GET", "/no/such/route", None, 404, "not_found"),
        (
            "PATCH",
            f"/trials/{trial}/state/t",
            b'{"operations": [{"op": "delete", "index": true}]}',
            422,
            "validation_error",
        ),
        (
            "PATCH",
            f"/trials/{trial}/state/t",
            b'{"operations": [{"op": "delete", "index": 9}]}',
            404,
            "not_found",
        ),
        (
            "PATCH",
            f"/trials/{trial}/state",
            b'{"changes": [], "expected_version": 0}',
            422,
            "validation_error",
        ),
        (
            "PATCH",
            f"/trials/{trial}/state/t",
            b'{"operations": [{"op": "delete", "index": 0}], "expected_version": 5}',
            409,
            "conflict",
        ),
        ("POST", f"/trials/{trial}/snapshots/s..x/restore", None, 404, "not_found"),
        ("DELETE", f"/trials/{trial}/snapshots/none", None, 404, "not_found"),
    ]
    for method, path, data, status, code in expectations:
        got, body = await _call(http, method, path, data)
        assert (got, _is_error(body, code)) == (status, True), (
            method,
            path,
            data[:40] if data else None,
            body,
        )
    status, body = await _call(http, "PUT", f"/trials/{trial}/init", init)
    assert status == 405 and set(body) == {"error", "message", "details"}


async def test_a_version_float_with_an_integral_value_is_an_integer(
    http: Http, new_trial_id: Callable[[], str]
) -> None:
    trial = new_trial_id()
    await _call(http, "POST", f"/trials/{trial}/init", b'{"tables": {"t": [{"id": 1}, {"id": 2}]}}')
    patch = b'{"operations": [{"op": "delete", "index": 1.0}], "expected_version": 0.0}'
    status, body = await _call(http, "PATCH", f"/trials/{trial}/state/t", patch)
    assert status == 200 and body == {"trial_id": trial, "version": 1, "applied": 1}


async def test_concrete_paths_win_over_templated_ones_as_in_openapi(
    http: Http, new_trial_id: Callable[[], str]
) -> None:
    trial = new_trial_id()
    await _call(http, "POST", f"/trials/{trial}/init", b'{"tables": {"stable": [], "hash": {}}}')
    insert = b'{"operations": [{"op": "insert", "record": {}}]}'
    base_url, session = http
    async with session.patch(f"{base_url}/trials/{trial}/state/stable", data=insert) as response:
        assert response.status == 405 and response.headers["Allow"] == "GET"
    async with session.options(f"{base_url}/trials/{trial}/state") as response:
        assert response.status == 405 and response.headers["Allow"] == "GET, PATCH"
    change = b'{"changes": [{"table_name": "stable", "operations": [{"op": "insert", "record": {}}]}]}'
    assert (await _call(http, "PATCH", f"/trials/{trial}/state", change))[0] == 200
    status, body = await _call(http, "GET", f"/trials/{trial}/state/stable")
    assert status == 200 and body["tables"] == {"stable": [{}], "hash": {}}


@pytest.mark.parametrize(
    "path",
    ["/health/", "/trials/{trial}/state/", "/trials/{trial}/state/hash/", "/trials/{trial}/%2e%2e%2fstate",
     "/trials/%2e%2e%2f{trial}/state", "/trials/{trial}//state"],
)  # fmt: skip
async def test_no_redirect_every_odd_spelling_answers_the_error_body(
    http: Http, new_trial_id: Callable[[], str], path: str
) -> None:
    base_url, session = http
    trial = new_trial_id()
    url = yarl.URL(base_url + path.format(trial=trial), encoded=True)
    async with session.get(url, allow_redirects=False) as response:
        body = json.loads(await response.read())
        assert response.status in (404, 422), response.status
        assert set(body) == {"error", "message", "details"}
        assert "location" not in response.headers


async def test_the_contract_states_what_record_schemas_it_accepts(spec: ApiSpec) -> None:
    # Two entries for one table and a record_schema that is not a JSON Schema are refused with 422, and
    # the contract says so where a client reads the shape.
    schemas = spec.document["components"]["schemas"]
    assert "422" in schemas["InitRequest"]["properties"]["schemas"]["description"]
    assert "422" in schemas["TableSchema"]["properties"]["record_schema"]["description"]
