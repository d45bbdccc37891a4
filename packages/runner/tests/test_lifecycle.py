"""RegisterTrial, GetState, ResetTrial, CleanupTrial and HealthCheck on a real runner over loopback."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tolokaforge.contracts.runner import (
    CleanupTrialRequest,
    ExecuteToolRequest,
    ExecutionStatus,
    GetStateRequest,
    HealthCheckRequest,
    RegisterTrialRequest,
    ResetTrialRequest,
    RunnerServiceStub,
)
from tolokaforge.core.protocol import ENGINE_PROTOCOL_VERSION
from tolokaforge.core.stable_hash import stable_hash
from tolokaforge.runner import RunnerHandle
from tolokaforge.runner.process.sandbox import LIMIT_NAMES

SpecFactory = Callable[..., dict[str, Any]]


@pytest.fixture(params=["memory", "http-postgres"])
def store_mode(request: pytest.FixtureRequest) -> str:
    """Every test here runs on both stores: in-process memory, and a DB service over HTTP on PostgreSQL."""
    return request.param


RequestFor = Callable[..., RegisterTrialRequest]


async def test_register_returns_agent_tools_then_user_tools(
    stub: RunnerServiceStub, spec_factory: SpecFactory, request_for: RequestFor
) -> None:
    response = await stub.register_trial(request_for(spec_factory("t:0")))
    assert response.success, response.error
    names = [schema.name for schema in response.tool_schemas]
    assert names == [
        "who_am_i",
        "get_order",
        "set_status",
        "add_note",
        "slow_write",
        "explode",
        "check_balance",
    ]
    assert (response.num_agent_tools, response.num_user_tools) == (6, 1)
    assert json.loads(response.tool_schemas[1].parameters_json)["required"] == ["order_id"]


async def test_version_skew_is_refused_before_anything_is_initialised(
    runner: RunnerHandle, stub: RunnerServiceStub, spec_factory: SpecFactory, request_for: RequestFor
) -> None:
    response = await stub.register_trial(
        request_for(spec_factory("t:0"), version=ENGINE_PROTOCOL_VERSION - 1)
    )
    assert not response.success
    assert f"engine protocol version {ENGINE_PROTOCOL_VERSION - 1}" in response.error
    assert f"minimum {ENGINE_PROTOCOL_VERSION}" in response.error
    assert len(runner.servicer.runner.registry) == 0
    # Nothing reached the store either: the same id registers cleanly with the right version.
    assert (await stub.register_trial(request_for(spec_factory("t:0")))).success


async def test_duplicate_trial_id_is_refused(
    stub: RunnerServiceStub, spec_factory: SpecFactory, request_for: RequestFor
) -> None:
    assert (await stub.register_trial(request_for(spec_factory("t:0")))).success
    again = await stub.register_trial(request_for(spec_factory("t:0")))
    assert not again.success
    assert "already registered" in again.error


async def test_unknown_key_is_refused_naming_the_key(
    stub: RunnerServiceStub, spec_factory: SpecFactory, request_for: RequestFor
) -> None:
    response = await stub.register_trial(request_for(spec_factory("t:0", surprise_key=1)))
    assert not response.success
    assert "task.surprise_key" in response.error and "unknown key" in response.error


async def test_combine_method_is_a_closed_set(
    stub: RunnerServiceStub, spec_factory: SpecFactory, request_for: RequestFor
) -> None:
    spec = spec_factory("t:0", grading={"combine_method": "mean", "pass_threshold": 1.0})
    response = await stub.register_trial(request_for(spec))
    assert not response.success
    assert "combine_method" in response.error and "'mean'" in response.error
    assert "'weighted', 'all' or 'any'" in response.error


async def test_trial_id_must_match_the_spec(
    stub: RunnerServiceStub, spec_factory: SpecFactory, request_for: RequestFor
) -> None:
    request = request_for(spec_factory("t:0"))
    request.trial_id = "t:1"
    response = await stub.register_trial(request)
    assert not response.success and "differs" in response.error


async def test_failed_registration_leaves_nothing_behind(
    runner: RunnerHandle, stub: RunnerServiceStub, spec_factory: SpecFactory, request_for: RequestFor
) -> None:
    failing_init: dict[str, Any] = {
        "tables": {"orders": [], "notes": [], "wallet": {}},
        "initialization_actions": [{"tool_name": "explode"}],
    }
    response = await stub.register_trial(request_for(spec_factory("t:0", initial_state=failing_init)))
    assert not response.success
    assert "initialization_actions[0] (explode) failed" in response.error
    assert len(runner.servicer.runner.registry) == 0
    assert (await stub.register_trial(request_for(spec_factory("t:0")))).success


async def test_missing_tool_class_fails_registration(
    stub: RunnerServiceStub, spec_factory: SpecFactory, request_for: RequestFor
) -> None:
    spec = spec_factory("t:0")
    spec["task"]["agent_tools"][0]["source"]["class_name"] = "NoSuchTool"
    response = await stub.register_trial(request_for(spec))
    assert not response.success and "NoSuchTool" in response.error


async def test_invalid_tool_schema_fails_registration(
    stub: RunnerServiceStub, spec_factory: SpecFactory, request_for: RequestFor
) -> None:
    spec = spec_factory("t:0")
    spec["task"]["agent_tools"][0]["parameters"] = {
        "type": "object",
        "properties": {"x": {"type": "no-such-type"}},
    }
    response = await stub.register_trial(request_for(spec))
    assert not response.success and "not a valid JSON Schema" in response.error


async def test_initialization_actions_run_before_the_trial_starts(
    stub: RunnerServiceStub, spec_factory: SpecFactory, request_for: RequestFor
) -> None:
    init: dict[str, Any] = {
        "tables": {"orders": [{"id": "O-1", "status": "open"}], "notes": [], "wallet": {}},
        "initialization_actions": [{"tool_name": "add_note", "arguments": {"text": "seeded"}}],
    }
    assert (await stub.register_trial(request_for(spec_factory("t:0", initial_state=init)))).success
    state = await stub.get_state(GetStateRequest(trial_id="t:0"))
    assert json.loads(state.state_json)["notes"] == [{"text": "seeded"}]


async def test_get_state_filters_tables_and_reports_both_hashes(
    stub: RunnerServiceStub, spec_factory: SpecFactory, request_for: RequestFor
) -> None:
    unstable: dict[str, Any] = {
        "tables": {"orders": [{"id": "O-1", "stamp": 5}], "notes": [], "wallet": {}},
        "unstable_fields": [{"table_name": "orders", "field_name": "stamp", "reason": "timestamp"}],
    }
    assert (await stub.register_trial(request_for(spec_factory("t:0", initial_state=unstable)))).success
    stable = await stub.get_state(GetStateRequest(trial_id="t:0", tables=["orders"]))
    assert stable.success and json.loads(stable.state_json) == {"orders": [{"id": "O-1"}]}
    full = await stub.get_state(GetStateRequest(trial_id="t:0", include_unstable=True, tables=["orders"]))
    assert json.loads(full.state_json) == {"orders": [{"id": "O-1", "stamp": 5}]}
    tables: dict[str, Any] = unstable["tables"]
    assert full.full_hash == stable_hash(tables)
    assert full.stable_hash == stable_hash(tables, [("orders", "stamp")])
    missing = await stub.get_state(GetStateRequest(trial_id="nope:0"))
    assert not missing.success and "nope:0" in missing.error


async def test_reset_returns_to_the_initial_state(
    stub: RunnerServiceStub, spec_factory: SpecFactory, request_for: RequestFor
) -> None:
    spec = spec_factory("t:0")
    assert (await stub.register_trial(request_for(spec))).success
    initial_hash = (await stub.get_state(GetStateRequest(trial_id="t:0"))).stable_hash
    done = await stub.execute_tool(
        ExecuteToolRequest(
            trial_id="t:0",
            tool_name="add_note",
            arguments_json='{"text": "x"}',
            executor="agent",
            call_id="c1",
        )
    )
    assert done.status == ExecutionStatus.SUCCESS
    assert (await stub.get_state(GetStateRequest(trial_id="t:0"))).stable_hash != initial_hash
    reset = await stub.reset_trial(ResetTrialRequest(trial_id="t:0"))
    assert reset.success and reset.state_hash == initial_hash
    # The runner's own copy was reset too: the next tool call sees the initial tables.
    read = await stub.execute_tool(
        ExecuteToolRequest(
            trial_id="t:0",
            tool_name="get_order",
            arguments_json='{"order_id": "O-1"}',
            executor="agent",
            call_id="c2",
        )
    )
    assert json.loads(read.output)["status"] == "open"


async def test_reset_can_rerun_initialization_actions(
    stub: RunnerServiceStub, spec_factory: SpecFactory, request_for: RequestFor
) -> None:
    init: dict[str, Any] = {
        "tables": {"orders": [], "notes": [], "wallet": {}},
        "initialization_actions": [{"tool_name": "add_note", "arguments": {"text": "seeded"}}],
    }
    assert (await stub.register_trial(request_for(spec_factory("t:0", initial_state=init)))).success
    reset = await stub.reset_trial(ResetTrialRequest(trial_id="t:0", execute_init_actions=True))
    assert reset.success
    state = await stub.get_state(GetStateRequest(trial_id="t:0"))
    assert json.loads(state.state_json)["notes"] == [{"text": "seeded"}]
    assert reset.state_hash == state.stable_hash


async def test_cleanup_is_idempotent_and_frees_the_id(
    runner: RunnerHandle, stub: RunnerServiceStub, spec_factory: SpecFactory, request_for: RequestFor
) -> None:
    assert (await stub.register_trial(request_for(spec_factory("t:0")))).success
    assert (await stub.cleanup_trial(CleanupTrialRequest(trial_id="t:0"))).success
    assert (await stub.cleanup_trial(CleanupTrialRequest(trial_id="t:0"))).success
    assert (await stub.cleanup_trial(CleanupTrialRequest(trial_id="never:0"))).success
    assert len(runner.servicer.runner.registry) == 0
    assert (await stub.register_trial(request_for(spec_factory("t:0")))).success


async def test_health_check(
    stub: RunnerServiceStub, spec_factory: SpecFactory, request_for: RequestFor
) -> None:
    assert (await stub.register_trial(request_for(spec_factory("t:0")))).success
    health = await stub.health_check(HealthCheckRequest())
    assert health.status == "healthy" and health.db_service_connected
    assert health.num_active_trials == 1
    assert health.version and health.available_adapters[:4] == [
        "tau_sync",
        "mcp",
        "provider",
        "isolation:sandbox",
    ]
    # What holds on this machine, as the trial's worker found it: every limit is named.
    limits = {a.split("=")[0] for a in health.available_adapters if a.startswith("limit:")}
    assert limits == {f"limit:{name}" for name in LIMIT_NAMES}


async def test_tool_code_as_files_inside_the_spec(
    stub: RunnerServiceStub, spec_factory: SpecFactory, request_for: RequestFor, fixtures_dir: Path
) -> None:
    root = fixtures_dir / "pack_a"
    files = {path.relative_to(root).as_posix(): path.read_text() for path in root.rglob("*.py")}
    spec = spec_factory("t:0", tool_code={"files": files})
    assert (await stub.register_trial(request_for(spec))).success
    response = await stub.execute_tool(
        ExecuteToolRequest(
            trial_id="t:0", tool_name="who_am_i", arguments_json="{}", executor="agent", call_id="c1"
        )
    )
    assert response.output == "pack_a"


async def test_tool_code_files_cannot_escape_the_bundle(
    stub: RunnerServiceStub, spec_factory: SpecFactory, request_for: RequestFor
) -> None:
    spec = spec_factory("t:0", tool_code={"files": {"../evil.py": "x = 1"}})
    response = await stub.register_trial(request_for(spec))
    assert not response.success and "stay inside" in response.error


async def test_a_trial_spec_in_the_protocols_names_registers(
    runner: RunnerHandle, stub: RunnerServiceStub, spec_factory: SpecFactory, request_for: RequestFor
) -> None:
    spec = spec_factory("t:0")
    spec.update(
        run_id="run-7",
        attempt_id=1,
        worker_id="w-1",
        agent_model_config={"provider": "openai", "name": "gpt-4o-mini", "temperature": 0.0},
        user_model_config={"provider": "openai", "name": "gpt-4o-mini", "temperature": 0.7},
        max_turns=12,
        default_tool_timeout_s=7.5,
        env_endpoints={"db_url": "http://json-db:8000", "rag_url": None, "runner_url": "http://runner:50051"},
        runtime_context={"sandbox": {"cpus": 1}},
    )
    response = await stub.register_trial(request_for(spec))
    assert response.success, response.error
    trial = runner.servicer.runner.registry.get("t:0")
    assert (trial.spec.attempt_id, trial.spec.run_id, trial.tools.default_timeout_s) == (1, "run-7", 7.5)
    old_name = spec_factory("t:1")
    old_name["attempt"] = 1  # not a protocol name: refused, naming it
    refused = await stub.register_trial(request_for(old_name))
    assert not refused.success and "attempt" in refused.error and "unknown key" in refused.error


async def test_the_workspace_starts_with_its_files_and_a_reset_restores_them(
    runner: RunnerHandle, stub: RunnerServiceStub, spec_factory: SpecFactory, request_for: RequestFor
) -> None:
    spec = spec_factory("t:0")
    spec["task"]["initial_state"]["workspace_files"] = {"docs/rules.py": "checks/shared/order_rules.py"}
    response = await stub.register_trial(request_for(spec))
    assert response.success, response.error
    workspace = runner.servicer.runner.registry.get("t:0").files.workspace
    assert workspace is not None
    seeded = workspace / "docs" / "rules.py"
    assert 'PAID = "paid"' in seeded.read_text()
    seeded.write_text("changed")
    (workspace / "stray.txt").write_text("left by a tool")
    reset = await stub.reset_trial(ResetTrialRequest(trial_id="t:0"))
    assert reset.success, reset.error
    assert 'PAID = "paid"' in seeded.read_text() and not (workspace / "stray.txt").exists()
    escaping = spec_factory("t:1")
    escaping["task"]["initial_state"]["workspace_files"] = {"x": "../outside.py"}
    refused = await stub.register_trial(request_for(escaping))
    assert not refused.success and "must be a relative path that stays inside its root" in refused.error
