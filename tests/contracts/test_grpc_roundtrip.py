"""The generated grpclib client stubs and server bases talk over a real socket on 127.0.0.1."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator

import grpclib
import pytest
from grpclib.client import Channel
from grpclib.server import Server

from tolokaforge.contracts import runner, tool


class EchoRunner(runner.RunnerServiceBase):
    """Implements two RPCs and leaves the rest to the generated base (UNIMPLEMENTED)."""

    async def execute_tool(self, message: runner.ExecuteToolRequest) -> runner.ExecuteToolResponse:
        return runner.ExecuteToolResponse(
            status=runner.ExecutionStatus.ERROR,
            error_message=f"{message.tool_name}({message.arguments_json}) as {message.call_id}",
            metrics=runner.ToolMetrics(latency_seconds=0.5),
            tool_error=tool.ToolError(
                category=tool.ToolErrorCategory.EXECUTION_FAILED,
                message="boom",
                retryable=False,
                details_json='{"exception": "RuntimeError"}',
            ),
        )

    async def health_check(self, message: runner.HealthCheckRequest) -> runner.HealthCheckResponse:
        return runner.HealthCheckResponse(
            status="healthy", num_active_trials=3, available_adapters=["python"]
        )


class CountingProvider(tool.ToolProviderServiceBase):
    async def invoke(self, message: tool.InvokeRequest) -> AsyncIterator[tool.InvokeResponse]:
        for i in range(3):
            yield tool.InvokeResponse(
                output_chunk=tool.OutputChunk(stream=tool.OutputStream.STDOUT, data=b"%d\n" % i)
            )
        yield tool.InvokeResponse(exit_status=tool.ExitStatus(code=0))
        yield tool.InvokeResponse(result=tool.InvokeResult(output_json=message.arguments_json))


async def _serve(*handlers: runner.RunnerServiceBase | tool.ToolProviderServiceBase) -> tuple[Server, int]:
    """Serve on an ephemeral 127.0.0.1 port, bound before the server starts so the port is known."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    port: int = sock.getsockname()[1]
    server = Server(list(handlers))
    await server.start(sock=sock)
    return server, port


async def test_unary_round_trip_through_generated_stub_and_base() -> None:
    server, port = await _serve(EchoRunner())
    channel = Channel("127.0.0.1", port)
    try:
        stub = runner.RunnerServiceStub(channel)
        response = await stub.execute_tool(
            runner.ExecuteToolRequest(
                trial_id="t:0", tool_name="get_order", arguments_json='{"id": 1}', call_id="c1"
            )
        )
        assert response.status == runner.ExecutionStatus.ERROR
        assert response.error_message == 'get_order({"id": 1}) as c1'
        assert response.metrics is not None and response.metrics.latency_seconds == 0.5
        assert response.tool_error is not None
        assert response.tool_error.category == tool.ToolErrorCategory.EXECUTION_FAILED
        assert response.tool_error.details_json == '{"exception": "RuntimeError"}'

        health = await stub.health_check(runner.HealthCheckRequest())
        assert (health.status, health.num_active_trials, health.available_adapters) == (
            "healthy",
            3,
            ["python"],
        )
    finally:
        channel.close()
        server.close()
        await server.wait_closed()


async def test_unimplemented_rpc_answers_unimplemented() -> None:
    server, port = await _serve(EchoRunner())
    channel = Channel("127.0.0.1", port)
    try:
        with pytest.raises(grpclib.GRPCError) as raised:
            await runner.RunnerServiceStub(channel).grade_trial(runner.GradeTrialRequest(trial_id="t:0"))
        assert raised.value.status == grpclib.Status.UNIMPLEMENTED
    finally:
        channel.close()
        server.close()
        await server.wait_closed()


async def test_server_streaming_invoke_delivers_every_event_in_order() -> None:
    server, port = await _serve(CountingProvider())
    channel = Channel("127.0.0.1", port)
    try:
        stub = tool.ToolProviderServiceStub(channel)
        events = [
            event
            async for event in stub.invoke(
                tool.InvokeRequest(
                    operation="run", arguments_json='{"cmd": "seq 3"}', call_context=tool.CallContext()
                )
            )
        ]
        chunks = [e.output_chunk.data for e in events if e.output_chunk is not None]
        assert chunks == [b"0\n", b"1\n", b"2\n"]
        assert events[3].exit_status == tool.ExitStatus(code=0)
        assert events[4].result == tool.InvokeResult(output_json='{"cmd": "seq 3"}')
        with pytest.raises(grpclib.GRPCError) as raised:
            await stub.describe(tool.DescribeRequest())
        assert raised.value.status == grpclib.Status.UNIMPLEMENTED
    finally:
        channel.close()
        server.close()
        await server.wait_closed()
