"""The one way this code base retries: a policy (which errors, how long to wait, when to stop) run by
tenacity. The host's runner client, its chat client and the runner's kernel reactions all use it, so a
retry reads the same everywhere: what was retried, how often, and why it stopped.

An exhausted retry re-raises the last error itself (never a wrapper), so callers keep their own typed
errors and decide what exhaustion means.

The first try runs before tenacity is involved: it wraps every RPC the host makes and every model call,
where the first try nearly always succeeds, and tenacity's per-call set-up (its state objects, its
checks) was measured to cost more than the call's own client code (tools/bench/host_overhead.py). After
a retryable failure tenacity runs the rest, counting that try as its first.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    stop_any,
    stop_before_delay,
    stop_never,
)
from tenacity.stop import stop_base

__all__ = ["Backoff", "RetryPolicy", "retry_async"]

_T = TypeVar("_T")


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff: ``initial_s * multiplier**n`` capped at ``max_s`` for the n-th retry (from 0).

    With ``jitter`` a wait is drawn from ``[delay/2, delay]`` so that many callers failing together do
    not retry in lockstep.
    """

    initial_s: float = 0.05
    max_s: float = 2.0
    multiplier: float = 2.0
    jitter: bool = False

    def delay(self, retry_number: int) -> float:
        ceiling = min(self.max_s, self.initial_s * self.multiplier**retry_number)
        return random.uniform(ceiling / 2, ceiling) if self.jitter else ceiling


@dataclass(frozen=True)
class RetryPolicy:
    """When to retry and when to stop.

    ``retry_if`` decides per error; ``max_attempts`` counts every try (the first included);
    ``deadline_s`` stops before a wait that would end past it; ``wait_hint`` may name the wait for one
    error (a server's Retry-After, or 0 for a retry that needs none), else ``backoff`` decides.
    """

    retry_if: Callable[[BaseException], bool]
    backoff: Backoff = Backoff()
    max_attempts: int | None = None
    deadline_s: float | None = None
    wait_hint: Callable[[BaseException], float | None] | None = None

    def stop(self, spent_s: float = 0.0) -> stop_base:
        """The policy's stop condition, for tenacity, ``spent_s`` of the deadline gone before it started."""
        stops: list[stop_base] = []
        if self.max_attempts is not None:
            stops.append(stop_after_attempt(self.max_attempts))
        if self.deadline_s is not None:
            stops.append(stop_before_delay(self.deadline_s - spent_s))
        return stop_any(*stops) if stops else stop_never

    def wait(self, state: RetryCallState) -> float:
        """The wait before the next try, for tenacity."""
        error = state.outcome.exception() if state.outcome is not None else None
        if error is not None and self.wait_hint is not None:
            hinted = self.wait_hint(error)
            if hinted is not None:
                return hinted
        return self.backoff.delay(state.attempt_number - 1)


async def retry_async(
    call: Callable[[], Awaitable[_T]],
    policy: RetryPolicy,
    *,
    on_retry: Callable[[BaseException, int, float], Awaitable[None] | None] | None = None,
) -> _T:
    """Await ``call()`` until it returns, an error ``policy`` does not retry, or the policy stops.

    ``on_retry(error, attempt, wait_s)`` runs before each wait (``attempt`` is the try that failed,
    from 1); it may be a coroutine function.
    """

    started = time.monotonic()
    try:
        return await call()
    except Exception as error:
        if not policy.retry_if(error):
            raise
        failed: BaseException | None = error

    async def before_sleep(state: RetryCallState) -> None:
        if on_retry is None or state.outcome is None:
            return
        error = state.outcome.exception()
        wait_s = state.next_action.sleep if state.next_action is not None else 0.0
        if error is not None:
            result = on_retry(error, state.attempt_number, wait_s)
            if result is not None:
                await result

    async def attempt() -> _T:
        nonlocal failed
        if failed is not None:  # tenacity's first try is the one that failed above
            error, failed = failed, None
            raise error
        # tenacity awaits only what a coroutine *function* returns; ``call`` may be a lambda.
        return await call()

    retrying = AsyncRetrying(
        retry=retry_if_exception(policy.retry_if),
        stop=policy.stop(time.monotonic() - started),
        wait=policy.wait,
        before_sleep=before_sleep,
        reraise=True,
    )
    return await retrying(attempt)
