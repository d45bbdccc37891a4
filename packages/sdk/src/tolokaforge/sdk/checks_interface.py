"""The checks.py authoring interface (version 1.0): ``@init``, ``@check`` and what they receive and return.

A checks file in this style::

    from tolokaforge.sdk.checks_interface import CheckContext, CheckFailed, CheckPassed, check, init

    @init(interface_version="1.0")
    def setup(ctx: CheckContext) -> None:
        global orders
        orders = ctx.final_state.get("orders", [])

    @check
    def one_order_was_placed() -> CheckPassed | CheckFailed:
        return CheckPassed("one order") if len(orders) == 1 else CheckFailed(f"{len(orders)} orders")

The harness (checks_runner.py) imports the file in a fresh interpreter, calls the ``@init`` function
once with the trial's :class:`CheckContext`, then every ``@check`` in the order they were declared.
A check's name is its function's name. ``CheckSkipped`` reaches no verdict and does not count.
"""

from __future__ import annotations

from collections.abc import Callable, ItemsView, KeysView, ValuesView
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CHECKS_INTERFACE_VERSION",
    "SUPPORTED_VERSIONS",
    "CheckContext",
    "CheckFailed",
    "CheckPassed",
    "CheckResult",
    "CheckResultSet",
    "CheckReturnType",
    "CheckSkipped",
    "CheckStatus",
    "EnvironmentState",
    "Message",
    "TaskContext",
    "ToolCall",
    "ToolCallStatus",
    "Transcript",
    "check",
    "get_init_func",
    "get_interface_version",
    "get_registered_checks",
    "init",
    "reset_registry",
]

CHECKS_INTERFACE_VERSION = "1.0"
SUPPORTED_VERSIONS: tuple[str, ...] = ("1.0",)


