"""The one way this code base retries: a policy (which errors, how long to wait, when to stop) and the
loop that runs it. The host's runner client, its chat client and the runner's kernel reactions all use
it, so a retry reads the same everywhere: what was retried, how often, and why it stopped.

An exhausted retry re-raises the last error itself (never a wrapper), so callers keep their own typed
errors and decide what exhaustion means.

The loop is written out rather than delegated to tenacity: it runs around every RPC the host makes and
every model call, where a first try nearly always succeeds, and tenacity's per-call machinery (its
state objects, its coroutine-function checks) cost more than the call's own client code.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

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

    def wait_s(self, error: BaseException, retry_number: int) -> float:
        """The wait before retry ``retry_number`` (from 0) after ``error``."""
        if self.wait_hint is not None:
            hinted = self.wait_hint(error)
            if hinted is not None:
                return hinted
        return self.backoff.delay(retry_number)


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
    attempt = 0
    while True:
        attempt += 1
        try:
            return await call()
        except Exception as error:
            if not policy.retry_if(error):
                raise
            if policy.max_attempts is not None and attempt >= policy.max_attempts:
                raise
            wait_s = policy.wait_s(error, attempt - 1)
            if policy.deadline_s is not None and time.monotonic() - started + wait_s >= policy.deadline_s:
                raise
            if on_retry is not None:
                result = on_retry(error, attempt, wait_s)
                if result is not None:
                    await result
        await asyncio.sleep(wait_s)
