"""Limits at the runner's gRPC edge, against a real ``tolokaforge-runner`` process (docs/faults.md).

* a request declaring 1 GiB is refused (RESOURCE_EXHAUSTED) on its length, long before it is buffered,
  and the runner's memory returns to its baseline;
* an upload abandoned half-way fails DEADLINE_EXCEEDED after the receive timeout and frees its stream;
* 1,100 silent sockets (more than the process may hold open) do not lock a new client out: idle
  connections are closed.
"""

from __future__ import annotations

import asyncio
import resource
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h2.exceptions
import psutil
import pytest
from grpclib.client import Channel
from grpclib.const import Cardinality, Status
from grpclib.exceptions import GRPCError, StreamTerminatedError

from tolokaforge.contracts.runner import HealthCheckRequest, RunnerServiceStub
from tolokaforge.core.credentials import authorize_channel, new_token, write_token_file

from .test_fuzz_rpc import SERVICE, RawCodec

GIB = 1 << 30
MIB = 1 << 20


class RunnerProcess:
    def __init__(self, *args: str, token_file: Path, max_files: int | None = None) -> None:
        def limit_files() -> None:
            if max_files is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (max_files, max_files))

        self.token = new_token()
        write_token_file(token_file, self.token)
        self.process = subprocess.Popen(
            [sys.executable, "-c", "from tolokaforge.runner.edge.cli import main; main()", "--port", "0",
             "--token-file", str(token_file), *args],
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=limit_files,
        )  # fmt: skip
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert "listening on" in line, line
        self.port = int(line.rsplit(":", 1)[-1])
        self.ps = psutil.Process(self.process.pid)

    def channel(self, *, codec: Any = None) -> Channel:
        """A channel to this runner whose every call carries its token."""
        channel = Channel("127.0.0.1", self.port, codec=codec)
        authorize_channel(channel, self.token)
        return channel

    def rss(self) -> int:
        return int(self.ps.memory_info().rss)

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(timeout=30)
        if self.process.stdout is not None:
            self.process.stdout.close()


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Any]:
    made: list[RunnerProcess] = []

    def start(*args: str, max_files: int | None = None) -> RunnerProcess:
        token_file = tmp_path / f"runner-{len(made)}.token"
        made.append(RunnerProcess(*args, token_file=token_file, max_files=max_files))
        return made[-1]

    yield start
    for runner in made:
        runner.stop()


async def _upload(
    runner: RunnerProcess, declared: int, send: int, *, then_wait: float = 30.0
) -> tuple[Status, int]:
    """Open RegisterTrial, declare a ``declared``-byte message, send up to ``send`` bytes of it in 1 MiB
    chunks, and return the call's status and how many bytes went out before the runner stopped it."""
    channel = runner.channel(codec=RawCodec())
    sent = 0
    status = Status.OK
    try:
        async with channel.request(
            SERVICE + "RegisterTrial", Cardinality.UNARY_UNARY, bytes, bytes
        ) as stream:
            await stream.send_request()
            raw: Any = getattr(stream, "_stream")  # noqa: B009 -- grpclib offers no partial-message send
            await raw.send_data(struct.pack(">?I", False, declared))
            chunk = bytes(MIB)
            try:
                while sent < send:
                    await asyncio.wait_for(raw.send_data(chunk), timeout=3)
                    sent += len(chunk)
            except (TimeoutError, StreamTerminatedError, ConnectionError, h2.exceptions.StreamClosedError):
                pass  # the runner stopped reading: refused, or the window closed behind a reset stream
            await asyncio.wait_for(stream.recv_initial_metadata(), timeout=then_wait)
            await stream.recv_message()
    except GRPCError as error:
        status = error.status
    finally:
        channel.close()
    return status, sent


async def test_a_one_gib_request_is_refused_on_its_length_and_memory_returns(spawn: Any) -> None:
    runner = spawn()
    baseline = runner.rss()
    status, sent = await _upload(runner, declared=GIB - 1, send=GIB)
    assert status == Status.RESOURCE_EXHAUSTED
    assert sent < 256 * MIB  # refused long before the body could have been buffered
    await asyncio.sleep(0.5)
    assert runner.rss() < baseline + 48 * MIB, (baseline, runner.rss())
    # and the runner still serves
    channel = runner.channel()
    assert (await RunnerServiceStub(channel).health_check(HealthCheckRequest())).version
    channel.close()


async def test_an_abandoned_upload_times_out_and_is_freed(spawn: Any) -> None:
    runner = spawn("--receive-timeout", "1")
    baseline = runner.rss()
    status, sent = await _upload(runner, declared=48 * MIB, send=8 * MIB)  # then goes quiet
    assert status == Status.DEADLINE_EXCEEDED and sent == 8 * MIB
    await asyncio.sleep(0.5)
    assert runner.rss() < baseline + 48 * MIB, (baseline, runner.rss())


async def test_eleven_hundred_idle_sockets_do_not_lock_out_a_new_client(spawn: Any) -> None:
    # The runner may hold 1,024 files: without an idle timeout, 1,100 silent sockets take them all.
    runner = spawn("--idle-timeout", "1", max_files=1024)
    idle: list[socket.socket] = []
    try:
        for _ in range(1100):
            sock = socket.create_connection(("127.0.0.1", runner.port))
            sock.setblocking(False)
            idle.append(sock)
        started = time.monotonic()
        channel = runner.channel()
        health = await asyncio.wait_for(RunnerServiceStub(channel).health_check(HealthCheckRequest()), 60)
        channel.close()
        assert health.status
        # every silent socket is closed by the runner itself, the last ones accepted after a backlog wait
        open_ones = list(idle)
        deadline = time.monotonic() + 30
        while open_ones and time.monotonic() < deadline:
            open_ones = [sock for sock in open_ones if not _closed_by_peer(sock)]
            await asyncio.sleep(0.2)
        assert not open_ones, len(open_ones)
        assert time.monotonic() - started < 60
    finally:
        for sock in idle:
            sock.close()


def _closed_by_peer(sock: socket.socket) -> bool:
    """True once the runner closed it (its HTTP/2 preface and GOAWAY arrive before the FIN)."""
    try:
        while sock.recv(65536):
            pass
    except BlockingIOError:
        return False
    except ConnectionError:
        return True
    return True


async def test_a_channel_closed_for_idleness_reconnects_on_its_next_call() -> None:
    from tolokaforge.runner import EdgeLimits, RunnerSettings, start_runner

    handle = await start_runner(RunnerSettings(edge=EdgeLimits(idle_timeout_s=0.3)))
    channel = handle.channel()
    stub = RunnerServiceStub(channel)
    try:
        for _ in range(3):  # each call comes after the runner closed the idle connection
            assert (await stub.health_check(HealthCheckRequest())).status
            await asyncio.sleep(0.8)
    finally:
        channel.close()
        await handle.close()
