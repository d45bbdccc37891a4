"""Plain top-level state values through a whole trial, on both stores: tools, GetState, hash and JSONPaths.

A public ``json_db`` such as ``{counter: 0, notes: ["opened"]}`` reaches the runner as value tables
(tolokaforge.core.value_tables); the tool below reads and writes the plain values.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tolokaforge.contracts.runner import GetStateRequest, RegisterTrialRequest, RunnerServiceStub
from tolokaforge.core.value_tables import VALUE_KEY, wrap_values

from .conftest import Episode

TOOL = """
class UpdateCounter:
    @staticmethod
    def get_info():
        return {"type": "function", "function": {"name": "update_counter", "parameters": {}}}

    @staticmethod
    def invoke(data, amount):
        data["counter"] += amount
        data["notes"].append(f"added {amount}")
        return {"counter": data["counter"], "label": data["label"]}
"""


@pytest.fixture(params=["memory", "http-postgres"])
def store_mode(request: pytest.FixtureRequest) -> str:
    return request.param


def _task() -> dict[str, Any]:
    return {
        "task_id": "tally",
        "agent_tools": [
            {
                "name": "update_counter",
                "description": "Add an amount to the tally.",
                "parameters": {
                    "type": "object",
                    "properties": {"amount": {"type": "integer"}},
                    "required": ["amount"],
                },
                "source": {"module_path": "tally_tools", "class_name": "UpdateCounter"},
            }
        ],
        "user_tools": [],
        "tool_code": {"files": {"tally_tools.py": TOOL}},
        "initial_state": {
            "tables": wrap_values({"counter": 0, "notes": ["opened"], "label": "door", "log": []})
        },
        "grading": {
            "combine_method": "all",
            "pass_threshold": 1.0,
            "state_checks": {
                "hash_enabled": True,
                "hash_weight": 0.5,
                "golden_actions": [{"tool_name": "update_counter", "arguments": {"amount": 5}}],
                "jsonpaths": [
                    {"path": "$.db.counter", "greater_or_equal": 5, "description": "reached five"},
                    {"path": "$.db.notes[-1]", "equals": "added 5", "description": "noted"},
                ],
            },
        },
    }


async def _trial(
    stub: RunnerServiceStub,
    request_for: Callable[..., RegisterTrialRequest],
    episode: Callable[[str], Episode],
    trial_id: str,
) -> Episode:
    spec = {"trial_id": trial_id, "task": _task()}
    response = await stub.register_trial(request_for(spec))
    assert response.success, response.error
    return episode(trial_id)


async def test_the_tool_sees_plain_values_and_the_store_keeps_value_tables(
    stub: RunnerServiceStub, request_for: Any, episode: Any
) -> None:
    ep = await _trial(stub, request_for, episode, "tally:0")
    answer = await ep.call("update_counter", {"amount": 5}, "c1")
    assert json.loads(answer.output) == {"counter": 5, "label": "door"}
    state = json.loads((await stub.get_state(GetStateRequest(trial_id="tally:0"))).state_json)
    assert state["counter"] == {VALUE_KEY: {"value": 5}}
    assert state["notes"] == {VALUE_KEY: {"value": ["opened", "added 5"]}}
    ep.say("The tally is 5.")
    grade = (await ep.grade()).grade
    assert (grade.binary_pass, grade.score) == (True, 1.0), grade.reasons
    assert grade.reasons == "State: hash match | JSONPath: all 2 checks passed"


async def test_a_different_plain_value_changes_the_stable_hash(
    stub: RunnerServiceStub, request_for: Any, episode: Any
) -> None:
    ep = await _trial(stub, request_for, episode, "tally:1")
    await ep.call("update_counter", {"amount": 4}, "c1")
    ep.say("The tally is 4.")
    grade = (await ep.grade()).grade
    assert grade.binary_pass is False
    state, jsonpaths = grade.reasons.split(" | ")
    assert state == "State: 2 modified (counter[$value].value, notes[$value].value)"
    assert jsonpaths.startswith("JSONPath: 0/2 checks passed; reached five: greater_or_equal 5.0 failed")
