"""One attempt's conversation: agent and user turns, tool calls through the runner, a termination reason.

The loop owns what the protocol asks of the engine:

* episode-unique call ids: a provider id is kept the first time, its n-th further occurrence becomes
  ``<id>#<n>``, and a missing id is generated, so every call joins to exactly one result;
* arguments go to the runner exactly as produced (the runner answers INVALID_ARGUMENTS), while the
  transcript records ``{}`` for arguments that are not a JSON object, so it stays decodable;
* the status table: SUCCESS / ERROR / TIMEOUT / INVALID_ARGUMENTS go back to the caller as the tool's
  answer; TOOL_NOT_FOUND ends the trial ``tool_not_found``; TRIAL_NOT_FOUND ends it ``trial_lost``;
* the turn budget: ``max_turns`` assistant turns, then ``max_turns``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from tolokaforge.contracts.runner import ExecutionStatus
from tolokaforge.core.models import TaskDescription
from tolokaforge.core.termination import TerminationReason
from tolokaforge.core.transcript import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)

from .agents.base import Agent
from .errors import AgentError, RunnerUnavailableError, TrialLostError
from .runner_client import RegisteredTrial, RunnerClient
from .turns import ProposedCall, Usage
from .users.base import UserSimulator

__all__ = ["CallIds", "CallRecord", "Episode", "run_episode"]

MAX_USER_TOOL_ROUNDS = 8
"""How many tool rounds one user turn may take before the user must speak (a runaway LLM user)."""


class CallIds:
    """Assigns episode-unique tool-call ids."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}
        self._used: set[str] = set()
        self._generated = 0

    def assign(self, provider_id: str) -> str:
        if not provider_id:
            self._generated += 1
            candidate = f"call_{self._generated}"
        elif provider_id not in self._seen:
            self._seen[provider_id] = 0
            candidate = provider_id
        else:
            self._seen[provider_id] += 1
            candidate = f"{provider_id}#{self._seen[provider_id]}"
        while candidate in self._used:  # a provider id that happens to look like one we made
            self._generated += 1
            candidate = f"{candidate}~{self._generated}"
        self._used.add(candidate)
        return candidate


@dataclass
class CallRecord:
    """One tool call as the runner answered it."""

    call_id: str
    name: str
    executor: str
    arguments_json: str
    status: str
    output: str
    error: str = ""
    error_category: str = ""
    latency_s: float = 0.0


@dataclass
class Episode:
    messages: list[Message] = field(default_factory=list[Message])
    calls: list[CallRecord] = field(default_factory=list[CallRecord])
    termination: TerminationReason | None = None
    error: str | None = None
    assistant_turns: int = 0
    usage: Usage = field(default_factory=Usage)
    wall_time_s: float = 0.0
    infrastructure_error: str | None = None
    """Set when the runner stayed unreachable: the episode did not end on its own terms."""


def _decoded_arguments(arguments_json: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments_json)
    except ValueError:
        return {}
    return cast(dict[str, Any], value) if isinstance(value, dict) else {}


@dataclass
class _Loop:
    runner: RunnerClient
    trial: RegisteredTrial
    episode: Episode
    ids: CallIds = field(default_factory=CallIds)

    async def execute(
        self, proposed: Sequence[ProposedCall], executor: str
    ) -> tuple[list[ToolCall], list[ToolMessage], bool]:
        """Run a turn's calls in order; the flag is False once TOOL_NOT_FOUND has failed the trial."""
        calls = [
            ToolCall(
                id=self.ids.assign(call.id),
                name=call.name or "unnamed",
                arguments=_decoded_arguments(call.arguments_json),
            )
            for call in proposed
        ]
        results: list[ToolMessage] = []
        for call, raw in zip(calls, proposed, strict=True):
            response = await self.runner.execute(
                self.trial.trial_id,
                call_id=call.id,
                tool_name=call.name,
                arguments_json=raw.arguments_json,
                executor=executor,
            )
            status = response.status
            error = response.error_message
            record = CallRecord(
                call_id=call.id,
                name=call.name,
                executor=executor,
                arguments_json=raw.arguments_json,
                status=status.name,
                output=response.output,
                error=error,
                error_category=response.tool_error.category.name if response.tool_error is not None else "",
                latency_s=response.metrics.latency_seconds if response.metrics is not None else 0.0,
            )
            self.episode.calls.append(record)
            text = (
                response.output if status == ExecutionStatus.SUCCESS else f"Error: {error or record.status}"
            )
            results.append(ToolMessage(content=text, tool_call_id=call.id))
            if status == ExecutionStatus.TOOL_NOT_FOUND:
                self.episode.error = f"tool {call.name!r} is not registered for {executor}: {error}"
                return calls[: len(results)], results, False
        return calls, results, True


