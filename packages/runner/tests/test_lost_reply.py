"""One truth after a transport error: a PATCH whose reply is lost on the way back.

The DB service applies the batch, a TCP proxy between runner and service throws the answer away. The
call is answered as a retryable infrastructure failure (its outcome unknown, not the tool's fault);
the runner re-reads the trial from the store, so the next calls build on the store's version and the
tools and the grader see the same state.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from tolokaforge.contracts.runner import (
    ExecutionStatus,
    GetStateRequest,
    RegisterTrialRequest,
    RunnerServiceStub,
)
from tolokaforge.contracts.tool import ToolErrorCategory
from tolokaforge.core.credentials import new_token
from tolokaforge.db.server import serve_settings
from tolokaforge.db.settings import Settings as DbSettings
from tolokaforge.runner import RunnerSettings, start_runner

from .conftest import Episode
from .tcp_proxy import DroppingProxy


@pytest.fixture
async def proxied() -> AsyncIterator[tuple[RunnerServiceStub, DroppingProxy]]:
    db_token = new_token()
    async with serve_settings(DbSettings(store="memory", port=0, token=db_token)) as db_url:
        host, port = db_url.removeprefix("http://").rsplit(":", 1)
        proxy = DroppingProxy(host, int(port))
        proxy_url = await proxy.start()
        handle = await start_runner(RunnerSettings(db_url=proxy_url, db_token=db_token))
        channel = handle.channel()
        try:
            yield RunnerServiceStub(channel), proxy
        finally:
            channel.close()
            await handle.close()
            await proxy.close()


PAY: dict[str, Any] = {"tool_name": "set_status", "arguments": {"order_id": "O-1", "status": "paid"}}
CANCEL: dict[str, Any] = {"tool_name": "set_status", "arguments": {"order_id": "O-2", "status": "cancelled"}}


async def test_a_lost_patch_reply_is_an_infrastructure_failure_and_the_store_stays_the_truth(
    proxied: tuple[RunnerServiceStub, DroppingProxy],
    spec_factory: Callable[..., dict[str, Any]],
    request_for: Callable[..., RegisterTrialRequest],
) -> None:
    stub, proxy = proxied
    grading = {
        "combine_method": "weighted",
        "weights": {"state_checks": 1.0},
        "pass_threshold": 1.0,
        "state_checks": {"hash_enabled": True, "golden_actions": [PAY, CANCEL]},
    }
    registered = await stub.register_trial(request_for(spec_factory("lost:0", grading=grading)))
    assert registered.success, registered.error
    episode = Episode(stub, "lost:0")

    proxy.drop_reply_to(b"PATCH")
    lost = await episode.call("set_status", PAY["arguments"], "c1")
    assert proxy.dropped == 1
    assert lost.status == ExecutionStatus.ERROR
    assert lost.tool_error.category == ToolErrorCategory.UNKNOWN  # never execution_failed: not the tool
    assert lost.tool_error.retryable
    details = json.loads(lost.tool_error.details_json)
    assert details["infrastructure"] == "state_store" and details["outcome_unknown"] is True

    # The store applied it; the runner's tools see it too, and the next write builds on it.
    state = await stub.get_state(GetStateRequest(trial_id="lost:0"))
    assert json.loads(state.state_json)["orders"][0]["status"] == "paid"
    seen = await episode.call("get_order", {"order_id": "O-1"}, "c2")
    assert seen.status == ExecutionStatus.SUCCESS and json.loads(seen.output)["status"] == "paid"
    cancelled = await episode.call("set_status", CANCEL["arguments"], "c3")
    assert cancelled.status == ExecutionStatus.SUCCESS, cancelled.error_message

    # The grader hashes the same state the tools built: the golden path matches.
    graded = await episode.grade()
    assert graded.success, graded.error
    assert graded.grade.score == 1.0, graded.grade.reasons
