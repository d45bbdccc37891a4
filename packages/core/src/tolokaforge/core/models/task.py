"""TaskDescription: what the runner needs to know about one task (docs/protocol/runner.md#registertrial, spec.task).

The host's pack loader builds it from task.yaml / grading.yaml; the runner validates it on
RegisterTrial. Grading configuration lives in :mod:`tolokaforge.core.models.grading`.
"""

from __future__ import annotations

from typing import Any, Literal, cast

from pydantic import Field, field_validator, model_validator

from ._base import SpecModel
from .conversation import ConversationRules
from .grading import GradingConfig
from .trace_rules import trace_check_tool_problems
from .web import BrowserSettings

__all__ = [
    "InitialState",
    "InitializationAction",
    "TableSchemaSpec",
    "TaskDescription",
    "ToolCode",
    "ToolDescription",
    "ToolServer",
    "ToolSource",
    "UnstableField",
    "UserSimulatorConfig",
]

InvocationStyle = Literal["tau_sync"]


class ToolSource(SpecModel):
    """Where the runner finds a tool's code: a class in a module of the task's ToolCode."""

    toolset: str = ""
    module_path: str = Field(
        min_length=1, description="Dotted module path relative to the code root, e.g. 'tools.orders'."
    )
    class_name: str = Field(min_length=1)
    invocation_style: InvocationStyle = "tau_sync"


class ToolDescription(SpecModel):
    """One tool as offered to the model, in OpenAI function form plus where its code lives."""

    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    source: ToolSource
    category: Literal["read", "write", "compute"] | None = None
    timeout_s: float | None = Field(default=None, gt=0)
    validate_arguments: bool = True
    """False: the runner does not check a call's arguments against ``parameters``; any JSON object is
    passed to the tool as is (the tool's own refusal, e.g. Python's TypeError, is then the answer)."""
    hidden: bool = False
    """True: registered and callable by the runner itself (initialization actions, golden replay,
    grading), but never offered: RegisterTrial lists it in no tool schema, and ExecuteTool naming it
    answers TOOL_NOT_FOUND exactly as for a tool that does not exist."""


class ToolCode(SpecModel):
    """The task's tool code: a directory the runner can read, or the files themselves (remote runners).

    Exactly one of ``path`` and ``files`` is set. ``files`` maps POSIX relative paths to their text;
    ``module_path`` of each ToolSource is resolved against this root.
    """

    path: str | None = None
    files: dict[str, str] | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> ToolCode:
        if (self.path is None) == (self.files is None):
            raise ValueError("tool_code needs exactly one of 'path' and 'files'")
        return self


class ToolServer(SpecModel):
    """An out-of-process tool source the runner starts once per trial; its tools come from the server.

    ``protocol`` "mcp" is a stdio MCP server (it gets ``TOLOKAFORGE_DB_URL`` and ``TOLOKAFORGE_TRIAL_ID``
    so it keeps its tables in the DB service); "provider" is a ToolProviderService plugin that
    announces a gRPC address on stdout. The process is ``script`` (a Python file relative to the task's
    code root, run with the runner's interpreter) or ``command`` (an argv run as is). It runs in the
    code root when the task has tool code, else in the trial's workspace. The tools it offers are
    named ``prefix`` + the server's own name, and ``enabled`` (server names) picks a subset.
    """

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    protocol: Literal["mcp", "provider"]
    script: str | None = Field(default=None, min_length=1)
    command: list[str] | None = Field(default=None, min_length=1)
    actor: Literal["agent", "user"] = "agent"
    prefix: str = Field(default="", max_length=64, pattern=r"^[A-Za-z0-9_.-]*$")
    enabled: list[str] | None = None
    config: dict[str, Any] = {}
    """Sent to a provider's Configure as JSON; must be empty for an MCP server."""
    env: dict[str, str] = {}
    workspace_mount: str | None = Field(default=None, pattern=r"^/")
    """A provider's second path for the trial's workspace, inside the sandbox, where its calls then
    work (a Terminal-Bench task's WORKDIR, ``/app``); absent: the workspace's own path. Sandbox only."""
    timeout_s: float | None = Field(default=None, gt=0)
    """Budget of this server's tools that declare none; absent means the trial's default."""

    @field_validator("workspace_mount")
    @classmethod
    def _plain_absolute(cls, mount: str | None) -> str | None:
        # One spelling per place: the runner compares it with the paths every sandbox needs, and
        # "/usr/..", "/./" or "//" would name the root without looking like it.
        if mount is None or mount == "/":
            return mount
        parts = mount.split("/")[1:]
        if any(part in ("", ".", "..") for part in parts) or "\0" in mount:
            raise ValueError(
                f"'workspace_mount' must be a plain absolute path (no '.', '..', '//' or trailing '/'): {mount!r}"
            )
        return mount

    @model_validator(mode="after")
    def _one_launcher(self) -> ToolServer:
        if (self.script is None) == (self.command is None):
            raise ValueError("a tool server needs exactly one of 'script' and 'command'")
        if self.protocol == "mcp" and self.config:
            raise ValueError("'config' is for provider servers; an MCP server takes none")
        return self


class TableSchemaSpec(SpecModel):
    table_name: str
    record_schema: dict[str, Any]


