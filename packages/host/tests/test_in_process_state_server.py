"""An MCP server built with tools_interface keeps its tables in-process; state sync makes the store,
GetState and the grader see exactly what its tools did -- the same stable hashes as the same tools run
as python tools from the same file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tolokaforge.contracts.runner import GetStateRequest, ResetTrialRequest, RunnerServiceStub
from tolokaforge.core.runner_api import ToolCallRequest
from tolokaforge.host.agents import GoldenAgentFactory
from tolokaforge.host.packs import load_pack
from tolokaforge.host.run.schedule import RunSettings, run_pack
from tolokaforge.host.run.trial_spec import build_trial_spec
from tolokaforge.host.runner import GrpcRunner
from tolokaforge.host.users.router import UserRouter
from tolokaforge.runner import start_runner

GREENHOUSE = Path(__file__).parent / "fixtures" / "packs" / "greenhouse"
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("get_plant", {"plant_id": "P-2"}),
    ("water_plant", {"plant_id": "P-2", "litres": 2.0}),
    ("water_plant", {"plant_id": "P-9", "litres": 1.0}),  # a ToolError: no change
    ("pot_cuttings", {"cuttings": [{"species": "thyme", "bed": "B4"}]}),
    ("pot_cuttings", {"cuttings": [{"species": "cactus", "bed": "B4"}]}),  # refused by the data file
]


@pytest.fixture
def greenhouse(tmp_path: Path) -> Path:
    target = tmp_path / "greenhouse"
    shutil.copytree(GREENHOUSE, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


async def test_golden_path_grades_one_through_the_server_and_as_python_tools(
    greenhouse: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    summary = await run_pack(
        load_pack(greenhouse), GoldenAgentFactory(), UserRouter(), RunSettings(output=out)
    )
    for task_id in ("water_mcp", "water_python"):
        grade = yaml.safe_load((out / "trials" / task_id / "0" / "grade.yaml").read_text())
        assert grade["reasons"][:2] == ["State: hash match", "JSONPath: all 2 checks passed"], grade
    assert (summary.pass_rate, summary.mean_score) == (1.0, 1.0)


async def test_the_servers_state_hashes_like_the_python_tools_and_resets(greenhouse: Path) -> None:
    pack = load_pack(greenhouse)
    code = pack.tool_code
    assert (
        code is not None and code.files is not None and "tau_tools/species.json" in code.files
    )  # data travels
    hashes: dict[str, tuple[str, list[str]]] = {}
    # The embedded runner served on a loopback port; the client and the raw stub present its token.
    handle = await start_runner()
    runner = GrpcRunner.connect(handle.host, handle.port, token=handle.token)
    channel = handle.channel()
    stub = RunnerServiceStub(channel)
    try:
        for task_id in ("water_mcp", "water_python"):
            spec = build_trial_spec(pack.task(task_id).task, run_id="sync", trial_index=0)
            registered = await runner.register(spec)
            assert [s.name for s in registered.agent_tools] == [
                "get_plant",
                "water_plant",
                "pot_cuttings",
            ]
            outputs: list[str] = []
            for index, (name, arguments) in enumerate(CALLS):
                response = await runner.execute(
                    ToolCallRequest(spec.trial_id, f"c{index}", name, json.dumps(arguments), "agent")
                )
                outputs.append(response.output)
            assert json.loads(outputs[2]) == {"error": "no plant P-9", "details": ["known: P-1, P-2"]}
            assert json.loads(outputs[4]) == {"error": "not grown here: cactus"}
            state = await stub.get_state(GetStateRequest(trial_id=spec.trial_id))
            tables = json.loads(state.state_json)
            assert tables["plants"][1]["water_today"] == 2.5 and tables["plants"][2]["species"] == "thyme"
            hashes[task_id] = (state.stable_hash, outputs)  # the model reads the same on both paths
            reset = await stub.reset_trial(ResetTrialRequest(trial_id=spec.trial_id))
            assert reset.success, reset.error
            again = await runner.execute(
                ToolCallRequest(
                    spec.trial_id, "after-reset", "get_plant", json.dumps({"plant_id": "P-2"}), "agent"
                )
            )
            assert json.loads(again.output)["water_today"] == 0.5  # the server got the reset state
            await runner.release(spec.trial_id)
    finally:
        channel.close()
        await runner.aclose()
        await handle.close()
    assert hashes["water_mcp"] == hashes["water_python"]
