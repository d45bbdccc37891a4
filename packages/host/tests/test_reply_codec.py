"""The host's codec decodes a RegisterTrial reply it has seen once, and everything else every time."""

from __future__ import annotations

from tolokaforge.contracts.runner import ExecuteToolResponse, RegisterTrialResponse, ToolSchema
from tolokaforge.host.runner.reply_codec import KEPT, DecodeOnceCodec


def _reply(name: str) -> bytes:
    schema = ToolSchema(name=name, description="d", parameters_json='{"type": "object"}')
    return bytes(RegisterTrialResponse(success=True, tool_schemas=[schema], num_agent_tools=1))


def test_the_same_reply_bytes_give_the_same_message() -> None:
    codec = DecodeOnceCodec()
    first = codec.decode(_reply("a"), RegisterTrialResponse)
    again = codec.decode(_reply("a"), RegisterTrialResponse)
    other = codec.decode(_reply("b"), RegisterTrialResponse)
    assert again is first and first.tool_schemas[0].name == "a"
    assert other is not first and other.tool_schemas[0].name == "b"


def test_other_messages_are_decoded_every_time() -> None:
    codec = DecodeOnceCodec()
    data = bytes(ExecuteToolResponse(output="x"))
    first, again = codec.decode(data, ExecuteToolResponse), codec.decode(data, ExecuteToolResponse)
    assert first == again and first is not again


def test_only_the_latest_replies_are_kept() -> None:
    codec = DecodeOnceCodec()
    oldest = codec.decode(_reply("t0"), RegisterTrialResponse)
    for index in range(1, KEPT + 1):
        codec.decode(_reply(f"t{index}"), RegisterTrialResponse)
    assert codec.decode(_reply("t0"), RegisterTrialResponse) is not oldest  # pushed out, decoded afresh
    latest = codec.decode(_reply(f"t{KEPT}"), RegisterTrialResponse)
    assert codec.decode(_reply(f"t{KEPT}"), RegisterTrialResponse) is latest
