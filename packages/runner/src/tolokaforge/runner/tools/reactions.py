"""The kernel's reactions to what an out-of-process tool answered (docs/protocol/tool-providers.md#how-the-kernel-reacts).

* The reply is judged: an output that violates the operation's output_schema, an exit_status from an
  operation that is not process-backed, output chunks from one that does not stream, or a provider
  claiming process_crashed about itself is a protocol violation (unknown, with details), never passed on.
* A call past its budget is timeout; the source is killed at once and rebuilt before the next call.
* A call the source's process was gone before reading never ran: it is sent once more, to a fresh
  process started outside the budget, and is never blamed for the exit.
* Every attempt that fails is undone (``rollback``) before it is retried or answered.
* A retryable failure is retried unseen only for idempotent resource operations and data sources,
  never interactive ones; concurrency_conflict is retried serialized on the operation's key fields.
* cancelled is not a failure the model sees; process_crashed (synthesized by the source from the
  transport) is surfaced, and when it recurs the source's circuit breaker opens and calls fail fast.
Every outcome carries how many attempts it took.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from tolokaforge.contracts.runner import ExecutionStatus
from tolokaforge.contracts.tool import ToolErrorCategory
from tolokaforge.core.retry import Backoff, RetryPolicy, retry_async

from ..errors import ToolFailure
from .remote import CallInfo, CallNotDelivered, OperationSpec, RemoteTool, Reply

__all__ = ["CircuitBreaker", "KeyedLocks", "RemoteOutcome", "run_remote", "settle"]

MAX_ATTEMPTS = 3
_DELIVERIES = 2
"""How many fresh processes a call that was never read is offered before it fails."""
_BACKOFF = Backoff(initial_s=0.05, max_s=0.4)
_SURFACED_ERROR_STATUS = {
    ToolErrorCategory.INVALID_ARGUMENTS: ExecutionStatus.INVALID_ARGUMENTS,
    ToolErrorCategory.TIMEOUT: ExecutionStatus.TIMEOUT,
}


@dataclass(frozen=True)
class RemoteOutcome:
    """One remote call after the reactions: its output or failure, and the attempts it took."""

    output: str
    failure: ToolFailure | None
    attempts: int
    category: str | None = None
    """The category to record when the call did not fail in the model's eyes (e.g. cancelled)."""
    exit_code: int | None = None
    """The process's exit code, for a process-backed operation (ToolMetrics.exit_code)."""


class CircuitBreaker:
    """Opens after ``threshold`` consecutive crashes; lets one call through after ``cooldown_s``."""

    def __init__(self, threshold: int = 3, cooldown_s: float = 30.0) -> None:
        self.threshold = threshold
        self.cooldown_s = cooldown_s
        self.consecutive_crashes = 0
        self._opened_at: float | None = None

    @property
    def is_open(self) -> bool:
        if self._opened_at is None:
            return False
        # Half-open after the cooldown: the next call is the probe.
        return time.monotonic() - self._opened_at < self.cooldown_s

    def record_crash(self) -> None:
        self.consecutive_crashes += 1
        if self.consecutive_crashes >= self.threshold:
            self._opened_at = time.monotonic()

    def record_success(self) -> None:
        self.consecutive_crashes = 0
        self._opened_at = None


class KeyedLocks:
    """Locks by key, shared by every trial of a runner (a conflict may come from another trial)."""

    def __init__(self) -> None:
        self._locks: defaultdict[Hashable, asyncio.Lock] = defaultdict(asyncio.Lock)

    def get(self, key: Hashable) -> asyncio.Lock:
        return self._locks[key]


def may_auto_retry(spec: OperationSpec) -> bool:
    """The idempotent gate: data sources always, resource operations only when idempotent."""
    if spec.kind == "data_source":
        return True
    return spec.kind == "resource" and spec.idempotent


