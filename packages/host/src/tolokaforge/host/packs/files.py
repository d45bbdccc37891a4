"""The author-facing files of a pack as strict models: pack.yaml, task.yaml and grading.yaml.

Every model refuses unknown keys, so a typo is an error that names the key rather than a setting that
silently does nothing. Two styles are read: ours, and the public Tolokaforge's (``actors.user``,
``{role, content}`` scripted turns, inline ``json_db``, the ``op``/``expected`` JSONPath form, the
mapping form of ``tool_expectations`` ...). A public key whose meaning this harness does not carry is
still declared here, so that the translation step can refuse it with the reason instead of pydantic's
bare "unknown key". Blocks whose shape is the runner's own reuse the core models where they can.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tolokaforge.core.models import (
    CombineMethod,
    CommunicateInfo,
    ComponentName,
    EnvAssertionsConfig,
    RequiredAction,
    Tau2ActionsConfig,
    Tau2CommunicateConfig,
    ToolExpectation,
    TraceChecksConfig,
    UnstableField,
    WebCheck,
)

__all__ = [
    "AgentToolsFile",
    "CombineFile",
    "CustomChecksFile",
    "FileCopyFile",
    "FilesystemFile",
    "GoldenActionFile",
    "GradingFile",
    "HashFile",
    "InitialStateFile",
    "InlineFileFile",
    "InlineWorkspaceFile",
    "JsonPathFile",
    "PackFile",
    "PublicEnvAssertionFile",
    "ScriptedTurnFile",
    "StateChecksFile",
    "TaskFile",
    "ToolExpectationsFile",
    "ToolsFile",
    "TranscriptRulesFile",
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
    requires: list[str] = []
    """Python distributions the pack's code imports (``name`` or ``name>=x``); validate checks them."""


class GoldenActionFile(_Strict):
    """grading.yaml: state_checks.hash.golden_actions[]."""

    name: str = Field(min_length=1)
    kwargs: dict[str, Any] = {}
    executor: Literal["agent", "user"] = "agent"
    """Whose tools replay it: the agent's (default) or the simulated user's."""


class HashFile(_Strict):
    enabled: bool = False
    weight: float | None = Field(default=None, ge=0, le=1)
    description: str = ""
    """Public style: what the hash check stands for, for the pack's readers (the grade names the verdict)."""
    golden_actions: list[GoldenActionFile] = []
    golden_errors: Literal["fail", "keep"] = "fail"
    """keep: a golden action the tool answers with its own error stays a step of the golden path."""
    expected_state_hash: str | None = None
    """Public style; refused (a literal digest of another hash algorithm grades nothing here)."""


class JsonPathFile(_Strict):
    """grading.yaml: state_checks.jsonpaths[], in either style.

    Ours: ``path`` plus exactly one operator key. Public: ``op`` + ``expected`` instead of the operator
    key, ``reason`` for ``description``, ``required``, and ``path_glob`` (a file check over the trial's
    workspace instead of a JSONPath over its tables).
    """

    path: str | None = None
    path_glob: str | None = None
    description: str = ""
    reason: str | None = None
    required: bool | None = None
    op: str | None = None
    expected: Any = None
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
    length: int | None = None
    must_exist: bool | None = None
    """Public ``files[]`` form, with ``path``: the file exists (true) or does not (false)."""
    must_contain: str | None = None
    """Public ``files[]`` form, with ``path``: the file's text contains this."""


class PublicEnvAssertionFile(_Strict):
    """Public style: state_checks.env_assertions[], a function of the final state compared with a value."""

    env_type: Literal["assistant", "user"] = "user"
    """The public runner's default (its adapter reads env assertions with env_type "user" unless given)."""
    func_name: str | None = Field(default=None, min_length=1)
    tool_name: str | None = Field(default=None, min_length=1)
    """The public runner's adapter reads this name; its model calls it ``func_name``. Give one."""
    arguments: dict[str, Any] = {}
    assert_value: Any = True
    message: str | None = None


