"""TrialSpec: one trial's whole payload on RegisterTrial (the task plus its execution context).

The execution context carries the protocol's names (docs/protocol/runner.md): ``run_id``,
``attempt_id``, the model configs, ``env_endpoints`` and ``runtime_context``, so a TrialSpec written
from the protocol registers as written.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ._base import SpecModel
from .judge import JudgeModelConfig
from .task import TaskDescription

__all__ = ["TrialSpec"]


class TrialSpec(SpecModel):
    """``RegisterTrialRequest.trial_spec_json``; ``trial_id`` must equal the request's."""

    trial_id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:#@-]*$")
    run_id: str = ""
    trial_index: int = Field(default=0, ge=0)
    attempt_id: int = Field(default=0, ge=0)
    """0 for a trial's first attempt, n for its n-th retry."""
    worker_id: str | None = None
    task: TaskDescription
    agent_model_config: dict[str, Any] | None = None
    user_model_config: dict[str, Any] | None = None
    judge_model: JudgeModelConfig | None = None
    """The rubric judge's model, a run setting (never a secret: see JudgeModelConfig.api_key_env)."""
    max_turns: int | None = Field(default=None, gt=0)
    """A per-trial turn cap; None defers to the task's and the engine's."""
    default_tool_timeout_s: float | None = Field(default=None, gt=0)
    """A per-trial default tool budget; RegisterTrialRequest.default_tool_timeout_s takes precedence."""
    env_endpoints: dict[str, str | None] = {}
    """Service URLs by name (``db_url``, ``runner_url``, ...); None for a service the run lacks."""
    runtime_context: dict[str, Any] = {}
