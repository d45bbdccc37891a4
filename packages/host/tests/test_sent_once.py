"""SentOnce: one registration sends each key; the others wait for its answer, never for each other."""

from __future__ import annotations

import asyncio

from tolokaforge.host.runner.sent_once import SentOnce


async def test_a_key_being_sent_makes_the_next_claim_wait_for_the_answer() -> None:
    sent = SentOnce()
    assert await sent.claim(["task", "code"]) == ("task", "code")
    waiting = asyncio.ensure_future(sent.claim(["code", "other"]))
    await asyncio.sleep(0.01)
    assert not waiting.done()  # "code" is on its way with the first registration
    sent.settle(["task", "code"], held=True)
    assert await waiting == ("other",)  # the runner keeps "code" now: only "other" is this one's to send


async def test_a_failed_send_passes_the_key_to_a_waiter() -> None:
    sent = SentOnce()
    assert await sent.claim(["code"]) == ("code",)
    waiting = asyncio.ensure_future(sent.claim(["code"]))
    await asyncio.sleep(0)
    sent.settle(["code"], held=False)
    assert await waiting == ("code",)
    assert "code" not in sent.held


async def test_crossing_claims_never_wait_for_each_other() -> None:
    sent = SentOnce()
    first = await sent.claim(["a"])
    second = await sent.claim(["b"])

    async def register(keys: list[str]) -> tuple[str, ...]:
        claimed = await sent.claim(keys)
        await asyncio.sleep(0)  # the registration's round trip
        sent.settle(claimed, held=True)
        return claimed

    # Each now needs the other's key too: neither holds a claim while it waits, so both finish.
    crossing = asyncio.gather(register(["a", "b"]), register(["b", "a"]))
    await asyncio.sleep(0)
    sent.settle(first, held=True)
    sent.settle(second, held=False)
    claims = await asyncio.wait_for(crossing, timeout=5)
    assert sorted(claims) == [(), ("b",)]  # "b" failed with its first sender: one of the two sent it
    assert sent.held == {"a", "b"}


async def test_forgotten_keys_are_claimed_again() -> None:
    sent = SentOnce()
    sent.settle(await sent.claim(["code"]), held=True)
    assert await sent.claim(["code"]) == ()
    sent.forget(["code"])
    assert await sent.claim(["code"]) == ("code",)
