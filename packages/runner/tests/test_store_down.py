"""The DB service down: every RPC that needs it answers a typed, retryable error, never UNKNOWN, and
ExecuteTool never blames the tool."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from tolokaforge.contracts.runner import (
    CleanupTrialRequest,
    ExecuteToolRequest,
    ExecutionStatus,
    GetStateRequest,
    RegisterTrialRequest,
    RegistrationErrorKind,
    ResetTrialRequest,
    RunnerServiceStub,
)
from tolokaforge.contracts.tool import ToolErrorCategory
from tolokaforge.core.credentials import new_token
from tolokaforge.db.server import serve_settings
from tolokaforge.db.settings import Settings as DbSettings
from tolokaforge.runner import RunnerSettings, start_runner


async def test_every_rpc_answers_typed_errors_while_the_store_is_down(
    spec_factory: Callable[..., dict[str, Any]], request_for: Callable[..., RegisterTrialRequest]
) -> None:
    db_token = new_token()
    async with serve_settings(DbSettings(store="memory", port=0, token=db_token)) as db_url:
        handle = await start_runner(RunnerSettings(db_url=db_url, db_token=db_token))
        channel = handle.channel()
        stub = RunnerServiceStub(channel)
        assert (await stub.register_trial(request_for(spec_factory("down:0")))).success
    # the DB service is gone now (its port closed)
    try:
        executed = await stub.execute_tool(
            ExecuteToolRequest(
                trial_id="down:0",
                tool_name="set_status",
                arguments_json='{"order_id": "O-1", "status": "paid"}',
                executor="agent",
                call_id="c1",
            )
        )
        assert executed.status == ExecutionStatus.ERROR
        error = executed.tool_error
        assert error is not None
        assert error.category == ToolErrorCategory.UNKNOWN and error.retryable  # not execution_failed
        assert json.loads(error.details_json)["infrastructure"] == "state_store"
        registered = await stub.register_trial(request_for(spec_factory("down:1")))
        assert not registered.success and registered.retryable
        assert registered.error_kind == RegistrationErrorKind.STATE_STORE
        for call in (
            stub.get_state(GetStateRequest(trial_id="down:0")),
            stub.reset_trial(ResetTrialRequest(trial_id="down:0")),
            stub.cleanup_trial(CleanupTrialRequest(trial_id="down:0")),
        ):
            with pytest.raises(GRPCError) as raised:
                await call
            assert raised.value.status == Status.UNAVAILABLE
    finally:
        channel.close()
        await handle.close()
