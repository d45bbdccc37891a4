"""One attempt's conversation: agent and user turns, tool calls through the runner, a termination reason.

The loop owns what the protocol asks of the engine:

* episode-unique call ids: a provider id is kept the first time, its n-th further occurrence becomes
  ``<id>#<n>``, and a missing id is generated, so every call joins to exactly one result;
* arguments go to the runner exactly as produced (the runner answers INVALID_ARGUMENTS), while the
  transcript records ``{}`` for arguments that are not a JSON object, so it stays decodable;
* the status table: SUCCESS / ERROR / TIMEOUT / INVALID_ARGUMENTS / TOOL_NOT_FOUND go back to the caller
  as the tool's answer (the runner's typed message, never a traceback: that stays in the call's
  ``error_details``) and the episode goes on; TRIAL_NOT_FOUND ends it ``trial_lost``;
* the turn budget: ``max_turns`` assistant turns, then ``max_turns``;
* a result's attachments (a screenshot) ride on its tool message (``AttachedToolMessage``), whatever
  its status: the agent shows the model those meant for it, the trial's files keep them all.

A task with ``conversation`` rules (:class:`~tolokaforge.core.models.ConversationRules`) runs instead as
τ²-bench's orchestrator runs it: an opening line, stop markers, a step and an error budget, unknown tools
answered in τ²'s words unless the rules say ``unknown_tool: fail`` (docs/conversation.md). Without them
the loop is the one above, unchanged.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from tolokaforge.contracts.runner import ExecutionStatus
from tolokaforge.core.models import ConversationRules, TaskDescription
from tolokaforge.core.runner_api import (
    RegisteredTrial,
    Runner,
    RunnerUnavailableError,
    ToolCallRequest,
    ToolResult,
    TrialLostError,
)
from tolokaforge.core.termination import TerminationReason
from tolokaforge.core.transcript import (
    AssistantMessage,
    Executor,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)

from ..agents.base import Agent
from ..errors import AgentError
from ..results.outcome import CallRecord, Episode
from ..turns import AttachedToolMessage, ProposedCall
from ..users.base import UserSimulator

__all__ = ["CallIds", "run_episode", "tool_error_text"]

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


def _decoded_arguments(arguments_json: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments_json)
    except ValueError:
        return {}
    return cast(dict[str, Any], value) if isinstance(value, dict) else {}


def _unknown_tool_text(name: str, executor: str, trial: RegisteredTrial) -> str:
    """τ²'s answer to a call of a tool it does not have (its environment raises, ``get_response`` prefixes).

    An agent call, or a user call where the user has tools: ``Tool '<name>' not found.``
    (``ToolKitBase.use_tool``); a user call where the user has none: ``User tools not available``
    (``Environment.use_user_tool``).
    """
    if executor == "user" and not trial.user_tools:
        return "Error: User tools not available"
    return f"Error: Tool '{name}' not found."


def tool_error_text(result: ToolResult) -> str:
    """What the caller reads for a call ExecuteTool did not answer SUCCESS (and the loop does not answer itself).

    A tool's own error (``reported_by_tool``: it returned ``tolokaforge.sdk.tool_result.ReportedError``)
    reads exactly ``"Error: " + error_message``, even when the message is empty, as τ²'s ``get_response``
    prints ``f"Error: {e}"``. Any other failure reads ``Error: <error_message>``, an empty message
    replaced by the status name.
    """
    message = result.failure.message if result.failure is not None else ""
    if result.reported_by_tool:
        return "Error: " + message
    return f"Error: {message or result.status.name}"


@dataclass
class _Loop:
    runner: Runner
    trial: RegisteredTrial
    episode: Episode
    rules: ConversationRules | None = None
    ids: CallIds = field(default_factory=CallIds)

    async def execute(
        self, proposed: Sequence[ProposedCall], executor: Executor
    ) -> tuple[list[ToolCall], list[ToolMessage], bool]:
        """Run a turn's calls in order; the flag is False once TOOL_NOT_FOUND has failed the trial (only
        under rules that say ``unknown_tool: fail``)."""
        calls = [
            ToolCall(
                id=self.ids.assign(call.id),
                name=call.name or "unnamed",
                arguments=_decoded_arguments(call.arguments_json),
            )
            for call in proposed
        ]
        fail_unknown = self.rules is not None and self.rules.unknown_tool == "fail"
        in_tau2_words = self.rules is not None and self.rules.unknown_tool == "answer"
        results: list[ToolMessage] = []
        for call, raw in zip(calls, proposed, strict=True):
            result = await self.runner.execute(
                ToolCallRequest(
                    trial_id=self.trial.trial_id,
                    call_id=call.id,
                    tool_name=call.name,
                    arguments_json=raw.arguments_json,
                    executor=executor,
                )
            )
            status = result.status
            failure = result.failure
            error = failure.message if failure is not None else ""
            record = CallRecord(
                call_id=call.id,
                name=call.name,
                executor=executor,
                arguments_json=raw.arguments_json,
                status=status.name,
                output=result.output,
                error=error,
                error_category=failure.category.name if failure is not None else "",
                error_details=dict(failure.details) if failure is not None else {},
                latency_s=result.latency_s,
            )
            self.episode.calls.append(record)
            if status == ExecutionStatus.SUCCESS:
                text = result.output
            else:
                self.episode.tool_errors += 1
                if status == ExecutionStatus.TOOL_NOT_FOUND and in_tau2_words:
                    text = _unknown_tool_text(raw.name, executor, self.trial)
                else:
                    text = tool_error_text(result)
            if result.attachments:  # a screenshot: the model may see it, the trial's files keep it
                results.append(AttachedToolMessage(text, call.id, result.attachments))
            else:
                results.append(ToolMessage(content=text, tool_call_id=call.id))
            if status == ExecutionStatus.TOOL_NOT_FOUND and fail_unknown:
                self.episode.error = f"tool {call.name!r} is not registered for {executor}: {error}"
                return calls[: len(results)], results, False
        return calls, results, True

    async def user_side_calls(self, proposed: Sequence[ProposedCall]) -> bool:
        """The golden agent's replay of user-side golden actions: a user message without text, run as the user's."""
        calls, results, ok = await self.execute(proposed, "user")
        self.episode.messages.append(UserMessage("", tuple(calls)))
        self.episode.messages.extend(results)
        return ok


async def run_episode(
    runner: Runner,
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
    rules = task.conversation
    try:
        loop = _Loop(runner, trial, episode, rules)
        if rules is None:
            episode.termination = await _converse(loop, task, agent, user, max_turns)
        else:
            episode.termination = await _converse_by_rules(loop, task, agent, user, max_turns, rules)
    except TrialLostError as error:
        episode.termination, episode.error = TerminationReason.TRIAL_LOST, str(error)
    except AgentError as error:
        episode.termination, episode.error = TerminationReason.ERROR, str(error)
        if error.usage is not None:  # what the failed turn spent and retried still counts
            episode.usage.add(error.usage)
        if error.infrastructure:
            episode.infrastructure_error = str(error)
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
        if turn.usage is not None:
            episode.usage.add(turn.usage)
        if turn.executor == "user" and turn.tool_calls:
            if not await loop.user_side_calls(turn.tool_calls):
                return TerminationReason.TOOL_NOT_FOUND
            continue
        episode.assistant_turns += 1
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


@dataclass
class _Budget:
    """τ²'s step and error budgets over one episode (``ConversationRules.max_steps`` / ``max_errors``).

    τ²'s orchestrator counts one step per message hop: an agent or user message, or the answers to one
    message's tool calls (all of them together). It checks its budgets after every step that does not
    hand the turn to the tools, so a message that calls tools is checked once its answers are in. The
    step budget is checked first and the error budget second, and either overrides what the step itself
    decided (a stop marker said on the last allowed step still ends ``max_turns``).
    """

    rules: ConversationRules
    episode: Episode

    def hop(self, count: int = 1) -> None:
        self.episode.steps += count

    def verdict(self, ending: TerminationReason | None) -> TerminationReason | None:
        steps, errors = self.rules.max_steps, self.rules.max_errors
        if steps is not None and self.episode.steps >= steps:
            ending = TerminationReason.MAX_TURNS
        if errors is not None and self.episode.tool_errors >= errors:
            ending = TerminationReason.TOO_MANY_ERRORS
        return ending


async def _converse_by_rules(
    loop: _Loop,
    task: TaskDescription,
    agent: Agent,
    user: UserSimulator,
    max_turns: int,
    rules: ConversationRules,
) -> TerminationReason:
    """The conversation as τ²'s orchestrator runs it (docs/conversation.md)."""
    episode = loop.episode
    messages = episode.messages
    budget = _Budget(rules, episode)
    if task.system_prompt:
        messages.append(SystemMessage(task.system_prompt))
    if rules.first_assistant_message:  # said before the loop: no step
        messages.append(AssistantMessage(rules.first_assistant_message))
    if task.initial_user_message:  # the user's first message, scripted: a step like any other
        messages.append(UserMessage(task.initial_user_message))
        budget.hop()
        stop = rules.user_stops(task.initial_user_message)
        ending = budget.verdict(TerminationReason.USER_STOP if stop else None)
    else:
        ending = await _user_turn_by_rules(loop, user, budget)
    while ending is None:
        if rules.max_steps is None and episode.assistant_turns >= max_turns:
            return TerminationReason.MAX_TURNS
        turn = await agent.next_turn(messages, loop.trial.agent_tools)
        if turn.usage is not None:
            episode.usage.add(turn.usage)
        if turn.executor == "user" and turn.tool_calls:
            if not await loop.user_side_calls(turn.tool_calls):
                return TerminationReason.TOOL_NOT_FOUND
            budget.hop(2)  # the user's message to the tools, and their answers
            ending = budget.verdict(None)
            continue
        episode.assistant_turns += 1
        done = turn.done or rules.agent_stops(turn.content)
        if turn.tool_calls:
            calls, results, ok = await loop.execute(turn.tool_calls, "agent")
            messages.append(AssistantMessage(turn.content, tuple(calls)))
            messages.extend(results)
            if not ok:
                return TerminationReason.TOOL_NOT_FOUND
            budget.hop(2)  # the message to the tools (not checked: the turn is theirs), and their answers
            ending = budget.verdict(TerminationReason.AGENT_DONE if done else None)
            continue
        if turn.content:
            messages.append(AssistantMessage(turn.content))
        budget.hop()
        ending = budget.verdict(TerminationReason.AGENT_DONE if done else None)
        if ending is None:
            ending = await _user_turn_by_rules(loop, user, budget)
    return ending


