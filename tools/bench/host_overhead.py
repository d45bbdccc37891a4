"""Benchmark: the host's own CPU per trial, against a runner that answers instantly.

    uv run python tools/bench/host_overhead.py [--pack examples/packs/retail] [--trials 4] [--rounds 3]

First every task of the pack runs once with the golden agent through a recording proxy in front of a
real embedded runner (thread isolation), which keeps each task's RegisterTrial, ExecuteTool and
GradeTrial answers. Then the proxy replays them, with no runner behind it, and two things are timed
against it at concurrency 16, in alternating rounds (medians shown):

* the floor: the recorded request sequence of every trial (RegisterTrial, each ExecuteTool, GradeTrial,
  and CleanupTrial unless the grade released the trial) sent with a bare stub, requests built in
  advance: the gRPC cost of a trial, both ends. A task (and the parts tasks share) travels with a
  round's first trial of it, the later ones name it by digest, as the host does with a real runner
  (the canned runner answers HealthCheck as the recorded one did);
* the host: ``run_pack`` with the golden agent, result files and summary included.

Both rows print trials/s and CPU ms per trial (this process: host, stub and canned servicer). The
difference is what the host itself spends per trial. The last row, for scale, is what building and
encoding a whole TrialSpec per trial costs (the plain RegisterTrial payload, task included, as sent to
a runner that does not take task digests); against a runner that does, the host sends each task once
per run and then only its digest, so a trial pays far less of it.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from grpclib.client import Channel
from grpclib.server import Server

from tolokaforge.contracts.runner import (
    CleanupTrialRequest,
    CleanupTrialResponse,
    ExecuteToolRequest,
    ExecuteToolResponse,
    GradeTrialRequest,
    GradeTrialResponse,
    HealthCheckRequest,
    HealthCheckResponse,
    RegisterTrialRequest,
    RegisterTrialResponse,
    RunnerServiceBase,
    RunnerServiceStub,
)
from tolokaforge.core.credentials import authorize_channel, new_token, write_token_file
from tolokaforge.host import (
    GoldenAgentFactory,
    Pack,
    RunSettings,
    UserRouter,
    build_trial_spec,
    load_pack,
    register_request,
    run_pack,
)
from tolokaforge.runner import RunnerSettings, start_runner

CONCURRENCY = 16


def _task_of(trial_id: str) -> str:
    return trial_id.rpartition(":")[0]  # first attempts only: ``task:index``


@dataclass
class Tape:
    """One task's recorded exchange."""

    register: RegisterTrialResponse | None = None
    register_request: RegisterTrialRequest | None = None
    executes: list[tuple[ExecuteToolRequest, ExecuteToolResponse]] = field(
        default_factory=list[tuple[ExecuteToolRequest, ExecuteToolResponse]]
    )
    grade: tuple[GradeTrialRequest, GradeTrialResponse] | None = None


class CannedRunner(RunnerServiceBase):
    """Records through ``upstream`` while it is set; afterwards answers every call from the tapes."""

    def __init__(self, upstream: RunnerServiceStub) -> None:
        self.upstream: RunnerServiceStub | None = upstream
        self.tapes: dict[str, Tape] = {}
        self._replies: dict[tuple[str, str], ExecuteToolResponse] = {}
        self._health = HealthCheckResponse(status="SERVING", version="canned")
        """The real runner's answer once recorded: the host then sends tasks and parts as it would to it."""

    def stop_recording(self) -> None:
        self.upstream = None
        for task_id, tape in self.tapes.items():
            for request, response in tape.executes:
                self._replies[(task_id, request.call_id)] = response

    async def health_check(self, message: HealthCheckRequest) -> HealthCheckResponse:
        if self.upstream is not None:
            self._health = await self.upstream.health_check(message)
        return self._health

    async def register_trial(self, message: RegisterTrialRequest) -> RegisterTrialResponse:
        task_id = _task_of(message.trial_id)
        if self.upstream is None:
            response = self.tapes[task_id].register
            assert response is not None
            return response
        response = await self.upstream.register_trial(message)
        tape = self.tapes.setdefault(task_id, Tape())
        tape.register, tape.register_request = response, message
        return response

    async def execute_tool(self, message: ExecuteToolRequest) -> ExecuteToolResponse:
        task_id = _task_of(message.trial_id)
        if self.upstream is None:
            return self._replies[(task_id, message.call_id)]
        response = await self.upstream.execute_tool(message)
        self.tapes[task_id].executes.append((message, response))
        return response

    async def grade_trial(self, message: GradeTrialRequest) -> GradeTrialResponse:
        task_id = _task_of(message.trial_id)
        if self.upstream is None:
            recorded = self.tapes[task_id].grade
            assert recorded is not None
            return recorded[1]
        response = await self.upstream.grade_trial(message)
        self.tapes[task_id].grade = (message, response)
        return response

    async def cleanup_trial(self, message: CleanupTrialRequest) -> CleanupTrialResponse:
        if self.upstream is not None:
            return await self.upstream.cleanup_trial(message)
        return CleanupTrialResponse(success=True)