class UnstableField(SpecModel):
    """A field excluded from the stable hash, in every record of its table."""

    table_name: str = Field(min_length=1)
    field_name: str = Field(min_length=1)
    reason: Literal["auto_id", "timestamp", "llm_generated", "random"] | None = None


class InitializationAction(SpecModel):
    """A tool call run once before the trial starts (and again on ResetTrial if asked)."""

    env_type: Literal["assistant", "user"] = "assistant"
    tool_name: str = Field(min_length=1)
    arguments: dict[str, Any] = {}


class InitialState(SpecModel):
    tables: dict[str, Any] = {}
    """Each table a list of records or an object mapping keys to records; a record is a JSON object.

    Checked by :meth:`_table_shapes` rather than by a typed union, which would rebuild every record
    of a large state (the records are taken as parsed, never copied)."""
    schemas: list[TableSchemaSpec] = []
    unstable_fields: list[UnstableField] = []
    initialization_actions: list[InitializationAction] = []
    workspace_files: dict[str, str] = {}
    """The files the trial's workspace starts with (again after ResetTrial): workspace path -> path of
    a file in the task's code. Both are relative POSIX paths that stay inside their roots."""

    @field_validator("tables")
    @classmethod
    def _table_shapes(cls, tables: dict[str, Any]) -> dict[str, Any]:
        for name, table in tables.items():
            if type(table) is dict:
                records = cast(dict[str, Any], table).values()
            elif type(table) is list:
                records = cast(list[Any], table)
            else:
                raise ValueError(
                    f"table {name!r} must be a list of records or an object of records, not {type(table).__name__}"
                )
            # map/set run in C: checking 100k records costs milliseconds.
            kinds = set(map(type, records))
            if not kinds <= {dict}:
                found = ", ".join(sorted(kind.__name__ for kind in kinds - {dict}))
                raise ValueError(f"table {name!r}: every record must be a JSON object (found {found})")
        return tables

    @model_validator(mode="after")
    def _relative_workspace_paths(self) -> InitialState:
        for target, source in self.workspace_files.items():
            for path in (target, source):
                parts = path.split("/")
                if not path or path.startswith("/") or "\\" in path or ".." in parts:
                    raise ValueError(
                        f"workspace_files: {path!r} must be a relative path that stays inside its root"
                    )
        return self

    @property
    def provisions_database(self) -> bool:
        """Whether the task declares any state at all (tables, schemas or unstable fields)."""
        return bool(self.tables or self.schemas or self.unstable_fields)


class UserSimulatorConfig(SpecModel):
    mode: Literal["scripted", "llm"] = "scripted"
    persona: str = ""
    backstory: str = ""
    scripted_flow: list[dict[str, Any]] = []
    system_prompt: str = ""
    """The LLM user's whole system prompt, given by the pack (τ²: its guidelines and the scenario). Set, the
    LLM user uses it verbatim instead of building one from the persona and backstory."""


class TaskDescription(SpecModel):
    """The whole task, as the runner receives it inside a TrialSpec."""

    task_id: str = Field(min_length=1, max_length=160, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    name: str = ""
    category: str = ""
    description: str = ""
    adapter_type: Literal["tau", "native"] = "tau"
    schema_version: str = "1.0.0"
    system_prompt: str = ""
    initial_user_message: str = ""
    max_turns: int | None = Field(default=None, gt=0)
    agent_tools: list[ToolDescription] = []
    user_tools: list[ToolDescription] = []
    tool_code: ToolCode | None = None
    tool_servers: list[ToolServer] = []
    """Out-of-process tool sources (MCP servers, tool-provider plugins), started per trial."""
    initial_state: InitialState = Field(default_factory=InitialState)
    grading: GradingConfig = Field(default_factory=GradingConfig.not_configured)
    user_simulator: UserSimulatorConfig | None = None
    policies: dict[str, Any] = {}
    golden_response: str | None = None
    conversation: ConversationRules | None = None
    """How the conversation runs (docs/conversation.md); None: the harness's own loop, as it always ran."""
    browser: BrowserSettings | None = None
    """The agent is offered the runner's ``browser`` tool on these settings (docs/web-tasks.md); None: no browser."""

    @model_validator(mode="after")
    def _tool_names_unique_per_actor(self) -> TaskDescription:
        for actor, tools in (("agent_tools", self.agent_tools), ("user_tools", self.user_tools)):
            seen: set[str] = set()
            for tool in tools:
                if tool.name in seen:
                    raise ValueError(f"{actor}: tool name {tool.name!r} appears twice")
                seen.add(tool.name)
        if (self.agent_tools or self.user_tools) and self.tool_code is None:
            raise ValueError("tools are declared but tool_code (where their code lives) is missing")
        names = [server.name for server in self.tool_servers]
        if len(names) != len(set(names)):
            raise ValueError("tool_servers: server names must be unique")
        for server in self.tool_servers:
            if server.script is not None and self.tool_code is None:
                raise ValueError(f"tool_servers: {server.name!r} names a script but tool_code is missing")
        trace_checks = self.grading.trace_checks
        if trace_checks is not None and not self.tool_servers:
            # A server's tools are known only once it runs; otherwise a name no tool has never matches.
            tools = [tool.name for tool in (*self.agent_tools, *self.user_tools)]
            problems = trace_check_tool_problems(trace_checks, tools)
            if problems:
                raise ValueError("; ".join(problems))
        return self