async def _user_turn_by_rules(loop: _Loop, user: UserSimulator, budget: _Budget) -> TerminationReason | None:
    """The user's turn under rules: as many tool rounds as the step budget allows, as in τ² (no cap of its own)."""
    messages = loop.episode.messages
    rules = budget.rules
    rounds = 0
    while True:
        turn = await user.next_turn(messages, loop.trial.user_tools)
        if turn.usage is not None:
            loop.episode.usage.add(turn.usage)
        if not turn.tool_calls:
            messages.append(UserMessage(turn.content))
            budget.hop()
            stop = turn.stop or rules.user_stops(turn.content)
            return budget.verdict(TerminationReason.USER_STOP if stop else None)
        calls, results, ok = await loop.execute(turn.tool_calls, "user")
        messages.append(UserMessage(turn.content, tuple(calls)))
        messages.extend(results)
        if not ok:
            return TerminationReason.TOOL_NOT_FOUND
        budget.hop(2)
        if (ending := budget.verdict(None)) is not None:
            return ending
        rounds += 1
        if rules.max_steps is None and rounds >= MAX_USER_TOOL_ROUNDS:  # nothing else would bound it
            raise AgentError(
                f"the simulated user called tools {MAX_USER_TOOL_ROUNDS} times without saying anything"
            )