async def run_episode(
    runner: RunnerClient,
    trial: RegisteredTrial,
    task: TaskDescription,
    agent: Agent,
    user: UserSimulator,
    *,
    max_turns: int,
) -> Episode:
    """Drive one registered attempt to its end; never raises for what ends a trial (it is recorded)."""
    episode = Episode()
    started = time.perf_counter()
    try:
        episode.termination = await _converse(_Loop(runner, trial, episode), task, agent, user, max_turns)
    except TrialLostError as error:
        episode.termination, episode.error = TerminationReason.TRIAL_LOST, str(error)
    except AgentError as error:
        episode.termination, episode.error = TerminationReason.ERROR, str(error)
        if error.usage is not None:  # what the failed turn spent and retried still counts
            episode.usage.add(error.usage)
    except RunnerUnavailableError as error:
        episode.termination, episode.error = TerminationReason.ERROR, str(error)
        episode.infrastructure_error = str(error)
    episode.wall_time_s = time.perf_counter() - started
    return episode


async def _converse(
    loop: _Loop, task: TaskDescription, agent: Agent, user: UserSimulator, max_turns: int
) -> TerminationReason:
    episode = loop.episode
    messages = episode.messages
    if task.system_prompt:
        messages.append(SystemMessage(task.system_prompt))
    if task.initial_user_message:
        messages.append(UserMessage(task.initial_user_message))
    elif (stop := await _user_turn(loop, user)) is not None:
        return stop
    while True:
        if episode.assistant_turns >= max_turns:
            return TerminationReason.MAX_TURNS
        turn = await agent.next_turn(messages, loop.trial.agent_tools)
        episode.assistant_turns += 1
        if turn.usage is not None:
            episode.usage.add(turn.usage)
        if turn.tool_calls:
            calls, results, ok = await loop.execute(turn.tool_calls, "agent")
            messages.append(AssistantMessage(turn.content, tuple(calls)))
            messages.extend(results)
            if not ok:
                return TerminationReason.TOOL_NOT_FOUND
            if not turn.done:
                continue
        elif turn.content:
            messages.append(AssistantMessage(turn.content))
        if turn.done:
            return TerminationReason.AGENT_DONE
        if (stop := await _user_turn(loop, user)) is not None:
            return stop


async def _user_turn(loop: _Loop, user: UserSimulator) -> TerminationReason | None:
    """Let the user speak (running its tool calls); a reason when the conversation is over."""
    messages = loop.episode.messages
    for _ in range(MAX_USER_TOOL_ROUNDS):
        turn = await user.next_turn(messages, loop.trial.user_tools)
        if turn.usage is not None:
            loop.episode.usage.add(turn.usage)
        if not turn.tool_calls:
            messages.append(UserMessage(turn.content))
            return TerminationReason.USER_STOP if turn.stop else None
        calls, results, ok = await loop.execute(turn.tool_calls, "user")
        messages.append(UserMessage(turn.content, tuple(calls)))
        messages.extend(results)
        if not ok:
            return TerminationReason.TOOL_NOT_FOUND
    raise AgentError(f"the simulated user called tools {MAX_USER_TOOL_ROUNDS} times without saying anything")
