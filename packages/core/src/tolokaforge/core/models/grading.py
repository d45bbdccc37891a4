"""The grading configuration of a task, in the runner's form (TaskDescription.grading).

The host's pack loader translates grading.yaml into this; each field's docstring names the
grading.yaml key it comes from, because the accounted-keys ledger reports author-facing keys.
Supported JSONPath operators are listed on :class:`JsonPathCheck`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from ._base import SpecModel
from .judge import LLMJudgeConfig
from .trace_rules import TraceChecksConfig

__all__ = [
    "COMPONENT_NAMES",
    "FILE_CHECK_OPERATORS",
    "JSONPATH_OPERATORS",
    "CombineMethod",
    "CommunicateInfo",
    "ComponentName",
    "CustomChecksConfig",
    "FileCheck",
    "GoldenAction",
    "GradingConfig",
    "JsonPathCheck",
    "RequiredAction",
    "StateChecksConfig",
    "ToolExpectation",
    "TranscriptRulesConfig",
]

CombineMethod = Literal["weighted", "all", "any"]
ComponentName = Literal["state_checks", "transcript_rules", "llm_judge", "custom_checks", "trace_checks"]
COMPONENT_NAMES: tuple[ComponentName, ...] = (
    "state_checks",
    "transcript_rules",
    "llm_judge",
    "custom_checks",
    "trace_checks",
)

JSONPATH_OPERATORS = (
    "equals",
    "not_equals",
    "equals_ci",
    "contains",
    "contains_ci",
    "exists",
    "greater_than",
    "greater_or_equal",
    "less_than",
    "less_or_equal",
    "length",
)


class GoldenAction(SpecModel):
    """One step of the golden path (grading.yaml: state_checks.hash.golden_actions[] {name, kwargs})."""

    tool_name: str
    arguments: dict[str, Any] = {}


class JsonPathCheck(SpecModel):
    """An assertion over the trial's state (grading.yaml: state_checks.jsonpaths[]).

    ``path`` is a JSONPath rooted at ``$.db`` (or ``$.tables``, the same thing). Exactly one operator:
    equals / not_equals (JSON equality of the single match), equals_ci / contains / contains_ci
    (strings), exists (true: at least one match; false: none), greater_than / greater_or_equal /
    less_than / less_or_equal (numbers), length (number of matches, or the length of a single list
    match).
    """

    path: str = Field(min_length=1)
    description: str = ""
    equals: Any = None
    not_equals: Any = None
    equals_ci: str | None = None
    contains: Any = None
    contains_ci: str | None = None
    exists: bool | None = None
    greater_than: float | None = None
    greater_or_equal: float | None = None
    less_than: float | None = None
    less_or_equal: float | None = None
    length: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _exactly_one_operator(self) -> JsonPathCheck:
        given = [op for op in JSONPATH_OPERATORS if op in self.model_fields_set]
        if len(given) != 1:
            raise ValueError(
                f"jsonpath check {self.path!r} needs exactly one operator of {', '.join(JSONPATH_OPERATORS)}; "
                f"got {', '.join(given) or 'none'}"
            )
        return self

    @property
    def operator(self) -> str:
        return next(op for op in JSONPATH_OPERATORS if op in self.model_fields_set)

    @property
    def expected(self) -> Any:
        return getattr(self, self.operator)


FILE_CHECK_OPERATORS = ("contains", "contains_ci", "equals", "exists")


class FileCheck(SpecModel):
    """An assertion over the trial's workspace files (grading.yaml: a ``path_glob`` check).

    ``path_glob`` is a glob relative to the workspace. contains / contains_ci / equals hold when at
    least one matching file's text holds it; exists: true when something matches, false when nothing
    does. Exactly one operator.
    """

    path_glob: str = Field(min_length=1)
    description: str = ""
    contains: str | None = None
    contains_ci: str | None = None
    equals: str | None = None
    exists: bool | None = None

    @model_validator(mode="after")
    def _exactly_one_operator(self) -> FileCheck:
        given = [op for op in FILE_CHECK_OPERATORS if op in self.model_fields_set]
        if len(given) != 1:
            raise ValueError(
                f"file check {self.path_glob!r} needs exactly one operator of {', '.join(FILE_CHECK_OPERATORS)}; "
                f"got {', '.join(given) or 'none'}"
            )
        return self

    @property
    def operator(self) -> str:
        return next(op for op in FILE_CHECK_OPERATORS if op in self.model_fields_set)


class StateChecksConfig(SpecModel):
    """grading.yaml: state_checks."""

    hash_enabled: bool = False
    """state_checks.hash.enabled"""
    golden_actions: list[GoldenAction] = []
    """state_checks.hash.golden_actions"""
    hash_weight: float | None = Field(default=None, ge=0, le=1)
    """state_checks.hash.weight: the hash verdict's share when JSONPath checks score too."""
    jsonpaths: list[JsonPathCheck] = []
    """state_checks.jsonpaths"""
    files: list[FileCheck] = []
    """state_checks.jsonpaths[] with path_glob, and state_checks.files: checks over workspace files."""


