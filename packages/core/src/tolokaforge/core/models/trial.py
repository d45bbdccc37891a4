"""TrialSpec: one trial's whole payload on RegisterTrial (the task plus its execution context)."""

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
    attempt: int = Field(default=0, ge=0)
    task: TaskDescription
    agent_model: dict[str, Any] | None = None
    user_model: dict[str, Any] | None = None
    judge_model: JudgeModelConfig | None = None
    """The rubric judge's model, a run setting (never a secret: see JudgeModelConfig.api_key_env)."""
    env_endpoints: dict[str, str] = {}
    runtime_context: dict[str, Any] = {}
