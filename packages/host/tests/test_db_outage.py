"""The DB service killed -9 mid-run under a standalone runner, then restarted: ``--resume`` finishes.

Three real processes, as in a deployment: ``tolokaforge-db --store postgres`` (its own database), a
``tolokaforge-runner --db-url`` and this host. The DB service is killed while the first trial is
registered, so the runner cannot delete that trial's state: the host's CleanupTrial runs out of its
transport budget, the run ends with every trial unfinished, and PostgreSQL keeps a row the runner no
longer holds. A runner that renewed every row under its owner id kept that row's lease alive for as
long as it lived, and the resumed registration of the same id was refused ("held by runner-...") on
every try. A runner renews only the trials it holds and deletes what it left behind once the store
answers again (docs/faults.md), so the resumed run, on the same runner, finishes every trial.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg  # pyright: ignore[reportMissingTypeStubs]
import pytest

from tolokaforge.contracts.runner import ToolSchema
from tolokaforge.core.credentials import bearer, new_token, write_token_file
from tolokaforge.core.models import TaskDescription
from tolokaforge.core.transcript import Message
from tolokaforge.host.agents import Agent, GoldenAgentFactory
from tolokaforge.host.packs import load_pack
from tolokaforge.host.run.exit_status import EXIT_OK, EXIT_USAGE, verdict
from tolokaforge.host.run.schedule import RunSettings, run_pack
from tolokaforge.host.turns import AgentTurn
from tolokaforge.host.users.router import UserRouter

ADMIN_DSN = os.environ.get("TOLOKAFORGE_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
LEASE = 20.0
TASKS = ("lookup_order_tracking", "multi_cancel_and_return")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _admin(dsn: str, sql: str) -> list[Any]:
    connect: Any = asyncpg.connect  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    connection: Any = await connect(dsn)
    try:
        return list(await connection.fetch(sql))
    finally:
        await connection.close()


@pytest.fixture
async def database() -> AsyncIterator[str]:
    """A fresh PostgreSQL database for this test's DB service, dropped afterwards."""
    name = f"tf_db_outage_{os.getpid()}_{secrets.token_hex(4)}"
    await _admin(ADMIN_DSN, f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(urlsplit(ADMIN_DSN)._replace(path="/" + name))
    finally:
        await _admin(ADMIN_DSN, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class Services:
    """A ``tolokaforge-db`` (PostgreSQL store, a fixed port so it comes back where it was) and a
    ``tolokaforge-runner`` on it, each a process of its own."""

    def __init__(self, dsn: str, secrets_dir: Path) -> None:
        self.dsn = dsn
        self.db_port = _free_port()
        # each service's token in a file of its own (0600), as an operator would hand them out
        self.db_token, self.db_token_file = new_token(), secrets_dir / "db.token"
        self.runner_token_file = secrets_dir / "runner.token"
        write_token_file(self.db_token_file, self.db_token)
        write_token_file(self.runner_token_file, new_token())
        self.db: subprocess.Popen[bytes] | None = None
        self.runner: subprocess.Popen[str] | None = None
        self.runner_address = ""

    @property
    def db_url(self) -> str:
        return f"http://127.0.0.1:{self.db_port}"

    def start_db(self) -> None:
        self.db = subprocess.Popen(
            [sys.executable, "-c", "from tolokaforge.db.cli import main; raise SystemExit(main())",
             "--store", "postgres", "--dsn", self.dsn, "--port", str(self.db_port),
             "--token-file", str(self.db_token_file)],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        while not self._db_answers():
            assert self.db.poll() is None, "tolokaforge-db exited before it answered"
            time.sleep(0.05)

    def _db_answers(self) -> bool:
        try:
            request = urllib.request.Request(
                self.db_url + "/health", headers={"Authorization": bearer(self.db_token)}
            )
            with urllib.request.urlopen(request, timeout=5) as response:
                return response.status == 200
        except (urllib.error.URLError, ConnectionError):
            return False

    def kill_db(self) -> None:
        """SIGKILL: no shutdown, no goodbye to open connections."""
        if self.db is not None and self.db.poll() is None:
            self.db.send_signal(signal.SIGKILL)
        if self.db is not None:
            self.db.wait(timeout=30)

    def start_runner(self) -> None:
        self.runner = subprocess.Popen(
            [sys.executable, "-c", "from tolokaforge.runner.edge.cli import main; main()", "--port", "0",
             "--token-file", str(self.runner_token_file), "--db-url", self.db_url,
             "--db-token-file", str(self.db_token_file), "--lease", str(LEASE)],
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        assert self.runner.stdout is not None
        line = self.runner.stdout.readline()
        assert "listening on" in line, line
        self.runner_address = line.rsplit(" ", 1)[-1].strip()

    def stop(self) -> None:
        if self.runner is not None:
            if self.runner.poll() is None:
                self.runner.send_signal(signal.SIGTERM)
            self.runner.wait(timeout=60)
            if self.runner.stdout is not None:
                self.runner.stdout.close()
        self.kill_db()


@pytest.fixture
def services(database: str, tmp_path: Path) -> Iterator[Services]:
    made = Services(database, tmp_path / "secrets")
    try:
        yield made
    finally:
        made.stop()


class _KillsOnFirstTurn:
    def __init__(self, inner: Agent, kill: Callable[[], None]) -> None:
        self._inner = inner
        self._kill = kill

    async def next_turn(self, messages: Sequence[Message], tools: Sequence[ToolSchema]) -> AgentTurn:
        self._kill()
        return await self._inner.next_turn(messages, tools)


@dataclasses.dataclass
class KillingAgents:
    """The golden agent, except that the first turn of the run kills the DB service first."""

    kill: Callable[[], None]
    name: str = "golden"
    model: str | None = None
    golden: GoldenAgentFactory = dataclasses.field(default_factory=GoldenAgentFactory)
    killed: bool = False

    def for_trial(self, task: TaskDescription) -> Agent:
        inner = self.golden.for_trial(task)
        if self.killed:
            return inner
        self.killed = True
        return _KillsOnFirstTurn(inner, self.kill)


async def test_db_killed_mid_trial_and_restarted_resume_finishes_on_the_same_runner(
    packs_dir: Path, tmp_path: Path, services: Services
) -> None:
    pack = load_pack(packs_dir / "retail")
    services.start_db()
    services.start_runner()
    settings = RunSettings(
        output=tmp_path / "run",
        task_ids=TASKS,
        trials=1,
        concurrency=1,
        runner=services.runner_address,
        runner_token_file=services.runner_token_file,
        transport_budget_s=1.0,
    )
    first = await run_pack(pack, KillingAgents(services.kill_db), UserRouter(), settings)
    assert [row.kind for row in first.rows] == ["unfinished"] * len(TASKS)
    assert all(row.reason.startswith("infrastructure:") for row in first.rows)
    assert verdict(first).code == EXIT_USAGE  # the infrastructure's failure: exit 2, --resume runs them

    # PostgreSQL (up all along) keeps the state of the trial that was registered at the kill: the
    # runner dropped it when the host cleaned it up, but could not delete it from the store.
    left = await _admin(services.dsn, "SELECT trial_id, owner FROM tf_trials")
    assert len(left) == 1 and str(left[0]["owner"]).startswith("runner-"), left

    services.start_db()  # back on its port, over the same database; the runner never restarted
    assert services.runner is not None and services.runner.poll() is None
    resumed = await run_pack(
        pack, GoldenAgentFactory(), UserRouter(), dataclasses.replace(settings, resume=True)
    )
    assert (resumed.ran, resumed.skipped) == (len(TASKS), 0)
    assert [row.kind for row in resumed.rows] == ["passed"] * len(TASKS)
    assert verdict(resumed).code == EXIT_OK
    assert len(list((tmp_path / "run").glob("trials/*/*/grade.yaml"))) == len(TASKS)
    # every trial was released with its grade: nothing of the run is left in the store
    assert await _admin(services.dsn, "SELECT trial_id FROM tf_trials") == []