class RequiredAction(SpecModel):
    """A tool call the transcript must contain (grading.yaml: transcript_rules.required_actions[])."""

    action_id: str = ""
    requestor: Literal["assistant", "user"] = "assistant"
    name: str = Field(min_length=1)
    arguments: dict[str, Any] = {}
    compare_args: list[str] | None = None
    """Only these arguments are compared; None compares every argument given in ``arguments``."""


class CommunicateInfo(SpecModel):
    """A fact the agent must tell the user (transcript_rules.communicate_info[])."""

    info: str = Field(min_length=1)
    required: bool = True


class ToolExpectation(SpecModel):
    """How often a tool may be called (transcript_rules.tool_expectations[])."""

    name: str = Field(min_length=1)
    min_calls: int | None = Field(default=None, ge=0)
    max_calls: int | None = Field(default=None, ge=0)


class TranscriptRulesConfig(SpecModel):
    """grading.yaml: transcript_rules."""

    max_turns: int | None = Field(default=None, gt=0)
    min_assistant_turns: int | None = Field(default=None, ge=0)
    must_contain: list[str] = []
    disallow_regex: list[str] = []
    required_actions: list[RequiredAction] = []
    communicate_info: list[CommunicateInfo] = []
    tool_expectations: list[ToolExpectation] = []


class CustomChecksConfig(SpecModel):
    """grading.yaml: custom_checks. Paths are relative to the task's code root."""

    enabled: bool = False
    file: str = Field(min_length=1)
    timeout_seconds: float = Field(default=30.0, gt=0)
    fail_on_error: bool = True
    """True: a suite that cannot run, or a check that errors, scores 0.0. False: the component is
    left unscored, and the grade's reasons say so."""
    relative_imports: list[str] = []
    """custom_checks.relative_imports: folders the checks file imports from (put on its sys.path)."""


class GradingConfig(SpecModel):
    """TaskDescription.grading. ``weights`` defaults to ``{}``: never a share nobody sent."""

    combine_method: CombineMethod
    weights: dict[ComponentName, float] = {}
    pass_threshold: float = Field(ge=0.0, le=1.0)
    state_checks: StateChecksConfig | None = None
    transcript_rules: TranscriptRulesConfig | None = None
    llm_judge: LLMJudgeConfig | None = None
    custom_checks: CustomChecksConfig | None = None
    trace_checks: TraceChecksConfig | None = None
    """grading.yaml: trace_checks (docs/trace-checks.md)."""

    @classmethod
    def not_configured(cls) -> GradingConfig:
        """The deliberately non-scoring shape: nothing configured, nothing weighted (grades 1.0, pass)."""
        return cls(combine_method="weighted", pass_threshold=1.0)
