"""A run's slots: ``concurrency`` episodes at once, as many trials being graded, and no waiting on each other."""

from __future__ import annotations

import asyncio

from tolokaforge.host.run.slots import TrialSlots


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_an_episode_slot_passes_to_the_next_trial_once_an_episode_ends() -> None:
    slots = TrialSlots(1)
    events: list[str] = []
    graded = asyncio.Event()

    async def first() -> None:
        async with slots.slot() as slot:
            events.append("first episode")
            await slot.to_grading()
            events.append("first grading")
            await graded.wait()
            events.append("first cleaned up")

    async def second() -> None:
        async with slots.slot():
            events.append("second episode")

    one = asyncio.create_task(first())
    await _settle()
    two = asyncio.create_task(second())
    await _settle()
    # The second episode ran while the first trial was still being graded.
    assert events == ["first episode", "first grading", "second episode"]
    graded.set()
    await asyncio.gather(one, two)


async def test_grading_slots_bound_the_trials_past_their_episode() -> None:
    slots = TrialSlots(1)
    release = asyncio.Event()
    past_episode: list[int] = []

    async def trial(index: int) -> None:
        async with slots.slot() as slot:
            await slot.to_grading()
            past_episode.append(index)
            await release.wait()

    tasks = [asyncio.create_task(trial(index)) for index in range(3)]
    await _settle()
    # One grading, one episode waiting for a grading slot while holding its episode slot, one waiting.
    assert past_episode == [0]
    release.set()
    await asyncio.gather(*tasks)
    assert past_episode == [0, 1, 2]


async def test_a_trial_retried_after_grading_gives_its_grading_slot_back_before_waiting() -> None:
    slots = TrialSlots(1)
    other_started = asyncio.Event()
    order: list[str] = []

    async def lost_at_grading() -> None:
        async with slots.slot() as slot:
            await slot.to_grading()
            order.append("lost while grading")
            await other_started.wait()
            await slot.to_episode()  # gives the grading slot back, then waits for the episode slot
            order.append("second attempt")

    async def other() -> None:
        async with slots.slot() as slot:
            order.append("other episode")
            other_started.set()
            await slot.to_grading()  # needs the grading slot the retried trial holds
            order.append("other grading")

    first = asyncio.create_task(lost_at_grading())
    await _settle()
    second = asyncio.create_task(other())
    # Had the retried trial kept its grading slot while waiting, each would wait for the other.
    await asyncio.wait_for(asyncio.gather(first, second), timeout=5)
    assert order == ["lost while grading", "other episode", "other grading", "second attempt"]


async def test_a_cancelled_trial_frees_whatever_it_held() -> None:
    slots = TrialSlots(1)

    async def stuck() -> None:
        async with slots.slot() as slot:
            await slot.to_grading()
            await asyncio.Event().wait()

    task = asyncio.create_task(stuck())
    await _settle()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    async with slots.slot() as slot:  # both slots are free again
        await asyncio.wait_for(slot.to_grading(), timeout=1)


async def test_the_time_spent_waiting_for_a_grading_slot_is_counted_apart() -> None:
    slots = TrialSlots(1)
    async with slots.slot() as first:
        await first.to_grading()  # holds the only grading slot

        async def second() -> float:
            async with slots.slot() as slot:
                await slot.to_grading()
                return slot.waited_s

        waiting = asyncio.create_task(second())
        await asyncio.sleep(0.05)
    assert await waiting >= 0.04  # it waited for the first trial to be cleaned up
