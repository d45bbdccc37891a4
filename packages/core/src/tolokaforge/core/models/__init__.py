"""Typed payload models shared by host and runner: TrialSpec, TaskDescription, GradingConfig."""

from __future__ import annotations

from ._base import SpecModel, describe_validation_error
from .grading import (
    COMPONENT_NAMES,
    JSONPATH_OPERATORS,
    CombineMethod,
    CommunicateInfo,
    ComponentName,
    CustomChecksConfig,
    GoldenAction,
    GradingConfig,
    JsonPathCheck,
    RequiredAction,
    StateChecksConfig,
    ToolExpectation,
    TranscriptRulesConfig,
)
from .judge import (
    DEFAULT_JUDGE_KEY_ENV,
    MOCK_JUDGE_MODEL,
    Criterion,
    JudgeCustomization,
    JudgeModelConfig,
    JudgePrice,
    LLMJudgeConfig,
    Rubric,
    mock_unmet_criteria,
)
from .task import (
    InitializationAction,
    InitialState,
    TableSchemaSpec,
    TaskDescription,
    ToolCode,
    ToolDescription,
    ToolServer,
    ToolSource,
    UnstableField,
    UserSimulatorConfig,
)
from .trace_checks import TraceConstraint
from .trace_rules import TraceChecksConfig
from .trial import TrialSpec

__all__ = [
    "COMPONENT_NAMES",
    "DEFAULT_JUDGE_KEY_ENV",
    "JSONPATH_OPERATORS",
    "MOCK_JUDGE_MODEL",
    "CombineMethod",
    "CommunicateInfo",
    "ComponentName",
    "Criterion",
    "CustomChecksConfig",
    "GoldenAction",
    "GradingConfig",
    "InitialState",
    "InitializationAction",
    "JsonPathCheck",
    "JudgeCustomization",
    "JudgeModelConfig",
    "JudgePrice",
    "LLMJudgeConfig",
    "RequiredAction",
    "Rubric",
    "SpecModel",
    "StateChecksConfig",
    "TableSchemaSpec",
    "TaskDescription",
    "ToolCode",
    "ToolDescription",
    "ToolExpectation",
    "ToolServer",
    "ToolSource",
    "TraceChecksConfig",
    "TraceConstraint",
    "TranscriptRulesConfig",
    "TrialSpec",
    "UnstableField",
    "UserSimulatorConfig",
    "describe_validation_error",
    "mock_unmet_criteria",
]
