"""Benchmark: what authenticating every call costs an ExecuteTool round trip.

    uv run python tools/bench/auth_cost.py [--calls 3000] [--rounds 5]

Every runner call carries its token: the client adds ``authorization`` metadata (a grpclib
SendRequest listener, ``tolokaforge.core.credentials.authorize_channel``) and the runner's edge parses
and compares it in constant time. The runner cannot be served without that check, so its cost is
measured where nothing else moves: a bare grpclib echo of ExecuteTool served twice, plain and with
the same two steps (the same core functions the edge calls), in alternating rounds; the difference,
in CPU per call (client and server share this process, so its CPU is both ends, whatever else the
machine runs) and in p50 latency, is the cost of auth. It is quoted against a real runner's
ExecuteTool of a trivial python tool in trusted mode (auth on, as always; the cheapest runner call),
measured in the same rounds: the goal is auth at most 5 % of that call.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import tempfile
import textwrap
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NamedTuple

import grpclib.const
from grpclib.client import Channel
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Server

from tolokaforge.contracts.runner import (
    ExecuteToolRequest,
    ExecuteToolResponse,
    ExecutionStatus,
    RegisterTrialRequest,
    RunnerServiceBase,
    RunnerServiceStub,
)
from tolokaforge.core.credentials import authorize_channel, new_token, presented_token, token_matches
from tolokaforge.core.protocol import ENGINE_PROTOCOL_VERSION
from tolokaforge.runner import RunnerSettings, start_runner

TOOLS = textwrap.dedent(
    """
    from typing import Any

    class Ping:
        @staticmethod
        def invoke(data: dict[str, Any], text: str) -> str:
            return text
    """
)


class Figures(NamedTuple):
    rate: float
    """calls/s"""
    p50: float
    """ms"""
    cpu: float
    """this process's CPU per call, µs: both ends live in it"""


class Echo(RunnerServiceBase):
    """ExecuteTool answered at once; with ``token``, every call's token is checked as the runner does."""

    def __init__(self, token: str | None) -> None:
        self.token = token

    async def execute_tool(self, message: ExecuteToolRequest) -> ExecuteToolResponse:
        return ExecuteToolResponse(status=ExecutionStatus.SUCCESS, output="ok")

    def __mapping__(self) -> dict[str, grpclib.const.Handler]:
        mapping = super().__mapping__()
        token = self.token
        if token is None:
            return mapping
        checked: dict[str, grpclib.const.Handler] = {}
        for path, handler in mapping.items():
            entry: Any = handler
            func, cardinality, request_type, reply_type = entry

            async def guarded(stream: Any, func: Any = func) -> None:
                presented = presented_token(stream.metadata.get("authorization"))
                if presented is None or not token_matches(presented, token):
                    raise GRPCError(Status.UNAUTHENTICATED, "no")
                await func(stream)

            checked[path] = grpclib.const.Handler(guarded, cardinality, request_type, reply_type)
        return checked


async def _measure(trials: int, calls: int, call: Callable[[int, int], Awaitable[None]]) -> Figures:
    latencies: list[float] = []

    async def loop(trial: int) -> None:
        for n in range(calls // trials):
            started = time.perf_counter()
            await call(trial, n)
            latencies.append(time.perf_counter() - started)

    busy = time.process_time()
    started = time.perf_counter()
    await asyncio.gather(*(loop(t) for t in range(trials)))
    elapsed = time.perf_counter() - started
    busy = time.process_time() - busy
    return Figures(len(latencies) / elapsed, statistics.median(latencies) * 1e3, busy / len(latencies) * 1e6)


def _request(trial: int, n: int) -> ExecuteToolRequest:
    return ExecuteToolRequest(
        trial_id=f"t:{trial}",
        tool_name="ping",
        arguments_json='{"text": "hi"}',
        executor="agent",
        call_id=f"c{n}",
    )


async def _echo(trials: int, calls: int, *, auth: bool) -> Figures:
    token = new_token() if auth else None
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    server = Server([Echo(token)])
    await server.start(sock=sock)
    channel = Channel("127.0.0.1", sock.getsockname()[1])
    if token is not None:
        authorize_channel(channel, token)
    stub = RunnerServiceStub(channel)

    async def call(trial: int, n: int) -> None:
        await stub.execute_tool(_request(trial, n))

    try:
        await _measure(trials, min(calls, 300), call)
        return await _measure(trials, calls, call)
    finally:
        channel.close()
        server.close()
        await server.wait_closed()


async def _runner(trials: int, calls: int, code: Path) -> Figures:
    # Trusted mode: the tool runs on the runner's threads, so the whole call is this process's CPU
    # and the cheapest a runner call gets -- the denominator that makes auth's share look largest.
    handle = await start_runner(RunnerSettings(isolation="thread"))
    channel = handle.channel()
    stub = RunnerServiceStub(channel)
    tool = {
        "name": "ping",
        "parameters": {"type": "object"},
        "source": {"module_path": "tools", "class_name": "Ping"},
    }
    try:
        for trial in range(trials):
            spec = {
                "trial_id": f"t:{trial}",
                "task": {"task_id": "bench", "agent_tools": [tool], "tool_code": {"path": str(code)}},
            }
            answer = await stub.register_trial(
                RegisterTrialRequest(
                    trial_id=f"t:{trial}",
                    trial_spec_json=json.dumps(spec),
                    engine_protocol_version=ENGINE_PROTOCOL_VERSION,
                )
            )
            assert answer.success, answer.error

        async def call(trial: int, n: int) -> None:
            result = await stub.execute_tool(_request(trial, n))
            assert result.status == ExecutionStatus.SUCCESS, result.error_message

        await _measure(trials, min(calls, 300), call)
        return await _measure(trials, calls, call)
    finally:
        channel.close()
        await handle.close()


def _median(rows: list[Figures]) -> Figures:
    return Figures(*(statistics.median(row[i] for row in rows) for i in range(len(Figures._fields))))


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        code = Path(tmp)
        (code / "tools.py").write_text(TOOLS)
        print(
            f"{'trials':<8}{'echo plain µs/p50':>20}{'echo auth µs/p50':>20}{'auth µs':>9}{'runner µs/p50':>16}{'auth share':>12}"
        )
        for trials in (1, 16):
            plain: list[Figures] = []
            authed: list[Figures] = []
            runner: list[Figures] = []
            for _ in range(args.rounds):
                plain.append(await _echo(trials, args.calls, auth=False))
                authed.append(await _echo(trials, args.calls, auth=True))
                runner.append(await _runner(trials, args.calls // 2, code))
            p, a, r = _median(plain), _median(authed), _median(runner)
            cost = a.cpu - p.cpu
            print(
                f"{trials:<8}{p.cpu:>12.0f}/{p.p50:<7.3f}{a.cpu:>12.0f}/{a.p50:<7.3f}{cost:>9.1f}"
                f"{r.cpu:>9.0f}/{r.p50:<6.3f}{cost / r.cpu * 100:>11.1f}%",
                flush=True,
            )
        print("goal: auth share <= 5.0 % of a runner ExecuteTool (CPU per call)")


if __name__ == "__main__":
    asyncio.run(main())
