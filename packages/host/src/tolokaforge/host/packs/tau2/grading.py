"""A τ² task's evaluation criteria as this project's grading components, with τ²'s semantics.

τ²'s reward is the product of the components in the task's ``reward_basis`` (each 0 or 1); here each
becomes a component and the fold is ``all`` with threshold 1.0, which is that product:

- DB -> ``state_checks`` hash: the trial's tables (τ²'s agent and user DB) against the golden actions
  replayed on the initial state; a golden action τ² answers with an error keeps its partial writes
  (``golden_errors: keep``), as τ²'s gold environment ignores those errors.
- ENV_ASSERTION -> ``env_assertions``: τ²'s assertion functions on the final state (hidden tool).
- ACTION -> ``tau2_actions``; COMMUNICATE -> ``tau2_communicate`` (τ²'s matching rules, runner-side).
- A trial that ends otherwise than by the agent or the user scores 0 (``zero_unless_ended_by``).

τ²'s evaluator counts the DB as matching when a task has neither golden actions nor env assertions;
the hash component is then left out, which is the same verdict.
"""

from __future__ import annotations

from typing import Any

from tolokaforge.core.models import (
    EnvAssertion,
    EnvAssertionsConfig,
    GoldenAction,
    GradingConfig,
    StateChecksConfig,
    Tau2Action,
    Tau2ActionsConfig,
    Tau2CommunicateConfig,
)
from tolokaforge.core.termination import TerminationReason

__all__ = ["golden_actions", "grading_config", "items", "reward_basis"]

ENDINGS = [TerminationReason.AGENT_DONE.value, TerminationReason.USER_STOP.value]
"""τ² scores a simulation only when it ended by AGENT_STOP or USER_STOP."""


def items(value: Any) -> list[Any]:
    """A τ² optional list (None or a list) as a list."""
    return list(value) if value else []


def reward_basis(task: Any) -> list[str]:
    """The task's reward basis as τ²'s names (``DB``, ``ENV_ASSERTION``, …); τ²'s default when unset."""
    criteria = task.evaluation_criteria
    return [str(getattr(kind, "value", kind)) for kind in criteria.reward_basis] if criteria else []


def golden_actions(task: Any) -> list[GoldenAction]:
    """τ²'s golden actions in order, each on its requestor's side."""
    criteria = task.evaluation_criteria
    actions = items(criteria.actions) if criteria is not None else []
    return [
        GoldenAction(
            tool_name=action.name,
            arguments=dict(action.arguments),
            executor="user" if action.requestor == "user" else "agent",
        )
        for action in actions
    ]


def grading_config(task: Any, assertion_tool: str) -> GradingConfig:
    """The grading of τ² task ``task``; ``assertion_tool`` is the hidden tool that runs an env assertion."""
    criteria = task.evaluation_criteria
    golden = golden_actions(task)
    if criteria is None:  # τ²: no criteria, reward 1
        return GradingConfig(
            combine_method="all",
            pass_threshold=1.0,
            state_checks=StateChecksConfig(golden_actions=golden),
            zero_unless_ended_by=ENDINGS,
        )
    basis = set(reward_basis(task))
    unsupported = basis - {"DB", "ENV_ASSERTION", "ACTION", "COMMUNICATE"}
    if unsupported:
        raise ValueError(f"reward_basis {sorted(unsupported)} is not supported by this adapter yet")
    env_checked = criteria.actions is not None or criteria.env_assertions is not None
    state_checks = StateChecksConfig(
        hash_enabled="DB" in basis and env_checked, golden_actions=golden, golden_errors="keep"
    )
    env_assertions = None
    if "ENV_ASSERTION" in basis and env_checked:
        env_assertions = EnvAssertionsConfig(
            assertions=[
                EnvAssertion(
                    tool_name=assertion_tool,
                    arguments={
                        "env_type": assertion.env_type,
                        "func_name": assertion.func_name,
                        "arguments": dict(assertion.arguments),
                        "assert_value": assertion.assert_value,
                        "message": assertion.message,
                    },
                    expected=True,
                    message=assertion.message or f"{assertion.env_type}.{assertion.func_name}",
                )
                for assertion in items(criteria.env_assertions)
            ]
        )
    actions = None
    if "ACTION" in basis:
        actions = Tau2ActionsConfig(
            actions=[
                Tau2Action(
                    action_id=action.action_id,
                    name=action.name,
                    arguments=dict(action.arguments),
                    compare_args=list(action.compare_args) if action.compare_args is not None else None,
                )
                for action in items(criteria.actions)
            ]
        )
    communicate = None
    if "COMMUNICATE" in basis:
        communicate = Tau2CommunicateConfig(info=items(criteria.communicate_info))
    return GradingConfig(
        combine_method="all",
        pass_threshold=1.0,
        state_checks=state_checks,
        env_assertions=env_assertions,
        tau2_actions=actions,
        tau2_communicate=communicate,
        zero_unless_ended_by=ENDINGS,
    )
