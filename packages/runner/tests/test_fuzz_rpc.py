"""Every RPC fuzzed with malformed bytes and strings on a real runner: no answer is UNKNOWN (or INTERNAL).

Requests go out as raw bytes (a pass-through codec), so the runner sees what a hostile client can send:
random bytes, valid framing with invalid UTF-8 in string fields, JSON nested thousands deep, lone
surrogates. Undecodable requests must fail INVALID_ARGUMENT; everything else answers normally.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from grpclib.client import Channel
from grpclib.const import Cardinality, Status
from grpclib.encoding.base import CodecBase
from grpclib.exceptions import GRPCError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tolokaforge.contracts.runner import ExecuteToolRequest, RegisterTrialRequest
from tolokaforge.runner import RunnerSettings, start_runner

from .conftest import make_spec, register_request

SERVICE = "/tolokaforge.runner.v1.RunnerService/"
RPCS = ["RegisterTrial", "ExecuteTool", "GradeTrial", "GetState", "ResetTrial", "CleanupTrial", "HealthCheck"]
TRIAL = "fuzz:0"
EXAMPLES = 300  # per strategy and RPC: 7 RPCs x 300 + the JSON cases > 2,000 in CI
NEVER = {Status.UNKNOWN, Status.INTERNAL}
STRING_FIELDS = {
    "RegisterTrial": [1, 2],
    "ExecuteTool": [1, 2, 3, 5, 6],
    "GradeTrial": [1, 2, 4, 5],
    "GetState": [1, 3],
    "ResetTrial": [1],
    "CleanupTrial": [1],
    "HealthCheck": [],
}


class RawCodec(CodecBase):
    """Sends bytes as they are and hands back the reply's bytes undecoded."""

    __content_subtype__ = "proto"  # pyright: ignore[reportIncompatibleMethodOverride, reportAssignmentType]

    def encode(self, message: Any, message_type: Any) -> bytes:
        return bytes(message)

    def decode(self, data: bytes, message_type: Any) -> Any:
        return data


class Harness:
    """A runner and a raw client on one event loop in a background thread (hypothesis drives sync)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.handle = self.run(start_runner(RunnerSettings()))
        self.channel = self.run(self._channel())

    async def _channel(self) -> Channel:
        return self.handle.channel(codec=RawCodec())

    def run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=120)

    async def _call(self, rpc: str, payload: bytes) -> Status:
        async with self.channel.request(SERVICE + rpc, Cardinality.UNARY_UNARY, bytes, bytes) as stream:
            try:
                await stream.send_message(payload, end=True)
                await stream.recv_message()
                await stream.recv_trailing_metadata()
            except GRPCError as error:
                return error.status
        return Status.OK

    def status(self, rpc: str, payload: bytes) -> Status:
        return self.run(self._call(rpc, payload))

    def close(self) -> None:
        self.channel.close()
        self.run(self.handle.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=30)
        self.loop.close()


@pytest.fixture(scope="module")
def harness() -> Iterator[Harness]:
    made = Harness()
    registered = made.status("RegisterTrial", bytes(register_request(make_spec(TRIAL))))
    assert registered == Status.OK
    yield made
    made.close()


def _field(number: int, value: bytes) -> bytes:
    """A length-delimited protobuf field (how strings and nested messages travel)."""
    length, out = len(value), bytearray()
    while True:
        byte, length = length & 0x7F, length >> 7
        out.append(byte | (0x80 if length else 0))
        if not length:
            break
    return bytes([number << 3 | 2]) + bytes(out) + value


FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    database=None,
)


@pytest.mark.parametrize("rpc", RPCS)
def test_random_bytes_never_answer_unknown(harness: Harness, rpc: str) -> None:
    @FUZZ
    @given(st.binary(max_size=300))
    def check(payload: bytes) -> None:
        assert harness.status(rpc, payload) not in NEVER

    check()


@pytest.mark.parametrize("rpc", RPCS)
def test_invalid_utf8_in_string_fields_is_invalid_argument(harness: Harness, rpc: str) -> None:
    @FUZZ
    @given(st.integers(1, 8), st.binary(min_size=1, max_size=64))
    def check(number: int, raw: bytes) -> None:
        payload = _field(1, TRIAL.encode()) + _field(number, raw)
        status = harness.status(rpc, payload)
        assert status not in NEVER
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            if number in STRING_FIELDS[rpc]:  # elsewhere: an unknown field (skipped) or a wire-type clash
                assert status == Status.INVALID_ARGUMENT

    check()


nested = st.integers(1, 4000).map(lambda depth: "[" * depth + "]" * depth)
texts = st.one_of(st.text(max_size=200), nested, st.just('{"a": "\\ud800"}'), st.just("\ud800"))


def test_hostile_json_and_text_in_execute_tool_and_register(harness: Harness) -> None:
    @FUZZ
    @given(st.sampled_from(["set_status", "get_order", "nope", ""]), texts, texts)
    def check(tool: str, arguments: str, call_id: str) -> None:
        # lone surrogates cannot be encoded as UTF-8 by a client: send them as the bytes a broken
        # client would (surrogatepass), which the runner must refuse as undecodable
        request = ExecuteToolRequest(trial_id=TRIAL, tool_name=tool, executor="agent")
        payload = (
            bytes(request)
            + _field(3, arguments.encode("utf-8", "surrogatepass"))
            + _field(6, call_id.encode("utf-8", "surrogatepass"))
        )
        assert harness.status("ExecuteTool", payload) not in NEVER
        spec = json.dumps(make_spec("fuzz:1", extra=arguments)) if arguments else arguments
        register = RegisterTrialRequest(trial_id="fuzz:1", engine_protocol_version=1)
        payload = bytes(register) + _field(2, spec.encode("utf-8", "surrogatepass"))
        assert harness.status("RegisterTrial", payload) not in NEVER
        assert harness.status("CleanupTrial", _field(1, b"fuzz:1")) == Status.OK

    check()