async def run_remote(
    tool: RemoteTool,
    arguments: Mapping[str, Any],
    call: CallInfo,
    *,
    breaker: CircuitBreaker,
    locks: KeyedLocks,
    rollback: Callable[[], Awaitable[None]] | None = None,
) -> RemoteOutcome:
    """Run ``tool`` with every reaction applied; never raises a ToolFailure.

    ``rollback`` runs after every failed attempt, before it is retried or answered: whatever the
    attempt changed is undone. What it raises ends the call.
    """
    attempts = 0
    serialized: asyncio.Lock | None = None

    async def once() -> tuple[str, int | None]:
        nonlocal attempts
        attempts += 1
        try:
            return await _attempt(tool, arguments, call, attempts, breaker)
        except ToolFailure:
            if rollback is not None:
                await rollback()
            raise

    def retried(error: BaseException) -> bool:
        if not isinstance(error, ToolFailure):
            return False
        error.details.setdefault("attempts", attempts)
        if error.category == ToolErrorCategory.CONCURRENCY_CONFLICT:
            return True
        return error.retryable and may_auto_retry(tool.spec) and error.category in _RETRIED

    async def before_retry(error: BaseException, attempt: int, wait_s: float) -> None:
        nonlocal serialized
        # A conflict is retried holding the operation's key lock: retries on one key run one at a time.
        if _is_conflict(error) and serialized is None:
            serialized = locks.get(_conflict_key(tool, arguments))
            await serialized.acquire()

    policy = RetryPolicy(
        retry_if=retried,
        max_attempts=MAX_ATTEMPTS,
        backoff=_BACKOFF,
        # A conflict is retried at once (under the key's lock); other retries back off.
        wait_hint=lambda error: 0.0 if _is_conflict(error) else None,
    )
    try:
        output, exit_code = await retry_async(once, policy, on_retry=before_retry)
        return RemoteOutcome(output, None, attempts, exit_code=exit_code)
    except _Cancelled as cancelled:
        # Not a failure for the model: it sees that the operation was stopped, and why.
        return RemoteOutcome(cancelled.text, None, attempts, category="cancelled")
    except ToolFailure as failure:
        failure.details["attempts"] = attempts
        return _failed(failure, attempts)
    finally:
        if serialized is not None and serialized.locked():
            serialized.release()


def _is_conflict(error: BaseException) -> bool:
    return isinstance(error, ToolFailure) and error.category == ToolErrorCategory.CONCURRENCY_CONFLICT


def _failed(failure: ToolFailure, attempts: int) -> RemoteOutcome:
    exit_code = failure.details.get("exit_code")
    return RemoteOutcome("", failure, attempts, exit_code=exit_code if isinstance(exit_code, int) else None)


# Categories whose retryable flag the kernel honours; the rest are surfaced whatever the flag says.
_RETRIED = frozenset(
    {ToolErrorCategory.EXECUTION_FAILED, ToolErrorCategory.UNKNOWN, ToolErrorCategory.NOT_FOUND}
)


class _Cancelled(Exception):
    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


async def _attempt(
    tool: RemoteTool, arguments: Mapping[str, Any], call: CallInfo, attempt: int, breaker: CircuitBreaker
) -> tuple[str, int | None]:
    """One try: (the text the model sees, the exit code of a process-backed operation)."""
    name = tool.description.name
    if breaker.is_open:
        raise ToolFailure(
            ExecutionStatus.ERROR,
            ToolErrorCategory.PROCESS_CRASHED,
            f"tool {name!r} is unavailable: its process crashed {breaker.consecutive_crashes} times in a row",
            details={"circuit_breaker": "open", "consecutive_crashes": breaker.consecutive_crashes},
        )
    this_call = CallInfo(call.trial_id, call.call_id, call.working_directory, call.timeout_seconds, attempt)
    try:
        reply = await _deliver(tool, arguments, this_call)
    except TimeoutError as error:
        # The source may be wedged mid-call: kill it now, so the next call runs on a fresh process.
        await tool.source.recycle()
        raise ToolFailure(
            ExecutionStatus.TIMEOUT,
            ToolErrorCategory.TIMEOUT,
            f"tool {name!r} exceeded its budget of {call.timeout_seconds:g}s; its process was stopped",
            retryable=True,
            details={"budget_seconds": call.timeout_seconds, "source_recycled": True},
        ) from error
    except ToolFailure as failure:
        if failure.category == ToolErrorCategory.PROCESS_CRASHED:
            breaker.record_crash()
            failure.details["consecutive_crashes"] = breaker.consecutive_crashes
        raise
    breaker.record_success()
    return settle(name, tool.spec, reply), reply.exit_code


