"""Out-of-process tool sources: the lifecycle they share and the tools they produce.

A source (an MCP server, a tool-provider plugin) is one child process per trial behind a small
lifecycle: ``setup`` starts it and returns its operations, ``invoke`` runs one operation and returns
every event it answered with (unjudged: the kernel's reactions judge them, see reactions.py),
``recycle`` kills it so that ``ensure_started`` (called before the next call, outside its budget)
starts a fresh one, ``cleanup`` stops it for good.

Transport failures are the only errors a source raises itself, as ToolFailure with
process_crashed -- or :class:`CallNotDelivered` when the process was gone before it read the call;
everything the child said is returned as a :class:`Reply`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from tolokaforge.contracts.tool import ToolErrorCategory
from tolokaforge.core.models import ToolDescription

from .schema_check import SchemaCheck

__all__ = [
    "STREAM_TAIL_BYTES",
    "CallInfo",
    "CallNotDelivered",
    "OperationSpec",
    "RemoteTool",
    "Reply",
    "ReplyError",
    "ToolSourceSession",
]

STREAM_TAIL_BYTES = 64 * 1024
"""The most of a call's streamed output a Reply keeps (its tail): a chatty command costs bounded memory."""

OperationKind = Literal["resource", "data_source", "interactive"]


@dataclass(frozen=True)
class OperationSpec:
    """What the kernel needs to know about one operation to react to its outcome."""

    name: str
    """The operation's name at the source (the model may see it under a prefix)."""
    kind: OperationKind
    idempotent: bool
    output_check: SchemaCheck | None = None
    process_backed: bool = False
    streaming: bool = False
    concurrency_safe: bool = False
    key_fields: tuple[str, ...] = ()


class CallNotDelivered(Exception):
    """The source's process was gone before it read the call: the call never ran (safe to send again)."""


@dataclass(frozen=True)
class CallInfo:
    """The kernel's side of one attempt, sent to providers as their CallContext."""

    trial_id: str
    call_id: str
    working_directory: str
    timeout_seconds: float
    attempt: int


@dataclass(frozen=True)
class ReplyError:
    """A failure the source reported in its own words (category as the source gave it)."""

    category: ToolErrorCategory
    message: str
    retryable: bool = False
    details: dict[str, Any] = field(default_factory=lambda: {})


@dataclass
class Reply:
    """Every event of one invocation, as received."""

    output: str | None = None
    """The structured output as JSON text (a provider's output_json, an MCP tool's structured content)."""
    text: str = ""
    """The model-facing rendering, when the source gave one."""
    error: ReplyError | None = None
    exit_code: int | None = None
    exit_signal: int = 0
    chunks: deque[tuple[int, bytes]] = field(default_factory=lambda: deque[tuple[int, bytes]]())
    """The tail of the streamed output chunks, (stream, data), at most :data:`STREAM_TAIL_BYTES` in all.

    Only a failure reads their bytes (as its output tail); the result or error itself is the record.
    """
    progress_events: int = 0
    partial_mutations: str = ""
    chunk_bytes: int = 0
    """The bytes :attr:`chunks` holds now."""

    def add_chunk(self, stream: int, data: bytes) -> None:
        if not data and self.chunks:
            return  # nothing to keep: that chunks came is already known
        data = data[-STREAM_TAIL_BYTES:]
        self.chunks.append((stream, data))
        self.chunk_bytes += len(data)
        while self.chunk_bytes > STREAM_TAIL_BYTES:
            first_stream, first = self.chunks.popleft()
            excess = self.chunk_bytes - STREAM_TAIL_BYTES
            if len(first) > excess:
                self.chunks.appendleft((first_stream, first[excess:]))
                self.chunk_bytes -= excess
            else:
                self.chunk_bytes -= len(first)

    def forget_chunk_bytes(self) -> None:
        """The terminal event carries the output: keep that chunks came (reactions judge it), not their bytes."""
        self.chunks = deque({stream: b"" for stream, _ in self.chunks}.items())
        self.chunk_bytes = 0


class ToolSourceSession(Protocol):
    """One source's child process for one trial."""

    @property
    def identity(self) -> str:
        """Stable across trials for the same server (keys the concurrency locks)."""
        ...

    @property
    def writes_state(self) -> bool:
        """Whether calls may change the trial's tables in the store (the mirror reloads after them)."""
        ...

    async def setup(self) -> list[tuple[OperationSpec, ToolDescription]]: ...

    async def ensure_started(self) -> None:
        """Start a fresh process if the last one crashed or was killed (outside any call's budget)."""
        ...

    async def invoke(self, operation: str, arguments: Mapping[str, Any], call: CallInfo) -> Reply: ...

    async def recycle(self) -> None: ...

    async def cleanup(self) -> None: ...


@dataclass(frozen=True)
class RemoteTool:
    """A tool the model calls whose code runs in a source's child process."""

    description: ToolDescription
    validator: SchemaCheck
    spec: OperationSpec
    source: ToolSourceSession

    def invoke(self, data: dict[str, Any], arguments: Mapping[str, Any]) -> str:
        # Registries hold python tools and remote tools alike; the executor never runs a remote tool
        # on a worker thread, so reaching this is a runner bug, not a tool failure.
        raise TypeError(f"{self.description.name!r} runs out of process; call it through the executor")
