"""Batched rollouts: many episodes against one policy callback, at most ``concurrency`` in flight.

Episodes start as slots free up and their results come back as they finish (an async iterator), so a
trainer can learn from the first results while the rest run. The policy sees only the conversation and
the tools, as a model would; :func:`current_episode` tells a policy that needs more (the golden policy)
which task it is playing.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tolokaforge.core.models import GoldenAction
from tolokaforge.host import resolve_tool_name

from .environments import Environments
from .episode import Env
from .shapes import EpisodeResult

__all__ = ["EpisodeKey", "Policy", "current_episode", "golden_policy", "rollouts"]

Policy = Callable[[list[dict[str, Any]], list[dict[str, Any]]], Awaitable[dict[str, Any]]]
"""``(messages so far, tools) -> assistant message``, all in the chat-completions format."""


@dataclass(frozen=True)
class EpisodeKey:
    task_id: str
    seed: int


_EPISODE: contextvars.ContextVar[EpisodeKey | None] = contextvars.ContextVar(
    "tolokaforge_env_episode", default=None
)


def current_episode() -> EpisodeKey | None:
    """The episode a policy is being asked for, inside :func:`rollouts` (None elsewhere)."""
    return _EPISODE.get()


async def _episode(env: Env, policy: Policy, task_id: str, seed: int) -> EpisodeResult:
    _EPISODE.set(EpisodeKey(task_id, seed))
    try:
        observation = await env.reset(task_id, seed)
        steps = 0
        while not observation.done:
            message = await policy(env.messages, observation.tools)
            observation, _, _ = await env.step(message)
            steps += 1
        reward = await env.reward()
        return EpisodeResult(task_id, seed, reward, env.messages, steps, env.trial_id)
    finally:
        await env.close()


async def rollouts(
    envs: Environments,
    policy: Policy,
    tasks: Sequence[str] | None = None,
    episodes: int = 1024,
    concurrency: int = 64,
    seed: int = 0,
) -> AsyncIterator[EpisodeResult]:
    """Run ``episodes`` episodes, cycling over ``tasks`` (all the pack's by default), episode ``i`` with
    seed ``seed + i``; yield each result as it finishes. Leaving the loop early cancels the rest."""
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    chosen = list(tasks) if tasks is not None else envs.task_ids
    if not chosen:
        return
    done: asyncio.Queue[EpisodeResult | BaseException] = asyncio.Queue()
    free = [envs.env() for _ in range(min(concurrency, episodes))]
    running: set[asyncio.Task[None]] = set()

    async def one(env: Env, number: int) -> None:
        try:
            done.put_nowait(await _episode(env, policy, chosen[number % len(chosen)], seed + number))
        except Exception as error:
            done.put_nowait(error)
        finally:
            free.append(env)

    started = yielded = 0
    try:
        while yielded < episodes:
            while free and started < episodes:  # backpressure: an episode starts when one has finished
                task = asyncio.create_task(one(free.pop(), started))
                running.add(task)
                task.add_done_callback(running.discard)
                started += 1
            result = await done.get()
            if isinstance(result, BaseException):
                raise result
            yielded += 1
            yield result
    finally:
        for task in list(running):
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)


def golden_policy(envs: Environments) -> Policy:
    """A policy that replays each task's golden actions as assistant tool calls, then says the golden
    response (or "Done."): the reference an exact grade rewards with 1.0. Only inside :func:`rollouts`
    (it reads the task from :func:`current_episode`)."""

    async def policy(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        key = current_episode()
        if key is None:
            raise RuntimeError("golden_policy runs inside rollouts(), which tells it the task")
        task = envs.tasks[key.task_id].task
        checks = task.grading.state_checks
        actions = [a for a in (checks.golden_actions if checks is not None else []) if a.executor != "user"]
        made = sum(
            1 for message in messages if message.get("role") == "assistant" and message.get("tool_calls")
        )
        if made < len(actions):
            return golden_call(actions[made], made + 1, [tool["function"]["name"] for tool in tools])
        return {"role": "assistant", "content": task.golden_response or "Done."}

    return policy


def golden_call(action: GoldenAction, number: int, offered: Sequence[str]) -> dict[str, Any]:
    """One golden action as an assistant message with one tool call (its name resolved as the runner does)."""
    function = {
        "name": resolve_tool_name(action.tool_name, offered),
        "arguments": json.dumps(action.arguments),
    }
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": f"golden-{number}", "type": "function", "function": function}],
    }
