"""The author-facing files of a pack as strict models: pack.yaml, task.yaml and grading.yaml.

Every model refuses unknown keys, so a typo is an error that names the key rather than a setting that
silently does nothing. Blocks whose shape is the runner's own (JSONPath checks, transcript rules,
unstable fields, initialization actions) reuse the core models, so the two sides cannot drift.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tolokaforge.core.models import (
    CombineMethod,
    ComponentName,
    InitializationAction,
    JsonPathCheck,
    LLMJudgeConfig,
    TraceChecksConfig,
    TranscriptRulesConfig,
    UnstableField,
)

__all__ = [
    "AgentToolsFile",
    "CombineFile",
    "CustomChecksFile",
    "GoldenActionFile",
    "GradingFile",
    "HashFile",
    "InitialStateFile",
    "PackFile",
    "ScriptedTurnFile",
    "StateChecksFile",
    "TaskFile",
    "ToolsFile",
    "UserSimulatorFile",
    "UserToolsFile",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PackFile(_Strict):
    """pack.yaml. ``defaults`` are merged into every task key by key (the task's own key wins)."""

    name: str | None = None
    version: str | None = None
    description: str = ""
    defaults: dict[str, Any] = {}


class GoldenActionFile(_Strict):
    """grading.yaml: state_checks.hash.golden_actions[]."""

    name: str = Field(min_length=1)
    kwargs: dict[str, Any] = {}


class HashFile(_Strict):
    enabled: bool = False
    weight: float | None = Field(default=None, ge=0, le=1)
    golden_actions: list[GoldenActionFile] = []


class StateChecksFile(_Strict):
    hash: HashFile | None = None
    jsonpaths: list[JsonPathCheck] = []


class CombineFile(_Strict):
    method: CombineMethod
    weights: dict[ComponentName, float] = {}
    pass_threshold: float = Field(ge=0.0, le=1.0)


class CustomChecksFile(_Strict):
    enabled: bool = False
    file: str = Field(min_length=1)
    timeout_seconds: float = Field(default=30.0, gt=0)
    fail_on_error: bool = False


class GradingFile(_Strict):
    """grading.yaml (or a task's inline ``grading:`` block)."""

    combine: CombineFile
    state_checks: StateChecksFile | None = None
    transcript_rules: TranscriptRulesConfig | None = None
    golden_response: str | None = None
    llm_judge: LLMJudgeConfig | None = None
    custom_checks: CustomChecksFile | None = None
    trace_checks: TraceChecksConfig | None = None


class InitialStateFile(_Strict):
    json_db: str | None = None
    """A JSON file ``{table: [records]}`` or ``{table: {key: record}}``."""
    tables: dict[str, Any] | None = None
    """Inline tables, instead of ``json_db``."""
    unstable_fields: list[UnstableField] = []
    initialization_actions: list[InitializationAction] = []


class AgentToolsFile(_Strict):
    python: str | None = None
    mcp_server: str | None = None
    enabled: list[str] | None = None
    """None offers every tool of the module's TOOLS that is not a user-side tool."""


class UserToolsFile(_Strict):
    enabled: list[str] = []


class ToolsFile(_Strict):
    agent: AgentToolsFile | None = None
    user: UserToolsFile | None = None


class ScriptedTurnFile(_Strict):
    user: str


class UserSimulatorFile(_Strict):
    mode: Literal["scripted", "llm"] = "scripted"
    persona: str = ""
    backstory: str = ""
    scripted_flow: list[ScriptedTurnFile] = []


class TaskFile(_Strict):
    """task.yaml, after pack.yaml defaults are merged in."""

    task_id: str = Field(min_length=1)
    name: str = ""
    category: str = ""
    description: str = ""
    max_turns: int | None = Field(default=None, gt=0)
    initial_user_message: str = ""
    system_prompt: str = ""
    """A file (resolved from the task's folder, then the pack root) or inline text."""
    initial_state: InitialStateFile = Field(default_factory=InitialStateFile)
    tools: ToolsFile | None = None
    user_simulator: UserSimulatorFile | None = None
    policies: dict[str, Any] = {}
    grading: str | GradingFile | None = None