async def _serve(servicer: CannedRunner) -> tuple[Server, str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    server = Server([servicer])
    await server.start(sock=sock)
    return server, f"127.0.0.1:{sock.getsockname()[1]}"


async def _timed(work: Callable[[], Awaitable[int]]) -> tuple[float, float]:
    """(trials/s, CPU ms per trial) of ``work``, which returns how many trials it ran."""
    cpu, wall = time.process_time(), time.perf_counter()
    trials = await work()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return trials / wall, cpu * 1e3 / trials


async def _floor(address: str, token: str, canned: CannedRunner, trials: int) -> int:
    """Every recorded exchange again through a bare stub, ``trials`` times per task, each call carrying
    the token as the host's do."""
    host, port = address.rsplit(":", 1)
    channel = Channel(host, int(port))
    authorize_channel(channel, token)
    stub = RunnerServiceStub(channel)
    tapes = list(canned.tapes.values())
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(tape: Tape, index: int) -> None:
        assert tape.register_request is not None and tape.grade is not None
        request = tape.register_request
        if index > 0:  # as the host: a task and its parts travel with a run's first trial of it only
            request = RegisterTrialRequest(
                trial_id=request.trial_id,
                trial_spec_json=request.trial_spec_json,
                engine_protocol_version=request.engine_protocol_version,
                task_digest=request.task_digest,
                code_digest=request.code_digest,
                tables_digest=request.tables_digest,
            )
        async with gate:
            await stub.register_trial(request)
            for request, _ in tape.executes:
                await stub.execute_tool(request)
            await stub.grade_trial(tape.grade[0])
            if not tape.grade[1].released:  # as the host: no CleanupTrial after a grade that released
                await stub.cleanup_trial(CleanupTrialRequest(trial_id=tape.register_request.trial_id))

    await asyncio.gather(*(one(tape, index) for index in range(trials) for tape in tapes))
    channel.close()
    return trials * len(tapes)


async def _host(address: str, token_file: Path, pack: Pack, trials: int) -> int:
    with tempfile.TemporaryDirectory(prefix="tf-bench-") as scratch:
        summary = await run_pack(
            pack,
            GoldenAgentFactory(),
            UserRouter(),
            RunSettings(
                output=Path(scratch) / "run",
                trials=trials,
                concurrency=CONCURRENCY,
                runner=address,
                runner_token_file=token_file,
            ),
        )
    if summary.pass_rate != 1.0:
        raise SystemExit(f"the replayed run did not pass every trial ({summary.pass_rate:.2f})")
    return summary.ran


def _spec_ms(pack: Pack, trials: int) -> float:
    started = time.process_time()
    for index in range(trials):
        for loaded in pack.tasks:
            register_request(build_trial_spec(loaded.task, run_id="bench", trial_index=index))
    return (time.process_time() - started) * 1e3 / (trials * len(pack.tasks))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pack", type=Path, default=Path("examples/packs/retail"))
    parser.add_argument("--trials", type=int, default=4, help="trials per task in each round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    pack = load_pack(args.pack)
    runner = await start_runner(RunnerSettings(isolation="thread"))
    upstream = runner.channel()
    canned = CannedRunner(RunnerServiceStub(upstream))
    server, address = await _serve(canned)
    # The canned runner checks no token, but the host needs one to call it (and the floor sends it too).
    token = new_token()
    tokens = tempfile.TemporaryDirectory(prefix="tf-bench-token-")
    token_file = Path(tokens.name) / "runner.token"
    write_token_file(token_file, token)
    try:
        await _host(address, token_file, pack, 1)  # the recording run
        canned.stop_recording()
        calls = sum(len(tape.executes) for tape in canned.tapes.values())
        print(
            f"pack {pack.name}: {len(pack.tasks)} tasks x {args.trials} trial(s), golden agent, "
            f"concurrency {CONCURRENCY}, {calls / len(canned.tapes):.1f} tool calls per trial, canned runner"
        )
        floors: list[tuple[float, float]] = []
        hosts: list[tuple[float, float]] = []
        await _floor(address, token, canned, 1)  # warm-up
        for _ in range(args.rounds):
            floors.append(await _timed(lambda: _floor(address, token, canned, args.trials)))
            hosts.append(await _timed(lambda: _host(address, token_file, pack, args.trials)))
        spec = _spec_ms(pack, args.trials)
    finally:
        server.close()
        await server.wait_closed()
        upstream.close()
        await runner.close()
        tokens.cleanup()
    floor_rate, floor_cpu = (statistics.median(row[i] for row in floors) for i in (0, 1))
    host_rate, host_cpu = (statistics.median(row[i] for row in hosts) for i in (0, 1))
    print(f"{'case':<44}{'trials/s':>10}{'CPU ms/trial':>14}")
    print(f"{'floor: bare stub, recorded requests':<44}{floor_rate:>10.1f}{floor_cpu:>14.2f}")
    print(f"{'host: run_pack, golden agent':<44}{host_rate:>10.1f}{host_cpu:>14.2f}")
    print(f"{'  host own (host - floor)':<44}{'':>10}{host_cpu - floor_cpu:>14.2f}")
    print(f"{'  (plain TrialSpec build + encode, per trial)':<44}{'':>10}{spec:>14.2f}")


if __name__ == "__main__":
    asyncio.run(main())
