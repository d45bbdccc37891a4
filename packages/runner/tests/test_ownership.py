"""Ownership of trial state on a shared PostgreSQL-backed DB service (docs/faults.md).

A runner process killed with -9 leaves its trials in the store under a lease nobody renews; while the
lease lives, another runner can neither register nor clean those ids, and once it runs out it can do
both. A live runner's trial is never touched by another runner, and CleanupTrial answers success only
when the store holds nothing of the trial.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from grpclib.client import Channel

from tolokaforge.contracts.runner import (
    CleanupTrialRequest,
    ExecuteToolRequest,
    ExecutionStatus,
    RegisterTrialRequest,
    RegistrationErrorKind,
    RunnerServiceStub,
)
from tolokaforge.core.credentials import authorize_channel, new_token, write_token_file
from tolokaforge.db import HttpStateClient, NotFoundError
from tolokaforge.db.server import serve_settings
from tolokaforge.db.settings import Settings as DbSettings
from tolokaforge.runner import RunnerSettings, start_runner

LEASE = 2.0


@dataclass(frozen=True)
class DbService:
    url: str
    token: str
    token_file: Path


@pytest.fixture
async def db(runner_pg_dsn: str, tmp_path: Path) -> AsyncIterator[DbService]:
    token = new_token()
    token_file = tmp_path / "db.token"
    write_token_file(token_file, token)
    async with serve_settings(DbSettings(store="postgres", dsn=runner_pg_dsn, port=0, token=token)) as url:
        yield DbService(url, token, token_file)


def _start_runner_process(db: DbService, token_file: Path) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-c", "from tolokaforge.runner.edge.cli import main; main()", "--port", "0",
         "--token-file", str(token_file), "--db-url", db.url, "--db-token-file", str(db.token_file),
         "--lease", str(LEASE)],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert process.stdout is not None
    line = process.stdout.readline()
    assert "listening on" in line, line
    return process, line.rsplit(" ", 1)[-1].strip()


async def _execute(stub: RunnerServiceStub, trial_id: str, call_id: str) -> Any:
    return await stub.execute_tool(
        ExecuteToolRequest(
            trial_id=trial_id,
            tool_name="set_status",
            arguments_json='{"order_id": "O-1", "status": "paid"}',
            executor="agent",
            call_id=call_id,
        )
    )


async def test_killed_runners_trials_are_reclaimed_and_a_live_runners_are_not(
    db: DbService,
    tmp_path: Path,
    spec_factory: Callable[..., dict[str, Any]],
    request_for: Callable[..., RegisterTrialRequest],
) -> None:
    ids = [f"owned-{os.getpid()}:{i}" for i in range(3)]
    runner_token = new_token()
    write_token_file(tmp_path / "runner.token", runner_token)
    process, address = _start_runner_process(db, tmp_path / "runner.token")
    try:
        host, port = address.rsplit(":", 1)
        channel = Channel(host, int(port))
        authorize_channel(channel, runner_token)
        doomed = RunnerServiceStub(channel)
        for trial_id in ids:
            assert (await doomed.register_trial(request_for(spec_factory(trial_id)))).success
            assert (await _execute(doomed, trial_id, "c1")).status == ExecutionStatus.SUCCESS
        channel.close()
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        if process.stdout is not None:
            process.stdout.close()
    killed_at = time.monotonic()

    store = HttpStateClient(db.url, token=db.token)
    live_id = f"live-{os.getpid()}:0"
    async with (
        start_runner_ctx(db, lease=30.0) as other,
        start_runner_ctx(db, lease=30.0) as live,
    ):
        assert (await live.register_trial(request_for(spec_factory(live_id)))).success
        # the orphans are still under the dead runner's lease: refused, retryable, nothing changed
        early = await other.register_trial(request_for(spec_factory(ids[0])))
        if time.monotonic() - killed_at < LEASE:
            assert not early.success
            assert early.error_kind == RegistrationErrorKind.STATE_STORE and early.retryable
            assert "held by" in early.error
        # a live runner's trial: another runner's cleanup refuses it and leaves it working
        refused = await other.cleanup_trial(CleanupTrialRequest(trial_id=live_id))
        assert not refused.success and "held by" in refused.error
        assert (await _execute(live, live_id, "c1")).status == ExecutionStatus.SUCCESS

        await asyncio.sleep(max(0.0, LEASE + 0.5 - (time.monotonic() - killed_at)))
        # the lease ran out: cleanup from a runner that never registered them deletes the state ...
        for trial_id in ids[:2]:
            assert (await other.cleanup_trial(CleanupTrialRequest(trial_id=trial_id))).success
            with pytest.raises(NotFoundError):
                await store.get_hashes(trial_id)
        # ... and every id registers again, fresh, then cleans up to nothing
        for trial_id in ids:
            registered = await other.register_trial(request_for(spec_factory(trial_id)))
            assert registered.success, registered.error
            state = await store.get_state(trial_id)
            assert state.version == 0 and state.tables["orders"][0]["status"] == "open"
            assert (await other.cleanup_trial(CleanupTrialRequest(trial_id=trial_id))).success
            assert (await other.cleanup_trial(CleanupTrialRequest(trial_id=trial_id))).success  # idempotent
            with pytest.raises(NotFoundError):
                await store.get_hashes(trial_id)
        assert (await live.cleanup_trial(CleanupTrialRequest(trial_id=live_id))).success
    await store.aclose()


class start_runner_ctx:
    """An in-process runner on the DB service, yielding a stub."""

    def __init__(self, db: DbService, *, lease: float) -> None:
        self.settings = RunnerSettings(db_url=db.url, db_token=db.token, lease_seconds=lease)

    async def __aenter__(self) -> RunnerServiceStub:
        self.handle = await start_runner(self.settings)
        self.channel = self.handle.channel()
        return RunnerServiceStub(self.channel)

    async def __aexit__(self, *exc: object) -> None:
        self.channel.close()
        await self.handle.close()
