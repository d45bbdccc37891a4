"""A runner outage mid-run: the trials it hits stay unfinished (never graded), --resume finishes them.

The runner is a real ``tolokaforge-runner`` process, killed with -9 after the first trial is graded and
started again (same port) only once the run has ended. The outage outlasts the host's transport budget
(1 s here; 30 s by default, the issue's "60 s outage"), so every trial it touches runs out of retries.
"""

from __future__ import annotations

import asyncio
import dataclasses
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tolokaforge.core.credentials import new_token, write_token_file
from tolokaforge.host.agents import GoldenAgentFactory
from tolokaforge.host.packs import load_pack
from tolokaforge.host.run.exit_status import EXIT_OK, EXIT_USAGE, verdict
from tolokaforge.host.run.schedule import RunSettings, run_pack
from tolokaforge.host.users.router import UserRouter


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RunnerProcess:
    """A runner process on ``port``, with the same token file at every start."""

    def __init__(self, port: int, token_file: Path) -> None:
        self.port = port
        self.token_file = token_file
        write_token_file(token_file, new_token())
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from tolokaforge.runner.edge.cli import main; main()",
                "--port",
                str(self.port),
                "--token-file",
                str(self.token_file),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        assert "listening on" in self.process.stdout.readline()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        if self.process is not None:
            self.process.wait(timeout=30)
            if self.process.stdout is not None:
                self.process.stdout.close()


@pytest.fixture
def runner_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunnerProcess]:
    made = RunnerProcess(_free_port(), tmp_path_factory.mktemp("tokens") / "runner.token")
    yield made
    made.kill()


async def test_outage_leaves_trials_unfinished_and_resume_finishes_every_one(
    packs_dir: Path, tmp_path: Path, runner_process: RunnerProcess
) -> None:
    pack = load_pack(packs_dir / "dual_control")
    runner_process.start()
    settings = RunSettings(
        output=tmp_path,
        # the pack's tasks that need no judge model
        task_ids=(
            "dc_airplane_mode_no_service",
            "dc_data_addon_purchase",
            "dc_refuse_sim_swap_wrong_pin",
            "dc_roaming_abroad",
        ),
        trials=2,
        concurrency=1,
        runner=f"127.0.0.1:{runner_process.port}",
        runner_token_file=runner_process.token_file,
        transport_budget_s=1.0,
    )

    async def outage() -> None:
        while not list(tmp_path.glob("trials/*/*/grade.yaml")):
            await asyncio.sleep(0.02)
        runner_process.kill()

    killer = asyncio.create_task(outage())
    first = await run_pack(pack, GoldenAgentFactory(), UserRouter(), settings)
    await killer
    kinds = [row.kind for row in first.rows]
    graded = sum(kind == "passed" for kind in kinds)
    unfinished = sum(kind == "unfinished" for kind in kinds)
    assert len(kinds) == 8 and graded >= 1 and unfinished >= 1
    assert graded + unfinished == 8, kinds  # nothing failed, lost or ungradeable: the outage is no verdict
    assert verdict(first).code == EXIT_USAGE  # the infrastructure's failure: exit 2, --resume runs them
    grades = list(tmp_path.glob("trials/*/*/grade.yaml"))
    assert len(grades) == graded  # no grade file for a trial that never ran to its end
    assert all("score: null" not in path.read_text() for path in grades)
    assert all(row.reason.startswith("infrastructure:") for row in first.rows if row.kind == "unfinished")

    runner_process.start()  # back on the same address
    resumed = await run_pack(
        pack, GoldenAgentFactory(), UserRouter(), dataclasses.replace(settings, resume=True)
    )
    assert (resumed.ran, resumed.skipped) == (unfinished, graded)
    assert [row.kind for row in resumed.rows] == ["passed"] * 8
    assert verdict(resumed).code == EXIT_OK
    assert len(list(tmp_path.glob("trials/*/*/grade.yaml"))) == 8
