"""One environment: a trial the caller steps turn by turn, run by the host's own trial code.

The host's conversation loop asks an agent for each assistant turn. Here the agent is a bridge: when
the loop asks, the bridge hands the conversation to :meth:`Env.step`'s caller as an observation and
waits for its next assistant message. So the trial is the host's, unchanged: registered with the
CLI's TrialSpec, tool calls through the runner, the simulated user's turns, the termination rules, the
grade (taken as soon as the episode ends, so :meth:`Env.reward` waits for little) and the release.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tolokaforge.contracts.runner import ToolSchema
from tolokaforge.core.models import TaskDescription, TrialSpec
from tolokaforge.core.runner_api import (
    GradeRequest,
    GradeResult,
    RegisteredTrial,
    Runner,
    RunnerHealth,
    ToolCallRequest,
    ToolResult,
)
from tolokaforge.core.transcript import Message
from tolokaforge.host import (
    AgentError,
    AgentTurn,
    Episode,
    LoadedTask,
    TrialOutcome,
    TrialSettings,
    UserSimulatorFactory,
    agent_view,
    proposed_calls,
    run_trial,
    tool_specs,
)

from .shapes import Observation, Reward, StepInfo

__all__ = ["Env", "EnvParts", "LocalEnv", "assistant_turn"]


@dataclass(frozen=True)
class EnvParts:
    """What every environment of one :class:`~.environments.Environments` shares."""

    runner: Runner
    tasks: Mapping[str, LoadedTask]
    users: UserSimulatorFactory
    settings: TrialSettings
    trial_index: Callable[[str, int], int]
    """``(task_id, seed) -> trial index``: unique within the run (trial ids are ``task:index``)."""
    on_outcome: Callable[[TrialOutcome], None] | None = None
    """Hears each finished trial once (the run folder's recorder)."""
    tool_specs: dict[str, list[dict[str, Any]]] = field(default_factory=dict[str, list[dict[str, Any]]])
    """Each task's tools as function schemas, made once: every trial of a task offers the same tools."""


def assistant_turn(message: Mapping[str, Any]) -> AgentTurn:
    """A chat-completions assistant message as the turn the host's loop runs (arguments kept as written)."""
    content = message.get("content")
    return AgentTurn(
        content=content if isinstance(content, str) else "", tool_calls=proposed_calls(dict(message))
    )


@dataclass(frozen=True)
class _Asked:
    messages: list[Message]
    tools: Sequence[ToolSchema]


@dataclass(frozen=True)
class _Ended:
    episode: Episode


class _Finished:
    """The trial's task returned (or raised): graded and released."""


class _Bridge:
    """The agent the host's loop plays (and its factory): each turn is the caller's next message."""

    name = "env"
    model: str | None = None

    def __init__(self, events: asyncio.Queue[_Asked | _Ended | _Finished]) -> None:
        self._events = events
        self._answer: asyncio.Future[AgentTurn] | None = None
        self.closed = False

    def for_trial(self, task: TaskDescription) -> _Bridge:
        return self

    async def next_turn(self, messages: Sequence[Message], tools: Sequence[ToolSchema]) -> AgentTurn:
        if self.closed:
            raise AgentError("the environment was closed before the episode ended")
        self._answer = asyncio.get_running_loop().create_future()
        self._events.put_nowait(_Asked(list(messages), tools))
        return await self._answer

    def answer(self, turn: AgentTurn) -> None:
        assert self._answer is not None and not self._answer.done()
        self._answer.set_result(turn)

    def abandon(self) -> None:
        self.closed = True
        if self._answer is not None and not self._answer.done():
            self._answer.set_exception(AgentError("the environment was closed before the episode ended"))


class _Watched:
    """The shared runner, with the statuses of this environment's calls noted as they return."""

    def __init__(self, runner: Runner) -> None:
        self._runner = runner
        self.statuses: list[str] = []

    @property
    def address(self) -> str:
        return self._runner.address

    async def health(self, *, budget_s: float | None = None) -> RunnerHealth:
        return await self._runner.health(budget_s=budget_s)

    async def register(self, spec: TrialSpec) -> RegisteredTrial:
        return await self._runner.register(spec)

    async def execute(self, call: ToolCallRequest) -> ToolResult:
        result = await self._runner.execute(call)
        self.statuses.append(result.status.name)
        return result

    async def grade(self, request: GradeRequest) -> GradeResult:
        return await self._runner.grade(request)

    async def release(self, trial_id: str) -> None:
        await self._runner.release(trial_id)

    async def aclose(self) -> None:
        return None  # the runner is shared: its owner closes it


class Env(Protocol):
    """One environment: one episode at a time (the embedded one is :class:`LocalEnv`; on Ray, a proxy)."""

    trial_id: str
    task_id: str
    seed: int

    @property
    def messages(self) -> list[dict[str, Any]]: ...

    @property
    def done(self) -> bool: ...

    async def reset(self, task_id: str, seed: int = 0) -> Observation: ...

    async def step(self, message: Mapping[str, Any]) -> tuple[Observation, bool, StepInfo]: ...

    async def reward(self) -> Reward: ...

    async def close(self) -> TrialOutcome | None: ...


class LocalEnv:
    """One episode at a time: :meth:`reset`, :meth:`step` until done, :meth:`reward`, :meth:`close`."""

    def __init__(self, parts: EnvParts) -> None:
        self._parts = parts
        self._runner = _Watched(parts.runner)
        self._task: asyncio.Task[TrialOutcome] | None = None
        self._bridge: _Bridge | None = None
        self._events: asyncio.Queue[_Asked | _Ended | _Finished] = asyncio.Queue()
        self._loaded: LoadedTask | None = None
        self._view: list[dict[str, Any]] = []
        self._tools: list[dict[str, Any]] = []
        self._turns = 0
        self._done = False
        self._termination: str | None = None
        self._error: str | None = None
        self.trial_id = ""
        self.task_id = ""
        self.seed = 0

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation so far as the agent sees it, its own messages included."""
        return list(self._view)

    @property
    def tools(self) -> list[dict[str, Any]]:
        return list(self._tools)

    @property
    def done(self) -> bool:
        return self._done

    async def reset(self, task_id: str, seed: int = 0) -> Observation:
        """A new trial of ``task_id`` (the previous episode closed first); its first observation."""
        await self.close()
        loaded = self._parts.tasks.get(task_id)
        if loaded is None:
            raise KeyError(f"no task {task_id!r} in this pack (its tasks: {', '.join(self._parts.tasks)})")
        self._loaded, self.task_id, self.seed = loaded, task_id, seed
        self._events = asyncio.Queue()
        self._bridge = _Bridge(self._events)
        self._view, self._tools, self._turns = [], [], 0
        self._done, self._termination, self._error = False, None, None
        index = self._parts.trial_index(task_id, seed)
        self.trial_id = f"{task_id}:{index}"  # the host's id of a first attempt (one attempt here)
        self._task = asyncio.create_task(self._trial(loaded, index, self._bridge))
        return await self._observe(drop_assistant=False)

    async def step(self, message: Mapping[str, Any]) -> tuple[Observation, bool, StepInfo]:
        """Run the caller's assistant message: its tool calls through the runner, or, without calls, the
        simulated user's answer. Returns what is new, whether the episode is over, and how the step went."""
        if self._bridge is None or self._done:
            raise RuntimeError("step() needs an episode in progress: call reset() first")
        self._turns += 1
        self._runner.statuses = []
        self._bridge.answer(assistant_turn(message))
        observation = await self._observe(drop_assistant=True)
        info = StepInfo(self._turns, self._termination, tuple(self._runner.statuses), self._error)
        return observation, observation.done, info

    async def outcome(self) -> TrialOutcome:
        """The finished trial (graded when its ending allows); the episode must be over."""
        if self._task is None or not self._done:
            raise RuntimeError("the episode is not over yet: step() until done, or close() it")
        return await asyncio.shield(self._task)

    async def reward(self) -> Reward:
        """The runner's grade of the finished episode (the trial is released with it)."""
        outcome = await self.outcome()
        assert self._loaded is not None
        return Reward.of(outcome, self._loaded.task.grading)

    async def close(self) -> TrialOutcome | None:
        """Release the trial; an episode still going is ended (``error``, not graded). Idempotent."""
        task, bridge = self._task, self._bridge
        if task is None or bridge is None:
            return None
        self._task = self._bridge = None
        if not task.done():
            bridge.abandon()
        self._done = True
        with contextlib.suppress(Exception):
            return await task
        return None

    async def _trial(self, loaded: LoadedTask, index: int, bridge: _Bridge) -> TrialOutcome:
        events = self._events
        try:
            outcome = await run_trial(
                self._runner,
                loaded,
                index,
                bridge,
                self._parts.users,
                self._parts.settings,
                on_episode=lambda episode: events.put_nowait(_Ended(episode)),
            )
        finally:
            events.put_nowait(_Finished())
        if self._parts.on_outcome is not None:
            self._parts.on_outcome(outcome)
        return outcome

    def _specs(self, tools: Sequence[ToolSchema]) -> list[dict[str, Any]]:
        cache = self._parts.tool_specs
        names = [tool.name for tool in tools]
        cached = cache.get(self.task_id)
        if cached is None or [spec["function"]["name"] for spec in cached] != names:
            cached = cache[self.task_id] = tool_specs(tools)
        return cached

    async def _observe(self, *, drop_assistant: bool) -> Observation:
        event = await self._events.get()
        if isinstance(event, _Finished):  # no episode at all (registration refused) or a host defect
            assert self._task is not None
            outcome = await asyncio.shield(self._task)
            event = _Ended(outcome.episode)
        if isinstance(event, _Asked):
            if not self._tools:
                self._tools = self._specs(event.tools)
            messages = event.messages
        else:
            self._done = True
            episode = event.episode
            self._termination = episode.termination.value if episode.termination is not None else None
            self._error = episode.error
            messages = episode.messages
        assert self._loaded is not None
        view = agent_view(messages, text_or_calls=self._loaded.task.conversation is not None)
        new = view[len(self._view) :]
        self._view = view
        if drop_assistant and new and new[0]["role"] == "assistant":
            new = new[1:]  # the caller's own message, as the loop recorded it
        return Observation(self._loaded.task.system_prompt or "", self.tools, new, self._done)