class StateChecksFile(_Strict):
    hash: HashFile | None = None
    jsonpaths: list[JsonPathFile] = []
    files: list[JsonPathFile] | None = None
    """File checks: ``path_glob`` checks, or public style ``{path, must_exist, must_contain}``."""
    env_assertions: list[PublicEnvAssertionFile] = []
    """Public style: graded as our env_assertions component (grading.py says how)."""
    db_hash_check: bool = False
    """Public style; true is refused (it compares with a literal digest, see hash.expected_state_hash)."""


class CombineFile(_Strict):
    method: CombineMethod
    weights: dict[ComponentName, float] = {}
    pass_threshold: float = Field(ge=0.0, le=1.0)


class CustomChecksFile(_Strict):
    enabled: bool = False
    file: str = Field(default="checks.py", min_length=1)
    timeout_seconds: float = Field(default=30.0, gt=0)
    fail_on_error: bool = True
    """As in public packs: a suite that cannot run fails the grade unless this says false."""
    interface_version: str | None = None
    """Public style: the checks_interface version the file was written for ("1.0")."""
    relative_imports: list[str] = []
    """Public style: folders (relative to the task's folder) the checks file imports from."""
    weight: float | None = Field(default=None, ge=0, le=1)
    """Public style: the suite's weight inside its own aggregate; only 1.0 has a meaning here."""


class ToolExpectationsFile(_Strict):
    """Public style ``tool_expectations`` mapping."""

    required_tools: list[str] = []
    """Each must be called at least once."""
    disallowed_tools: list[str] = []
    """Each must never be called."""


class TranscriptRulesFile(_Strict):
    max_turns: int | None = Field(default=None, gt=0)
    min_assistant_turns: int | None = Field(default=None, ge=0)
    must_contain: list[str] = []
    must_contain_phrases: list[str] = []
    """Public style: same meaning as ``must_contain``."""
    disallow_regex: list[str] = []
    required_actions: list[RequiredAction] = []
    communicate_info: list[CommunicateInfo] = []
    tool_expectations: list[ToolExpectation] | ToolExpectationsFile = []


class LegacyJudgeFile(_Strict):
    """The public project's older llm_judge: one rubric text, scored 0..1 by the judge model."""

    rubric: str = Field(min_length=1)
    model_ref: str | None = None
    """The public project's judge model; here the run names the judge model (--judge-model)."""
    output_schema: dict[str, Any] | None = None
    """Accepted only when it asks for what the public judge reads: ``score`` (and ``reasons``)."""
    agentic: bool = False
    system_prompt: str | None = None
    tool_packs: list[str] = []
    """Refused when non-empty: the judge's tools here are fixed (docs/judge.md)."""


class GradingFile(_Strict):
    """grading.yaml (or a task's inline ``grading:`` block)."""

    combine: CombineFile
    state_checks: StateChecksFile | None = None
    transcript_rules: TranscriptRulesFile | None = None
    golden_response: str | None = None
    llm_judge: dict[str, Any] | None = None
    """Ours (``rubric: {criteria}``, :class:`LLMJudgeConfig`) or the legacy public shape
    (:class:`LegacyJudgeFile`); grading.py tells them apart by the rubric's type."""
    custom_checks: CustomChecksFile | None = None
    trace_checks: TraceChecksConfig | None = None
    env_assertions: EnvAssertionsConfig | None = None
    tau2_actions: Tau2ActionsConfig | None = None
    tau2_communicate: Tau2CommunicateConfig | None = None
    web_checks: list[WebCheck] | None = Field(default=None, min_length=1)
    """A list of checks on what the trial's browser saw (docs/web-tasks.md)."""
    zero_unless_ended_by: list[str] | None = None
    """TerminationReason values (checked by GradingConfig)."""