class CheckStatus(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    SKIPPED = "skipped"


class ToolCallStatus(StrEnum):
    SUCCESS = "success"
    ERROR = "error"


class ToolCall(BaseModel):
    """One tool call of the trial, with the text its result showed the model."""

    model_config = ConfigDict(use_enum_values=True)

    name: str
    arguments: dict[str, Any] = {}
    result: str | None = None
    status: ToolCallStatus = ToolCallStatus.SUCCESS
    timestamp: datetime | None = None


class Message(BaseModel):
    """One message of the transcript; unknown fields are kept, for files written against newer shapes."""

    model_config = ConfigDict(extra="allow")

    role: str
    content: str
    tool_calls: list[ToolCall] = []
    name: str | None = None


class Transcript(BaseModel):
    messages: list[Message] = []

    @property
    def agent_messages(self) -> list[Message]:
        return [m for m in self.messages if m.role == "assistant"]

    @property
    def user_messages(self) -> list[Message]:
        return [m for m in self.messages if m.role == "user"]

    @property
    def all_tool_calls(self) -> list[ToolCall]:
        return [call for m in self.messages for call in m.tool_calls]

    @property
    def last_assistant_response(self) -> str | None:
        for message in reversed(self.messages):
            if message.role == "assistant":
                return message.content
        return None


class EnvironmentState(BaseModel):
    """The trial's tables at one moment, readable as a mapping or by a dotted path."""

    data: dict[str, Any] = {}

    def get(self, path: str, default: Any = None) -> Any:
        """The value at ``a.b.c`` (mapping keys only), or ``default`` when any step is missing."""
        current: Any = self.data
        for part in path.split("."):
            if not isinstance(current, dict) or part not in current:
                return default
            current = current[part]  # pyright: ignore[reportUnknownVariableType]
        return default if current is None else current  # pyright: ignore[reportUnknownVariableType]

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __contains__(self, key: object) -> bool:
        return key in self.data

    def keys(self) -> KeysView[str]:
        return self.data.keys()

    def items(self) -> ItemsView[str, Any]:
        return self.data.items()

    def values(self) -> ValuesView[Any]:
        return self.data.values()


class TaskContext(BaseModel):
    task_id: str
    task_name: str = ""
    task_description: str = ""
    domain: str = ""
    """The task's category."""
    tags: list[str] = []
    extra: dict[str, Any] = {}


class CheckContext(BaseModel):
    """Everything a checks file may read: the state before and after, the transcript, the task."""

    interface_version: str = CHECKS_INTERFACE_VERSION
    initial_state: EnvironmentState
    """The tables the task declares it starts with."""
    final_state: EnvironmentState
    """The trial's tables when it was graded."""
    transcript: Transcript
    task: TaskContext

    @property
    def effects(self) -> dict[str, Any]:
        """The final tables (an older name for ``final_state.data``)."""
        return self.final_state.data

    @property
    def tool_calls(self) -> list[ToolCall]:
        return self.transcript.all_tool_calls

    @property
    def response(self) -> str | None:
        return self.transcript.last_assistant_response


class _Verdict(BaseModel):
    message: str
    score: float = Field(ge=0.0, le=1.0)
    details: dict[str, Any] = {}


class CheckPassed(_Verdict):
    def __init__(self, message: str = "Check passed", **fields: Any) -> None:
        fields.setdefault("score", 1.0)
        super().__init__(message=message, **fields)


class CheckFailed(_Verdict):
    def __init__(self, message: str = "Check failed", **fields: Any) -> None:
        fields.setdefault("score", 0.0)
        super().__init__(message=message, **fields)


class CheckSkipped(BaseModel):
    message: str

    def __init__(self, message: str = "Check skipped", **fields: Any) -> None:
        super().__init__(message=message, **fields)


CheckReturnType: TypeAlias = CheckPassed | CheckFailed | CheckSkipped


class CheckResult(BaseModel):
    """One check's outcome, as the harness reports it."""

    model_config = ConfigDict(use_enum_values=True)

    check_name: str
    status: CheckStatus
    score: float = Field(default=1.0, ge=0.0, le=1.0)
    message: str = ""
    details: dict[str, Any] = {}


class CheckResultSet(BaseModel):
    results: list[CheckResult] = []
    error: str | None = None
    """Why the suite could not run at all."""
    execution_time_ms: float = 0.0

    def _count(self, status: CheckStatus) -> int:
        return sum(1 for r in self.results if r.status == status.value)

    @property
    def passed(self) -> int:
        return self._count(CheckStatus.PASSED)

    @property
    def failed(self) -> int:
        return self._count(CheckStatus.FAILED)

    @property
    def errors(self) -> int:
        return self._count(CheckStatus.ERROR)

    @property
    def skipped(self) -> int:
        return self._count(CheckStatus.SKIPPED)

    @property
    def total(self) -> int:
        return len(self.results)

    @property
    def decided(self) -> list[CheckResult]:
        return [r for r in self.results if r.status != CheckStatus.SKIPPED.value]

    @property
    def aggregate_score(self) -> float:
        """Mean score of the checks that reached a verdict (0.0 when none did)."""
        decided = self.decided
        return sum(r.score for r in decided) / len(decided) if decided else 0.0

    @property
    def all_passed(self) -> bool:
        return all(r.status == CheckStatus.PASSED.value for r in self.decided)


CheckFunction = Callable[[], CheckReturnType]
InitFunction = Callable[[CheckContext], None]


@dataclass
class _Registry:
    """What decorating a checks file recorded; the harness resets it before importing one."""

    checks: dict[str, CheckFunction] = field(default_factory=dict[str, CheckFunction])
    init: InitFunction | None = None
    version: str = CHECKS_INTERFACE_VERSION


_registry = _Registry()


def init(interface_version: str = CHECKS_INTERFACE_VERSION) -> Callable[[InitFunction], InitFunction]:
    """Mark the function that receives the :class:`CheckContext` once, before any check runs."""

    def register(function: InitFunction) -> InitFunction:
        _registry.init = function
        _registry.version = interface_version
        return function

    return register


def check(function: CheckFunction) -> CheckFunction:
    """Mark a zero-argument function returning CheckPassed / CheckFailed / CheckSkipped as a check."""
    _registry.checks[function.__name__] = function
    return function


def get_registered_checks() -> dict[str, CheckFunction]:
    return dict(_registry.checks)


def get_init_func() -> InitFunction | None:
    return _registry.init


def get_interface_version() -> str:
    return _registry.version


def reset_registry() -> None:
    global _registry
    _registry = _Registry()
