"""The grading configuration of a task, in the runner's form (TaskDescription.grading).

The host's pack loader translates grading.yaml into this; each field's docstring names the
grading.yaml key it comes from, because the accounted-keys ledger reports author-facing keys.
Supported JSONPath operators are listed on :class:`JsonPathCheck`.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import Field, field_validator, model_validator

from ..termination import TerminationReason
from ._base import SpecModel
from .judge import LLMJudgeConfig
from .trace_rules import TraceChecksConfig
from .web import WebChecksConfig

__all__ = [
    "COMPONENT_NAMES",
    "FILE_CHECK_OPERATORS",
    "JSONPATH_OPERATORS",
    "CombineMethod",
    "CommunicateInfo",
    "ComponentName",
    "CustomChecksConfig",
    "EnvAssertion",
    "EnvAssertionsConfig",
    "FileCheck",
    "GoldenAction",
    "GradingConfig",
    "JsonPathCheck",
    "RequiredAction",
    "StateChecksConfig",
    "Tau2Action",
    "Tau2ActionsConfig",
    "Tau2CommunicateConfig",
    "TerminalTestsConfig",
    "ToolExpectation",
    "TranscriptRulesConfig",
]

CombineMethod = Literal["weighted", "all", "any"]
ComponentName = Literal[
    "state_checks",
    "transcript_rules",
    "llm_judge",
    "custom_checks",
    "trace_checks",
    "env_assertions",
    "tau2_actions",
    "tau2_communicate",
    "terminal_tests",
    "web_checks",
]
COMPONENT_NAMES: tuple[ComponentName, ...] = get_args(ComponentName)

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
    """One step of the golden path (grading.yaml: state_checks.hash.golden_actions[] {name, kwargs, executor})."""

    tool_name: str
    arguments: dict[str, Any] = {}
    executor: Literal["agent", "user"] = "agent"
    """Whose tools the replay calls it with: the agent's, or the simulated user's (a device-side step)."""


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
    golden_errors: Literal["fail", "keep"] = "fail"
    """state_checks.hash.golden_errors: "fail" -- a golden action that does not succeed fails grading
    (the golden path is broken); "keep" -- a golden action the tool itself answers with an error is a
    step of the golden path as written (its committed changes stay), and the replay goes on. A call
    that times out, crashes, names no tool or has invalid arguments fails grading either way."""


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


class Tau2Action(SpecModel):
    """An action the trial must contain, matched by τ²-bench's rule (grading.yaml: tau2_actions[]).

    A recorded call matches when it names exactly this tool and the two argument objects agree on
    the compared keys by Python equality. The compared keys are ``compare_args``; when that is None,
    the keys of the *call's* arguments (so an argument the action lists but the call left out is not
    compared, and one the call added is). No compared key at all matches any call of the tool.
    """

    action_id: str = ""
    name: str = Field(min_length=1)
    arguments: dict[str, Any] = {}
    compare_args: list[str] | None = None


class Tau2ActionsConfig(SpecModel):
    """grading.yaml: tau2_actions. Scores 1 when every action matches some recorded call, else 0."""

    actions: list[Tau2Action]


class Tau2CommunicateConfig(SpecModel):
    """grading.yaml: tau2_communicate. Scores 1 when every string was said, by τ²-bench's rule:
    found, ignoring case, in one assistant message with its commas removed. An empty list scores 1."""

    info: list[str]


class EnvAssertion(SpecModel):
    """One assertion on the trial's final state (grading.yaml: env_assertions[]).

    The runner calls ``tool_name`` with ``arguments`` through the ``executor``'s tools, reads the
    output as JSON and compares it with ``expected`` by JSON equality (``true`` is not ``1``). The
    tool is usually a hidden one (never offered to the model).
    """

    tool_name: str = Field(min_length=1)
    arguments: dict[str, Any] = {}
    executor: Literal["agent", "user"] = "agent"
    expected: Any
    message: str = ""
    """What the assertion stands for, named in the grade when it does not hold."""


class EnvAssertionsConfig(SpecModel):
    """grading.yaml: env_assertions. Run in order on a scratch copy of the trial's final state (each
    sees the previous ones' writes; the trial's state is unchanged afterwards). Scores 1 when all hold."""

    assertions: list[EnvAssertion]


class TerminalTestsConfig(SpecModel):
    """A Terminal-Bench verifier (a task folder's ``tests/``), run after the episode (docs/terminal.md).

    The runner writes ``files`` to a fresh folder seen at ``/tests``, runs ``bash /tests/<script>`` in
    the trial's sandbox with the workspace as ``workdir`` and ``/logs/verifier`` writable, under
    ``timeout_s``. The score is the reward the script writes (``reward.txt`` or ``reward.json`` there);
    without one, exit status 0 scores 1 and anything else 0. The files never reach the agent: they
    travel only here.
    """

    files: dict[str, str] = Field(min_length=1)
    """tests/ as relative POSIX path -> text."""
    script: str = Field(default="test.sh", min_length=1)
    timeout_s: float = Field(default=120.0, gt=0)
    workdir: str = Field(default="/app", pattern=r"^/")
    """Where the workspace is seen inside the verifier's sandbox (the Dockerfile's WORKDIR)."""
    env: dict[str, str] = {}
    """Extra environment for the script (task.toml: verifier.env)."""

    @model_validator(mode="after")
    def _script_is_a_file(self) -> TerminalTestsConfig:
        if self.script not in self.files:
            raise ValueError(f"terminal_tests: script {self.script!r} is not one of the files")
        for path in self.files:
            parts = path.split("/")
            if not path or path.startswith("/") or "\\" in path or ".." in parts:
                raise ValueError(f"terminal_tests: {path!r} must be a relative path that stays inside tests/")
        return self


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
    env_assertions: EnvAssertionsConfig | None = None
    """grading.yaml: env_assertions."""
    tau2_actions: Tau2ActionsConfig | None = None
    """grading.yaml: tau2_actions."""
    tau2_communicate: Tau2CommunicateConfig | None = None
    """grading.yaml: tau2_communicate."""
    terminal_tests: TerminalTestsConfig | None = None
    """A Terminal-Bench task's tests/test.sh (built by the terminal loader, not written in grading.yaml)."""
    web_checks: WebChecksConfig | None = None
    """grading.yaml: web_checks, a list of checks on what the trial's browser saw (docs/web-tasks.md)."""
    zero_unless_ended_by: list[str] | None = Field(default=None, min_length=1)
    """grading.yaml: zero_unless_ended_by. TerminationReason values; a trial whose termination reason
    is not one of them scores 0 and fails, whatever its components say (they are still computed and
    reported). None: no such rule."""

    @field_validator("zero_unless_ended_by")
    @classmethod
    def _known_endings(cls, endings: list[str] | None) -> list[str] | None:
        known = [reason.value for reason in TerminationReason]
        unknown = [ending for ending in endings or [] if ending not in known]
        if unknown:
            raise ValueError(
                f"names no termination reason: {', '.join(map(repr, unknown))} (known: {', '.join(known)})"
            )
        return endings

    @classmethod
    def not_configured(cls) -> GradingConfig:
        """The deliberately non-scoring shape: nothing configured, nothing weighted (grades 1.0, pass)."""
        return cls(combine_method="weighted", pass_threshold=1.0)
