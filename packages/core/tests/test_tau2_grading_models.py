"""The τ²-style grading models: defaults, what they refuse, and how they travel as JSON."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from tolokaforge.core.models import (
    COMPONENT_NAMES,
    EnvAssertion,
    GoldenAction,
    GradingConfig,
    StateChecksConfig,
    Tau2Action,
)


def _config(**fields: Any) -> GradingConfig:
    return GradingConfig.model_validate({"combine_method": "all", "pass_threshold": 1.0, **fields})


def test_the_new_components_are_component_names_and_weights_accept_them() -> None:
    assert {"env_assertions", "tau2_actions", "tau2_communicate"} <= set(COMPONENT_NAMES)
    config = _config(weights={"env_assertions": 1.0, "tau2_actions": 1.0, "tau2_communicate": 1.0})
    assert set(config.weights) == {"env_assertions", "tau2_actions", "tau2_communicate"}


def test_defaults_keep_todays_behaviour() -> None:
    assert GoldenAction(tool_name="x").executor == "agent"
    assert StateChecksConfig().golden_errors == "fail"
    config = _config()
    assert (config.env_assertions, config.tau2_actions, config.tau2_communicate) == (None, None, None)
    assert config.zero_unless_ended_by is None
    assert Tau2Action(name="x").compare_args is None


def test_a_config_round_trips_through_json() -> None:
    config = _config(
        state_checks={
            "hash_enabled": True,
            "golden_errors": "keep",
            "golden_actions": [{"tool_name": "toggle", "executor": "user"}],
        },
        env_assertions={
            "assertions": [{"tool_name": "check", "expected": {"a": [1, None]}, "executor": "user"}]
        },
        tau2_actions={"actions": [{"name": "pay", "arguments": {"id": 1}, "compare_args": []}]},
        tau2_communicate={"info": ["1000"]},
        zero_unless_ended_by=["agent_done", "user_stop"],
    )
    assert GradingConfig.model_validate_json(config.model_dump_json()) == config


REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"zero_unless_ended_by": ["agent_done", "finished"]}, "names no termination reason: 'finished'"),
    ({"zero_unless_ended_by": []}, "zero_unless_ended_by"),
    ({"env_assertions": {"assertions": [{"tool_name": "check"}]}}, "expected"),
    (
        {"env_assertions": {"assertions": [{"tool_name": "check", "expected": 1, "executor": "robot"}]}},
        "executor",
    ),
    ({"tau2_actions": {"actions": [{"arguments": {}}]}}, "name"),
    ({"tau2_actions": {}}, "actions"),
    ({"tau2_communicate": {"info": "one string"}}, "info"),
    ({"state_checks": {"golden_errors": "ignore"}}, "golden_errors"),
    ({"tau2_actions": {"actions": [], "requestor": "user"}}, "requestor"),
]


@pytest.mark.parametrize(("fields", "where"), REFUSED)
def test_refused_shapes_name_the_key(fields: dict[str, Any], where: str) -> None:
    with pytest.raises(ValidationError) as caught:
        _config(**fields)
    assert where in str(caught.value)


def test_expected_may_be_null() -> None:
    assert EnvAssertion(tool_name="check", expected=None).expected is None
