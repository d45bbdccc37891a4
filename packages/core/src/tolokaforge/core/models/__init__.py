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
    "JSONPATH_OPERATORS",
    "CombineMethod",
    "CommunicateInfo",
    "ComponentName",
    "CustomChecksConfig",
    "GoldenAction",
    "GradingConfig",
    "InitialState",
    "InitializationAction",
    "JsonPathCheck",
    "RequiredAction",
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
]
