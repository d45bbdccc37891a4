"""schemathesis against the live app on both stores: stateless per operation, then stateful sequences.

The server runs in a thread with its own event loop (schemathesis calls it synchronously), on an ephemeral
loopback port. Seeds are fixed and the example database is off, so every run generates the same cases;
``test_fuzz_volume`` (last in this module) asserts the run generated at least 1,000 of them.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest
import schemathesis
from hypothesis import HealthCheck, seed, settings
from schemathesis.config._checks import PositiveDataAcceptanceConfig
from schemathesis.generation.stateful.state_machine import APIStateMachine, StepInput, StepOutput

from tolokaforge.db.app import create_app
from tolokaforge.db.memory import MemoryStore
from tolokaforge.db.postgres import PostgresStore
from tolokaforge.db.server import serve_app
from tolokaforge.db.settings import Settings
from tolokaforge.db.spec import find_spec_file
from tolokaforge.db.store import Store

SEED = 20261129
FUZZ_TOKEN = secrets.token_urlsafe(32)
STATELESS_EXAMPLES = 15
STATEFUL_EXAMPLES = 150  # enough sequences to reach restore and reset whichever path the answers steer
ALL_HEALTH_CHECKS = cast(list[HealthCheck], list(HealthCheck))
CASES: dict[str, int] = {"stateless": 0, "stateful": 0}


class _LiveServer:
    """uvicorn in a daemon thread; ``url`` once it listens, stopped by :meth:`stop`."""

    def __init__(self, make_store: Callable[[], Store]) -> None:
        self.url = ""
        self.store = make_store()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)
        self._thread.start()
        if not self._ready.wait(30) or self._error is not None:
            raise RuntimeError(f"live server did not start: {self._error!r}")

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        try:
            app = create_app(Settings(max_body_bytes=1 << 20, token=FUZZ_TOKEN), store=self.store)
            async with serve_app(app) as url:
                self.url = url
                self._ready.set()
                await self._stop.wait()
        except BaseException as exc:
            self._error = exc
            self._ready.set()

    def wipe(self) -> None:
        """Forget every trial, so a replayed example meets the state its first run met."""

        async def forget() -> None:
            if isinstance(self.store, PostgresStore):
                await self.store.pool.execute("TRUNCATE tf_trials CASCADE")
            else:
                await self.store.close()  # the memory store's close forgets its trials; it stays usable

        assert self._loop is not None
        asyncio.run_coroutine_threadsafe(forget(), self._loop).result(30)

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)


@pytest.fixture(scope="module", params=["memory", "postgres"])
def live(request: pytest.FixtureRequest, pg_dsn: str) -> Iterator[_LiveServer]:
    kind = str(request.param)
    server = _LiveServer(lambda: MemoryStore() if kind == "memory" else PostgresStore(pg_dsn))
    yield server
    server.stop()


@pytest.fixture
def live_url(live: _LiveServer) -> str:
    return live.url


# A schema-valid request may still be refused by the trial's data: a record violating the table's declared
# record schema, a key selector on a list table, an index past the end are 422 by the contract.
ACCEPTED_FOR_VALID_INPUT = ["2XX", "404", "409", "422"]


def _configured(loaded: Any) -> Any:
    # Every request carries the service's token; schemathesis's own ignored_auth check still sends some
    # without it and expects the 401 the contract declares.
    loaded.config.update(headers={"Authorization": f"Bearer {FUZZ_TOKEN}"})
    loaded.config.checks.positive_data_acceptance = PositiveDataAcceptanceConfig(
        expected_statuses=ACCEPTED_FOR_VALID_INPUT
    )
    return loaded


# Loaded from the contract file (parametrize needs it at collection); calls go to the live server's URL.
schema = _configured(schemathesis.openapi.from_path(str(find_spec_file())))  # pyright: ignore[reportUnknownMemberType]


@schema.parametrize()
@seed(SEED)
@settings(
    max_examples=STATELESS_EXAMPLES,
    database=None,
    deadline=None,
    suppress_health_check=ALL_HEALTH_CHECKS,
)
def test_stateless(case: Any, live_url: str) -> None:
    CASES["stateless"] += 1
    case.call_and_validate(base_url=live_url)


def _fit_inserts(operations: Any, *, is_list: bool, key: str) -> None:
    """Keep the first operation only and make it an insert of the shape its table needs.

    Random operations almost never carry exactly one selector each, so without this a sequence would
    reach a successful mutation by luck alone; the record inserted stays random.
    """
    items: list[Any] = cast(list[Any], operations) if isinstance(operations, list) else []
    del items[1:]
    for operation in items:
        if not isinstance(operation, dict):
            continue
        fitted = cast(dict[str, Any], operation)
        fitted.update(op="insert", record=fitted.get("record", {}))
        for extra in ("set", "unset", "index", "where", "key"):
            fitted.pop(extra, None)
        if not is_list:
            fitted["key"] = key


def test_stateful(live: _LiveServer) -> None:
    succeeded: set[str] = set()
    loaded = _configured(schemathesis.openapi.from_url(live.url + "/openapi.json"))
    base: type[APIStateMachine] = loaded.as_state_machine()

    class Machine(base):  # type: ignore[misc, valid-type]
        def setup(self) -> None:
            live.wipe()
            self.shapes: dict[str, dict[str, bool]] = {}
            self.inserts = 0

        def before_call(self, case: Any) -> None:
            # Links carry only the trial id. Steer valid (positive) PATCHes at the tables the trial was
            # created with, drop the (random, so always stale) expected_version and an init's lease, and make the operation an
            # insert of the shape its table needs, so sequences get past "no such table" to real
            # mutations; negative cases and everything else stay random.
            parameters: dict[str, Any] = case.path_parameters or {}
            trial = str(parameters.get("trial_id", ""))
            body: Any = case.body
            label = case.operation.label
            if label == "POST /trials/{trial_id}/init" and isinstance(body, dict):
                tables = cast(dict[str, Any], cast(dict[str, Any], body).get("tables") or {})
                self.shapes.setdefault(trial, {name: isinstance(t, list) for name, t in tables.items()})
            meta: Any = case.meta
            if meta is not None and not meta.generation.mode.is_positive:
                return  # a deliberately invalid request must stay invalid
            if isinstance(body, dict):
                cast(dict[str, Any], body).pop("expected_version", None)
                if label == "POST /trials/{trial_id}/init":
                    # A lease makes a sequence's answers depend on the wall clock (an init of a held
                    # id is 409 until the lease runs out), so the same seed reached restore on a quiet
                    # machine and not on a busy one. Leases have their own tests (test_leases.py).
                    cast(dict[str, Any], body).pop("owner", None)
                    cast(dict[str, Any], body).pop("lease_seconds", None)
            shapes = self.shapes.get(trial)
            if not shapes or not isinstance(body, dict):
                return
            names = sorted(shapes)
            request = cast(dict[str, Any], body)
            self.inserts += 1
            key = f"fuzz-key-{self.inserts}"
            if label == "PATCH /trials/{trial_id}/state":
                changes = [cast(dict[str, Any], c) for c in request.get("changes", []) if isinstance(c, dict)]
                for index, change in enumerate(changes):
                    change["table_name"] = names[index % len(names)]
                    _fit_inserts(change.get("operations", []), is_list=shapes[change["table_name"]], key=key)
            elif label == "PATCH /trials/{trial_id}/state/{table_name}" and case.path_parameters:
                case.path_parameters["table_name"] = names[0]
                _fit_inserts(request.get("operations", []), is_list=shapes[names[0]], key=key)

        def step(self, input: StepInput) -> StepOutput:
            CASES["stateful"] += 1
            output = super().step(input)
            case: Any = input.case  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            if output.response.status_code < 300:
                succeeded.add(str(case.operation.label))
            return output

    Machine.run(
        settings=settings(
            max_examples=STATEFUL_EXAMPLES,
            stateful_step_count=12,
            database=None,
            deadline=None,
            derandomize=True,
            suppress_health_check=ALL_HEALTH_CHECKS,
        )
    )
    # The sequences reached past init: a live trial was mutated, snapshotted, restored, reset, hashed, deleted.
    mutations = {"PATCH /trials/{trial_id}/state", "PATCH /trials/{trial_id}/state/{table_name}"}
    assert mutations & succeeded, succeeded
    assert {
        "POST /trials/{trial_id}/reset",
        "POST /trials/{trial_id}/init",
        "POST /trials/{trial_id}/snapshots/{snapshot_name}",
        "POST /trials/{trial_id}/snapshots/{snapshot_name}/restore",
        "GET /trials/{trial_id}/state/hash",
        "DELETE /trials/{trial_id}",
    } <= succeeded, succeeded


def test_fuzz_volume() -> None:
    total = CASES["stateless"] + CASES["stateful"]
    print(f"schemathesis cases: {CASES}")
    assert total >= 1000, CASES