class FileCopyFile(BaseModel):
    """initial_state.filesystem.copy[]: a pack file copied into the trial's workspace."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    from_: str = Field(alias="from", min_length=1)
    to: str = Field(min_length=1)


class FilesystemFile(_Strict):
    copy_: list[FileCopyFile] = Field(default=[], alias="copy")


class InlineFileFile(_Strict):
    """initial_state.workspace.files[]: a file of the trial's workspace, its text written in task.yaml."""

    path: str = Field(min_length=1)
    content: str


class InlineWorkspaceFile(_Strict):
    """Public style ``initial_state.workspace: {files: [...]}`` (instead of a pack folder)."""

    files: list[InlineFileFile] = []


class InitializationActionFile(_Strict):
    """initial_state.initialization_actions[]: ours names the tool ``tool_name``, public style ``func_name``."""

    env_type: Literal["assistant", "user"] = "assistant"
    tool_name: str | None = None
    func_name: str | None = None
    arguments: dict[str, Any] = {}


class InitialStateFile(_Strict):
    json_db: str | dict[str, Any] | None = None
    """A JSON file (or, public style, the object itself): ``{table: [records]}`` or ``{table: {key: record}}``."""
    tables: dict[str, Any] | None = None
    """Inline tables, instead of ``json_db``."""
    unstable_fields: list[UnstableField] = []
    initialization_actions: list[InitializationActionFile] = []
    filesystem: FilesystemFile | None = None
    """Public style: files placed in the trial's workspace before it starts."""
    workspace: str | InlineWorkspaceFile | None = None
    """A pack folder whose files become the trial's workspace, or public style ``{files: [{path, content}]}``."""
    device_overrides: dict[str, Any] | None = None
    """Public style: keys set in the ``device`` value of ``json_db`` before the trial starts."""
    system_prompt: str | None = None
    """Public style; refused (the public project does not read it either: give the task's system_prompt)."""
    mock_web: dict[str, Any] | None = None
    """Public style: the task's mock web site (``base_url``), reached by ``http_request`` (services.py)."""
    rag: dict[str, Any] | None = None
    """Public style: the task's documents (``corpus_dir``), searched by ``search_kb`` (services.py)."""


class AgentToolsFile(_Strict):
    python: str | None = None
    mcp_server: str | None = None
    enabled: list[str] | None = None
    """None offers every tool of the module's TOOLS that is not a user-side tool."""
    browser: dict[str, Any] | None = None
    """The ``browser`` tool's settings (public ``initial_url``, ``allowed_actions``; ours ``viewport``,
    ``screenshots``, ``vision``); browser_block.py reads them."""
    mobile: Any = None
    """Public style; refused (the public mobile tool has no counterpart here)."""


class UserToolsFile(_Strict):
    enabled: list[str] = []


class ToolsFile(_Strict):
    agent: AgentToolsFile | None = None
    user: UserToolsFile | None = None


class ScriptedTurnFile(_Strict):
    """One scripted user turn: ``{user: text}``, or public style ``{role: user, content: text}``."""

    user: str | None = None
    role: str | None = None
    content: str | None = None
    if_assistant_contains: str | None = None
    """Public style; refused (turns are said in order here)."""
    default: str | None = None
    """Public style; refused with ``if_assistant_contains``."""


class UserSimulatorFile(_Strict):
    mode: Literal["scripted", "llm"] = "scripted"
    persona: str = ""
    backstory: str = ""
    scripted_flow: list[ScriptedTurnFile] = []


class ActorsFile(_Strict):
    """Public style: ``actors.user`` is our ``user_simulator``."""

    user: UserSimulatorFile | None = None


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
    actors: ActorsFile | None = None
    policies: dict[str, Any] = {}
    metadata: dict[str, Any] = {}
    """Public style: free-form analytics labels; carried, never graded."""
    adapter_type: str | None = None
    """Public style: which public adapter reads the task; only ``native`` (this loader) is accepted."""
    adapter_settings: dict[str, Any] | None = None
    """Public style: the adapter's own settings; ``native`` reads none, so only an empty mapping is accepted."""
    grading: str | GradingFile | None = None
