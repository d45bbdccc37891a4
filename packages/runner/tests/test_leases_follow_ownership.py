"""A runner renews the leases of the trials it holds, and of nothing else (docs/faults.md).

A trial the runner dropped while the DB service was down (CleanupTrial could not delete its state) is
never renewed: the runner deletes it once the service answers again, or before registering the same
id again. State under the runner's owner id that it never learned of (an init whose answer was lost)
is not renewed either, so its lease runs out and another runner can reclaim the id. The DB service is
real (uvicorn on loopback, PostgreSQL), stopped and started again on the same port.
"""

from __future__ import annotations

import asyncio
import secrets
import socket
from collections.abc import Callable
from typing import Any

import pytest
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from tolokaforge.contracts.runner import (
    CleanupTrialRequest,
    ExecuteToolRequest,
    ExecuteToolResponse,
    ExecutionStatus,
    RegisterTrialRequest,
    RunnerServiceStub,
)
from tolokaforge.core.credentials import new_token
from tolokaforge.db import ConflictError, HttpStateClient, NotFoundError
from tolokaforge.db.server import serve_settings
from tolokaforge.db.settings import Settings as DbSettings
from tolokaforge.runner import RunnerHandle, RunnerSettings, start_runner

LEASE = 2.0
TABLES = {"accounts": [{"id": "A-1"}]}
DB_TOKEN = new_token()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ids(*names: str) -> list[str]:
    tag = secrets.token_hex(4)  # the database is shared by the session's tests
    return [f"{name}-{tag}:0" for name in names]


async def _execute(stub: RunnerServiceStub, trial_id: str) -> ExecuteToolResponse:
    return await stub.execute_tool(
        ExecuteToolRequest(
            trial_id=trial_id,
            tool_name="set_status",
            arguments_json='{"order_id": "O-1", "status": "paid"}',
            executor="agent",
            call_id="c1",
        )
    )


def _db(dsn: str, port: int = 0) -> DbSettings:
    return DbSettings(store="postgres", dsn=dsn, port=port, token=DB_TOKEN)


class _Runner:
    """An in-process runner on the DB service at ``db_url``, reached over gRPC."""

    def __init__(self, db_url: str) -> None:
        self.db_url = db_url

    async def __aenter__(self) -> tuple[RunnerHandle, RunnerServiceStub]:
        settings = RunnerSettings(db_url=self.db_url, db_token=DB_TOKEN, lease_seconds=LEASE)
        self.handle = await start_runner(settings)
        self.channel = self.handle.channel()
        return self.handle, RunnerServiceStub(self.channel)

    async def __aexit__(self, *exc: object) -> None:
        self.channel.close()
        await self.handle.close()


async def test_trials_dropped_while_the_store_was_down_are_deleted_when_it_is_back(
    runner_pg_dsn: str,
    spec_factory: Callable[..., dict[str, Any]],
    request_for: Callable[..., RegisterTrialRequest],
) -> None:
    settings = _db(runner_pg_dsn, _free_port())
    kept, dropped, again = _ids("kept", "dropped", "again")
    first = serve_settings(settings)
    db_up = True
    db_url = await first.__aenter__()
    try:
        async with _Runner(db_url) as (handle, stub):
            registry = handle.servicer.runner.registry
            for trial_id in (kept, dropped, again):
                registered = await stub.register_trial(request_for(spec_factory(trial_id)))
                assert registered.success, registered.error
            await first.__aexit__(None, None, None)
            db_up = False
            # the DB service is down: CleanupTrial cannot delete the state, though the runner forgets the trial
            for trial_id in (dropped, again):
                with pytest.raises(GRPCError) as raised:
                    await stub.cleanup_trial(CleanupTrialRequest(trial_id=trial_id))
                assert raised.value.status == Status.UNAVAILABLE
            assert registry.trial_ids() == [kept]
            assert registry.left_behind() == {dropped, again}

            async with serve_settings(settings) as db_url:  # back on its port, over the same database
                store = HttpStateClient(db_url, token=DB_TOKEN)
                # registering a dropped id again works at once: what the runner left is deleted first
                registered = await stub.register_trial(request_for(spec_factory(again)))
                assert registered.success, registered.error
                assert (await store.get_state(again)).version == 0
                # the renewals delete the rest of what was left, and keep renewing the trials held
                async with asyncio.timeout(30):  # a guard against hanging, not a measurement
                    while registry.left_behind():
                        await asyncio.sleep(0.05)
                with pytest.raises(NotFoundError):
                    await store.get_hashes(dropped)
                assert (await _execute(stub, kept)).status == ExecutionStatus.SUCCESS
                with pytest.raises(ConflictError, match=registry.owner):
                    await store.init_trial(kept, TABLES, owner="runner-other", lease_seconds=LEASE)
                for trial_id in (kept, again):
                    assert (await stub.cleanup_trial(CleanupTrialRequest(trial_id=trial_id))).success
                await store.aclose()
    finally:
        if db_up:
            await first.__aexit__(None, None, None)


async def test_state_under_the_runners_owner_that_it_does_not_hold_runs_out_with_its_lease(
    runner_pg_dsn: str,
    spec_factory: Callable[..., dict[str, Any]],
    request_for: Callable[..., RegisterTrialRequest],
) -> None:
    kept, stray = _ids("kept", "stray")
    async with (
        serve_settings(_db(runner_pg_dsn)) as db_url,
        _Runner(db_url) as (handle, stub),
    ):
        store = HttpStateClient(db_url, token=DB_TOKEN)
        owner = handle.servicer.runner.registry.owner
        assert (await stub.register_trial(request_for(spec_factory(kept)))).success
        # as an init of this runner's that landed after it had given up waiting for the answer
        await store.init_trial(stray, TABLES, owner=owner, lease_seconds=LEASE)
        await asyncio.sleep(LEASE + 1.0)  # the runner renews its lease some four times meanwhile
        reclaimed = await store.init_trial(stray, TABLES, owner="runner-other", lease_seconds=30)
        assert reclaimed.version == 0
        with pytest.raises(ConflictError, match=owner):  # the trial it holds stayed its own
            await store.init_trial(kept, TABLES, owner="runner-other", lease_seconds=30)
        assert (await _execute(stub, kept)).status == ExecutionStatus.SUCCESS
        assert (await stub.cleanup_trial(CleanupTrialRequest(trial_id=kept))).success
        await store.delete_trial(stray, owner="runner-other")
        await store.aclose()


async def test_an_id_this_runner_holds_in_the_store_but_not_here_registers_at_once(
    runner_pg_dsn: str,
    spec_factory: Callable[..., dict[str, Any]],
    request_for: Callable[..., RegisterTrialRequest],
) -> None:
    (trial_id,) = _ids("orphan")
    async with (
        serve_settings(_db(runner_pg_dsn)) as db_url,
        _Runner(db_url) as (handle, stub),
    ):
        store = HttpStateClient(db_url, token=DB_TOKEN)
        # an init of this runner's whose answer was lost: the store holds the id for it, live
        await store.init_trial(
            trial_id, TABLES, owner=handle.servicer.runner.registry.owner, lease_seconds=30
        )
        registered = await stub.register_trial(request_for(spec_factory(trial_id)))
        assert registered.success, registered.error
        state = await store.get_state(trial_id)
        assert state.version == 0 and state.tables["orders"][0]["status"] == "open"
        assert (await stub.cleanup_trial(CleanupTrialRequest(trial_id=trial_id))).success
        with pytest.raises(NotFoundError):
            await store.get_hashes(trial_id)
        await store.aclose()
