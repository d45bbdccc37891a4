"""A committed mutation survives SIGKILL of the postgres-backed service (a real subprocess)."""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import aiohttp

from tolokaforge.db.http_client import HttpStateClient

TOKEN = secrets.token_urlsafe(32)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _start(dsn: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    token_file = log.with_name("db.token")
    if not token_file.exists():
        token_file.write_text(TOKEN)
        token_file.chmod(0o600)
    env = {
        **os.environ,
        "TOLOKAFORGE_DB_STORE": "postgres",
        "TOLOKAFORGE_DB_DSN": dsn,
        "TOLOKAFORGE_DB_TOKEN_FILE": str(token_file),
    }
    with log.open("ab") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "tolokaforge.db.cli", "--port", str(port)],
            env=env,
            stdout=sink,
            stderr=sink,
        )
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {TOKEN}"}) as session:
        for _ in range(300):
            assert process.poll() is None, log.read_text()
            try:
                async with session.get(f"http://127.0.0.1:{port}/health") as response:
                    if response.status == 200:
                        return process
            except aiohttp.ClientConnectionError:
                pass
            await asyncio.sleep(0.05)
    process.kill()
    raise AssertionError("the service did not answer /health")


async def test_a_committed_mutation_survives_kill_9(
    pg_dsn: str, new_trial_id: Callable[[], str], tmp_path: Path
) -> None:
    port = _free_port()
    trial = new_trial_id()
    log = tmp_path / "service.log"
    process = await _start(pg_dsn, port, log)
    try:
        client = HttpStateClient(f"http://127.0.0.1:{port}", token=TOKEN)
        await client.init_trial(trial, {"ledger": [{"n": 0}], "users": {"U-1": {"name": "Mia"}}})
        version = await client.patch(
            trial, [{"table_name": "ledger", "operations": [{"op": "insert", "record": {"n": 1}}]}]
        )
        await client.create_snapshot(trial, "before_kill")
        committed = await client.get_hashes(trial)
        await client.aclose()
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(10)
    assert process.returncode == -signal.SIGKILL

    restarted = await _start(pg_dsn, port, log)
    try:
        client = HttpStateClient(f"http://127.0.0.1:{port}", token=TOKEN)
        state = await client.get_state(trial)
        assert state.version == version == 1
        assert state.tables == {"ledger": [{"n": 0}], "users": {"U-1": {"name": "Mia"}}} | {
            "ledger": [{"n": 0}, {"n": 1}]
        }
        assert await client.get_hashes(trial) == committed
        assert (await client.restore_snapshot(trial, "before_kill")).stable_hash == committed.stable_hash
        await client.aclose()
    finally:
        restarted.terminate()
        restarted.wait(10)
