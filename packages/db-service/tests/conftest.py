"""Fixtures: a PostgreSQL database per session, stores of both kinds, clients of both kinds.

PostgreSQL comes from ``TOLOKAFORGE_TEST_PG_DSN`` (default: the local trust-auth server CI starts with
tools/dev/ensure-postgres). Each session creates a fresh database and drops it at the end, so runs never
see each other's trials. Postgres tests never skip: no server is a failure.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg  # pyright: ignore[reportMissingTypeStubs]
import pytest

from tolokaforge.db.app import create_app
from tolokaforge.db.client import StateClient
from tolokaforge.db.http_client import HttpStateClient
from tolokaforge.db.local_client import LocalStateClient
from tolokaforge.db.memory import MemoryStore
from tolokaforge.db.postgres import PostgresStore
from tolokaforge.db.server import serve_app
from tolokaforge.db.settings import Settings
from tolokaforge.db.spec import ApiSpec
from tolokaforge.db.store import Store

ADMIN_DSN = os.environ.get("TOLOKAFORGE_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
STORES = ["memory", "postgres"]


def with_database(dsn: str, database: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path="/" + database))


async def _admin(sql: str) -> None:
    connect: Any = asyncpg.connect  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    connection: Any = await connect(ADMIN_DSN)
    try:
        await connection.execute(sql)
    finally:
        await connection.close()


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    """A fresh database for this session, dropped afterwards."""
    name = f"tf_db_test_{os.getpid()}_{secrets.token_hex(4)}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    try:
        yield with_database(ADMIN_DSN, name)
    finally:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(scope="session")
def spec() -> ApiSpec:
    return ApiSpec.load()


@pytest.fixture
def new_trial_id() -> Callable[[], str]:
    """Unique trial ids: the postgres database is shared by every test of a session."""
    return lambda: f"task-{uuid.uuid4().hex[:12]}:0"


@pytest.fixture(params=STORES)
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_store(pg_dsn: str) -> Callable[[str], Store]:
    """Unstarted stores by kind."""

    def make(kind: str) -> Store:
        return MemoryStore() if kind == "memory" else PostgresStore(pg_dsn)

    return make


@pytest.fixture
async def store(store_kind: str, make_store: Callable[[str], Store]) -> AsyncIterator[Store]:
    made = make_store(store_kind)
    await made.start()
    yield made
    await made.close()


@pytest.fixture(params=["local", "http"])
async def client(
    request: pytest.FixtureRequest, store_kind: str, make_store: Callable[[str], Store], spec: ApiSpec
) -> AsyncIterator[StateClient]:
    """A StateClient on a fresh store of ``store_kind``: in-process, or over HTTP through uvicorn."""
    store = make_store(store_kind)
    if request.param == "local":
        local = await LocalStateClient.open(store, spec=spec)
        yield local
        await local.aclose()
        await store.close()
        return
    token = secrets.token_urlsafe(32)
    async with serve_app(create_app(Settings(token=token), store=store, spec=spec)) as base_url:
        remote = HttpStateClient(base_url, token=token)
        yield remote
        await remote.aclose()
