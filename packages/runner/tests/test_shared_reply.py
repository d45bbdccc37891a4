"""A task's trials that get the same tools get the same RegisterTrial reply, built and encoded once."""

from __future__ import annotations

import gc
import hashlib
import json
from pathlib import Path
from typing import Any

from tolokaforge.contracts.runner import (
    CleanupTrialRequest,
    RegisterTrialRequest,
    RegisterTrialResponse,
    RunnerServiceStub,
    ToolSchema,
)
from tolokaforge.core.protocol import ENGINE_PROTOCOL_VERSION
from tolokaforge.runner import RunnerSettings, start_runner
from tolokaforge.runner.edge.reply_wire import SendOnceCodec, send_unchanged

from .conftest import fixture_server, make_spec

PACK_A = Path(__file__).parent / "fixtures" / "pack_a"


def _code_as_files() -> dict[str, Any]:
    return {"files": {path.relative_to(PACK_A).as_posix(): path.read_text() for path in PACK_A.rglob("*.py")}}


def _task(task_id: str, **overrides: Any) -> tuple[str, str]:
    task = make_spec(f"{task_id}:0", **overrides)["task"]
    text = json.dumps(task)
    return text, hashlib.sha256(text.encode()).hexdigest()


def _request(trial_id: str, digest: str, task_json: str = "") -> RegisterTrialRequest:
    return RegisterTrialRequest(
        trial_id=trial_id,
        trial_spec_json=json.dumps({"trial_id": trial_id}),
        engine_protocol_version=ENGINE_PROTOCOL_VERSION,
        task_json=task_json,
        task_digest=digest,
    )


async def test_every_trial_of_a_task_gets_the_whole_reply_of_the_first(stub: RunnerServiceStub) -> None:
    task_json, digest = _task("shared", tool_code=_code_as_files())
    replies: list[RegisterTrialResponse] = []
    for index in range(4):
        reply = await stub.register_trial(
            _request(f"shared:{index}", digest, task_json if index == 0 else "")
        )
        assert reply.success, reply.error
        replies.append(reply)
    first = replies[0]
    assert first.num_agent_tools > 0 and first.num_user_tools == 1
    assert all(reply == first for reply in replies[1:])  # over the wire: the same bytes, decoded
    # A trial cleaned up and registered again under its id gets it too.
    await stub.cleanup_trial(CleanupTrialRequest(trial_id="shared:1"))
    assert await stub.register_trial(_request("shared:1", digest)) == first


async def test_trials_with_a_tool_server_get_its_tools_from_their_own_server(stub: RunnerServiceStub) -> None:
    server = fixture_server("shop", "mcp", "mcp_server.py")
    task_json, digest = _task("served", tool_code=_code_as_files(), tool_servers=[server])
    for index in range(2):
        reply = await stub.register_trial(
            _request(f"served:{index}", digest, task_json if index == 0 else "")
        )
        assert reply.success, reply.error
        names = [schema.name for schema in reply.tool_schemas]
        assert any(name not in {"who_am_i", "check_balance"} for name in names), names
        await stub.cleanup_trial(CleanupTrialRequest(trial_id=f"served:{index}"))


def _reply(description: str) -> RegisterTrialResponse:
    schema = ToolSchema(name="t", description=description, parameters_json='{"type": "object"}')
    return RegisterTrialResponse(success=True, tool_schemas=[schema], num_agent_tools=1)


def test_a_marked_reply_is_encoded_once_and_an_unmarked_one_each_time() -> None:
    codec = SendOnceCodec()
    marked, plain = _reply("before"), _reply("before")
    send_unchanged(marked)
    first = codec.encode(marked, RegisterTrialResponse)
    assert RegisterTrialResponse.FromString(first) == _reply("before")
    # Changing a marked message breaks its contract; done here only to show the bytes are not recomputed.
    marked.tool_schemas[0].description = "after"
    plain.tool_schemas[0].description = "after"
    assert codec.encode(marked, RegisterTrialResponse) == first
    assert RegisterTrialResponse.FromString(codec.encode(plain, RegisterTrialResponse)) == _reply("after")


def test_a_mark_goes_with_its_message() -> None:
    from tolokaforge.runner.edge import reply_wire

    marked = _reply("gone soon")
    key = id(marked)
    send_unchanged(marked)
    assert key in reply_wire._WIRE  # pyright: ignore[reportPrivateUsage]
    del marked
    gc.collect()
    assert key not in reply_wire._WIRE  # pyright: ignore[reportPrivateUsage]
    # A new message that happens to get the freed one's id is not taken for it.
    codec = SendOnceCodec()
    fresh = _reply("fresh")
    assert RegisterTrialResponse.FromString(codec.encode(fresh, RegisterTrialResponse)) == _reply("fresh")


async def test_the_reply_is_built_once_per_task_and_only_for_shared_tools() -> None:
    handle = await start_runner(RunnerSettings(isolation="thread"), serve=False)
    try:
        stub = handle.servicer
        task_json, digest = _task("once", tool_code=_code_as_files())
        first = await stub.register_trial(_request("once:0", digest, task_json))
        second = await stub.register_trial(_request("once:1", digest))
        assert first.success and second is first  # the very message: no schema built again
        # Code at a path is read again at every registration, so its replies are built each time.
        path_json, path_digest = _task("path")
        one = await stub.register_trial(_request("path:0", path_digest, path_json))
        other = await stub.register_trial(_request("path:1", path_digest))
        assert one.success and other == one and other is not one
    finally:
        await handle.close()
