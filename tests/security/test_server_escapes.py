"""The escapes a tool server could make -- an MCP server reaching another trial's tables, a provider's
command reading the runner's secrets -- tried against a real sandboxed runner."""

from __future__ import annotations

import json
import os
import sys
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tolokaforge.contracts.runner import (
    ExecuteToolRequest,
    ExecutionStatus,
    GetStateRequest,
    RegisterTrialRequest,
)
from tolokaforge.core.protocol import ENGINE_PROTOCOL_VERSION
from tolokaforge.runner import RunnerHandle, RunnerSettings, start_runner

PACK = Path(__file__).parent / "attack_pack"
SECRET = "tf-secret-api-key-server-0123456789"


@pytest.fixture
async def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[RunnerHandle]:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    handle = await start_runner(RunnerSettings(work_dir=tmp_path, isolation="sandbox"), serve=False)
    try:
        yield handle
    finally:
        await handle.close()


async def register(runner: RunnerHandle, trial_id: str, server: dict[str, Any]) -> None:
    spec = {
        "trial_id": trial_id,
        "task": {
            "task_id": trial_id.split(":")[0],
            "agent_tools": [],
            "user_tools": [],
            "tool_code": {"path": str(PACK)},
            "initial_state": {"tables": {"vault": [{"id": "v", "secret": f"{trial_id}-secret"}]}},
            "tool_servers": [server],
        },
    }
    reply = await runner.servicer.register_trial(
        RegisterTrialRequest(
            trial_id=trial_id,
            trial_spec_json=json.dumps(spec),
            engine_protocol_version=ENGINE_PROTOCOL_VERSION,
        )
    )
    assert reply.success, reply.error


async def call(runner: RunnerHandle, trial_id: str, tool: str, arguments: dict[str, Any]) -> Any:
    reply = await runner.servicer.execute_tool(
        ExecuteToolRequest(
            trial_id=trial_id,
            tool_name=tool,
            arguments_json=json.dumps(arguments),
            executor="agent",
            call_id="c1",
        )
    )
    assert reply.status == ExecutionStatus.SUCCESS, reply
    return json.loads(reply.output)


MCP_ATTACK = {"name": "mcp", "protocol": "mcp", "script": "mcp_attack.py"}


async def test_an_mcp_server_reaches_its_own_trial_and_no_other(runner: RunnerHandle) -> None:
    await register(runner, "victim:0", MCP_ATTACK)
    await register(runner, "thief:0", MCP_ATTACK)
    victim = urllib.parse.quote("victim:0", safe="")
    own = urllib.parse.quote("thief:0", safe="")
    seen = await call(
        runner,
        "thief:0",
        "attack",
        {
            "code": f"""
import os, urllib.request, socket
base = os.environ['TOLOKAFORGE_DB_URL']
def status(method, path, body=None):
    request = urllib.request.Request(base + path, method=method, data=body, headers={{'Content-Type': 'application/json'}})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read().decode()[:200]
    except urllib.error.HTTPError as error:
        return error.code, ''
patch = b'{{"operations": [{{"op": "upsert", "key": "v", "record": {{"secret": "stolen"}}}}]}}'
result = {{
    'own': status('GET', '/trials/{own}/state'),
    'victim_read': status('GET', '/trials/{victim}/state'),
    'victim_write': status('PATCH', '/trials/{victim}/state/vault', patch),
    'victim_dotdot': status('GET', '/trials/{own}/../{victim}/state'),
    'victim_encoded': status('GET', '/trials/{own}/%2e%2e/{victim}/state'),
    'victim_delete': status('DELETE', '/trials/{victim}'),
    'listing': status('GET', '/trials'),
}}
environs = []
for pid in (p for p in os.listdir('/proc') if p.isdigit()):
    try:
        environs.append(open(f'/proc/{{pid}}/environ', 'rb').read().decode('latin-1'))
    except OSError:
        pass
result['environ'] = environs
try:
    socket.create_connection(('127.0.0.1', 5432), timeout=2)
    result['postgres'] = 'connected'
except OSError as error:
    result['postgres'] = type(error).__name__
"""
        },
    )
    assert isinstance(seen, dict), seen
    assert seen["own"][0] == 200 and "thief:0-secret" in seen["own"][1]
    for key in ("victim_read", "victim_write", "victim_dotdot", "victim_encoded", "victim_delete", "listing"):
        assert seen[key][0] in (403, 404), (key, seen[key])
    assert seen["postgres"] != "connected"
    assert SECRET not in json.dumps(seen)
    state = await runner.servicer.get_state(GetStateRequest(trial_id="victim:0"))
    assert json.loads(state.state_json)["vault"] == [{"id": "v", "secret": "victim:0-secret"}]


async def test_a_providers_commands_see_neither_the_runner_nor_the_host(runner: RunnerHandle) -> None:
    exec_provider = {
        "name": "exec",
        "protocol": "provider",
        "command": [sys.executable, "-m", "tolokaforge_provider_exec.server"],
        "prefix": "exec_",
    }
    await register(runner, "cmd:0", exec_provider)
    outcomes: dict[str, Any] = {}
    for name, argv in {
        "environ": ["cat", f"/proc/{os.getpid()}/environ"],
        "shadow": ["cat", "/etc/shadow"],
        "kill": ["kill", "-9", str(os.getpid())],
        "postgres": [
            sys.executable,
            "-c",
            "import socket; socket.create_connection(('127.0.0.1', 5432), timeout=2)",
        ],
        "id": ["id", "-u"],
    }.items():
        reply = await runner.servicer.execute_tool(
            ExecuteToolRequest(
                trial_id="cmd:0",
                tool_name="exec_run",
                arguments_json=json.dumps({"command": argv}),
                executor="agent",
                call_id=f"c-{name}",
            )
        )
        outcomes[name] = (reply.status, reply.output, reply.error_message)
    assert SECRET not in json.dumps(outcomes, default=str)
    for name in ("environ", "shadow", "kill", "postgres"):
        status, output, _ = outcomes[name]
        assert status != ExecutionStatus.SUCCESS or json.loads(output)["exit_code"] != 0, (
            name,
            outcomes[name],
        )
    if os.geteuid() == 0:
        assert json.loads(outcomes["id"][1])["stdout"].strip() != "0"
