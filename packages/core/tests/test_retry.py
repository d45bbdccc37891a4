"""The one retry helper: what it retries, how long it waits, when it stops, and what it re-raises."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import pytest

from tolokaforge.core.retry import Backoff, RetryPolicy, retry_async


class Flaky(Exception):
    pass


class Fatal(Exception):
    pass


def _failing(times: int, error: type[Exception] = Flaky) -> tuple[list[int], Callable[[], Awaitable[str]]]:
    calls: list[int] = []

    async def call() -> str:
        calls.append(len(calls) + 1)
        if len(calls) <= times:
            raise error(f"try {len(calls)}")
        return "done"

    return calls, call


NO_WAIT = Backoff(initial_s=0.0)


async def test_retries_what_the_policy_names_until_it_succeeds() -> None:
    calls, call = _failing(2)
    seen: list[tuple[str, int, float]] = []
    policy = RetryPolicy(retry_if=lambda e: isinstance(e, Flaky), backoff=NO_WAIT)
    result = await retry_async(call, policy, on_retry=lambda e, n, w: seen.append((str(e), n, w)))
    assert result == "done" and calls == [1, 2, 3]
    assert seen == [("try 1", 1, 0.0), ("try 2", 2, 0.0)]


async def test_an_error_it_does_not_retry_is_raised_at_once() -> None:
    calls, call = _failing(1, Fatal)
    with pytest.raises(Fatal, match="try 1"):
        await retry_async(call, RetryPolicy(retry_if=lambda e: isinstance(e, Flaky), backoff=NO_WAIT))
    assert calls == [1]


async def test_exhaustion_reraises_the_last_error_itself() -> None:
    calls, call = _failing(10)
    policy = RetryPolicy(retry_if=lambda e: isinstance(e, Flaky), backoff=NO_WAIT, max_attempts=3)
    with pytest.raises(Flaky, match="try 3"):
        await retry_async(call, policy)
    assert calls == [1, 2, 3]


async def test_a_deadline_stops_before_a_wait_that_would_pass_it() -> None:
    calls, call = _failing(10)
    # The first wait (0.5 s) would end past the 0.2 s deadline: one try only, and no sleeping.
    policy = RetryPolicy(retry_if=lambda e: True, backoff=Backoff(initial_s=0.5), deadline_s=0.2)
    started = time.monotonic()
    with pytest.raises(Flaky, match="try 1"):
        await retry_async(call, policy)
    assert calls == [1]
    assert time.monotonic() - started < 0.5


async def test_a_wait_hint_overrides_the_backoff_for_its_error() -> None:
    _, call = _failing(2)
    waits: list[float] = []
    policy = RetryPolicy(retry_if=lambda e: True, backoff=Backoff(initial_s=30.0), wait_hint=lambda e: 0.0)

    async def record(error: BaseException, attempt: int, wait_s: float) -> None:
        waits.append(wait_s)

    assert await retry_async(call, policy, on_retry=record) == "done"
    assert waits == [0.0, 0.0]


def test_backoff_grows_to_its_cap_and_jitter_stays_within_half() -> None:
    plain = Backoff(initial_s=0.1, max_s=0.5, multiplier=2.0)
    assert [plain.delay(n) for n in range(4)] == [0.1, 0.2, 0.4, 0.5]
    jittered = Backoff(initial_s=1.0, max_s=1.0, jitter=True)
    assert all(0.5 <= jittered.delay(3) <= 1.0 for _ in range(100))