async def _deliver(tool: RemoteTool, arguments: Mapping[str, Any], call: CallInfo) -> Reply:
    """The source's reply within the budget; a call its process never read goes to a fresh one."""
    undelivered: CallNotDelivered | None = None
    for _ in range(_DELIVERIES):
        # A rebuild after a crash, a kill or an exit is not the call's own work: it precedes the budget.
        await tool.source.ensure_started()
        try:
            return await asyncio.wait_for(
                tool.source.invoke(tool.spec.name, arguments, call), call.timeout_seconds
            )
        except CallNotDelivered as error:
            undelivered = error
    raise ToolFailure(
        ExecutionStatus.ERROR,
        ToolErrorCategory.PROCESS_CRASHED,
        f"tool {tool.description.name!r} never ran: {undelivered} ({_DELIVERIES} fresh processes in a row)",
        details={"never_ran": True, "deliveries": _DELIVERIES},
    )


def settle(name: str, spec: OperationSpec, reply: Reply) -> str:
    """Judge one reply: the text the model sees, or the classified ToolFailure."""
    if reply.exit_code is not None and not spec.process_backed:
        raise _violation(name, "sent exit_status, but the operation is not process-backed")
    if reply.chunks and not spec.streaming:
        raise _violation(name, "sent output chunks, but the operation does not stream")
    error = reply.error
    if error is not None:
        return _settle_error(name, spec, reply)
    if spec.process_backed and reply.exit_code is None:
        raise _violation(name, "a process-backed operation ended without exit_status")
    structured: Any = None
    if reply.output:
        try:
            structured = json.loads(reply.output)
        except json.JSONDecodeError as problem:
            raise _violation(name, f"output is not JSON: {problem}", raw=reply.output[:2000]) from problem
    if spec.output_check is not None:
        errors = [e.message for e in spec.output_check.errors(structured)]
        if errors:
            raise _violation(
                name,
                f"output does not match the output_schema: {'; '.join(errors)}",
                raw=(reply.output or "")[:2000],
            )
    return reply.text or reply.output or ""


def _settle_error(name: str, spec: OperationSpec, reply: Reply) -> str:
    error = reply.error
    assert error is not None
    category = error.category
    if category == ToolErrorCategory.PROCESS_CRASHED:
        raise _violation(name, "the provider sent process_crashed, which only the kernel may synthesize")
    if category == ToolErrorCategory.CANCELLED:
        partial = f" Partial changes: {reply.partial_mutations}" if reply.partial_mutations else ""
        raise _Cancelled(f"The operation was cancelled: {error.message}.{partial}")
    details = dict(error.details)
    if category in (ToolErrorCategory.UNSPECIFIED, ToolErrorCategory.UNKNOWN):
        # unknown MUST carry the raw underlying error; keep what the source gave and name the gap.
        details.setdefault("raw", error.message)
        category = ToolErrorCategory.UNKNOWN
    if reply.exit_code is not None:
        details.setdefault("exit_code", reply.exit_code)
        if reply.exit_signal:
            details.setdefault("exit_signal", reply.exit_signal)
    output = _chunk_text(reply)
    if output:
        details.setdefault("output_tail", output[-2000:])
    retryable = error.retryable and category != ToolErrorCategory.INVALID_ARGUMENTS
    status = _SURFACED_ERROR_STATUS.get(category, ExecutionStatus.ERROR)
    raise ToolFailure(status, category, error.message, retryable=retryable, details=details)


def _chunk_text(reply: Reply) -> str:
    return b"".join(data for _, data in reply.chunks).decode("utf-8", errors="replace")


def _conflict_key(tool: RemoteTool, arguments: Mapping[str, Any]) -> Hashable:
    values = tuple(json.dumps(arguments.get(field), sort_keys=True) for field in tool.spec.key_fields)
    return (tool.source.identity, tool.spec.name, values)


def _violation(name: str, what: str, *, raw: str | None = None) -> ToolFailure:
    details: dict[str, Any] = {"protocol_violation": what}
    if raw is not None:
        details["raw"] = raw
    return ToolFailure(
        ExecutionStatus.ERROR, ToolErrorCategory.UNKNOWN, f"tool {name!r} {what}", details=details
    )
