"""ConversationRules (docs/conversation.md): τ²-bench's way of running a conversation, on the embedded runner.

Scripted agents and users drive most rules; the LLM agent and the LLM user run against the real local
chat-completions server of conftest.py (the only thing faked is the model).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import pytest
from aiohttp import web

from tolokaforge.core.models import ConversationRules, GoldenAction, TaskDescription, UserSimulatorConfig
from tolokaforge.core.termination import GRADEABLE_TERMINATION_REASONS, TerminationReason
from tolokaforge.core.transcript import AssistantMessage, SystemMessage, ToolMessage, UserMessage
from tolokaforge.host.agents import GoldenAgentFactory, LLMAgentFactory, ScriptedAgentFactory
from tolokaforge.host.agents.base import AgentFactory
from tolokaforge.host.agents.scripted import Script
from tolokaforge.host.llm import DEFAULT_PRICES, ChatClient, ChatSettings
from tolokaforge.host.packs import load_pack
from tolokaforge.host.results.outcome import TrialOutcome
from tolokaforge.host.run.conductor import TrialSettings, run_trial
from tolokaforge.host.users.base import UserSimulatorFactory
from tolokaforge.host.users.llm import LLMUserFactory
from tolokaforge.host.users.router import UserRouter
from tolokaforge.runner import start_runner

if TYPE_CHECKING:
    from conftest import ChatServer, Replies, Responder

PACKS = Path(__file__).resolve().parents[3] / "examples" / "packs"
RETAIL_TASK = "write_cancel_processing_order"  # initial message, then the user says "Yes, please cancel it."
PHONE_TASK = "dc_airplane_mode_no_service"
GREETING = "Hi! How can I help you today?"
TAU2_USER_MARKERS = ["###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###"]


def _task(pack: str, task_id: str, **update: Any) -> Any:
    """The example task, changed by ``update`` (a LoadedTask; its type moves with the loader)."""
    loaded = next(task for task in load_pack(PACKS / pack).tasks if task.task_id == task_id)
    return dataclasses.replace(loaded, task=loaded.task.model_copy(update=update))


def _agent(*turns: dict[str, Any]) -> ScriptedAgentFactory:
    return ScriptedAgentFactory(Script.model_validate({"default": list(turns)}))


def _call(name: str, arguments: dict[str, Any] | str, call_id: str = "") -> dict[str, Any]:
    return {"name": name, "arguments": arguments, "id": call_id}


async def _run(loaded: Any, agents: AgentFactory, users: UserSimulatorFactory | None = None) -> TrialOutcome:
    runner = await start_runner(serve=False)
    client = runner.runner
    try:
        return await run_trial(client, loaded, 0, agents, users or UserRouter(), TrialSettings("rules"))
    finally:
        await client.aclose()
        await runner.close()


# The retail conversation every budget test walks, with τ²'s step count after each message:
# user's first message 1 | agent calls get_order_details 2, its answer 3 | agent asks 4 | user "Yes" 5 |
# agent calls cancel_order 6, its answer 7 | agent reports 8 | user ###STOP### 9.
CANCEL = (
    {"tool_calls": [_call("get_order_details", {"order_id": "O-50035"})]},
    {"content": "Order O-50035 is processing. Shall I cancel it?"},
    {"tool_calls": [_call("cancel_order", {"order_id": "O-50035", "reason": "found_better_price"})]},
    {"content": "Cancelled."},
)


async def test_without_rules_nothing_changes() -> None:
    task = _task("retail", RETAIL_TASK)
    assert task.task.conversation is None
    outcome = await _run(task, _agent(*CANCEL))
    assert outcome.termination == TerminationReason.USER_STOP
    assert outcome.episode.steps == 0  # counted only under rules
    assert isinstance(outcome.episode.messages[1], UserMessage)  # no greeting


async def test_the_greeting_comes_first_and_is_no_step() -> None:
    rules = ConversationRules(first_assistant_message=GREETING)
    outcome = await _run(_task("retail", RETAIL_TASK, conversation=rules), _agent(*CANCEL))
    messages = outcome.episode.messages
    assert isinstance(messages[0], SystemMessage)
    assert messages[1] == AssistantMessage(GREETING)
    assert isinstance(messages[2], UserMessage) and messages[2].content.startswith("Hi, I'm Hiro Novak")
    assert outcome.termination == TerminationReason.USER_STOP
    assert outcome.episode.steps == 9  # the walk above: the greeting is not counted
    assert outcome.episode.assistant_turns == 4  # the greeting is no turn of the agent's either
    assert outcome.grade is not None and outcome.grade.binary_pass, outcome.grading_error


async def test_without_a_first_user_message_the_user_answers_the_greeting() -> None:
    rules = ConversationRules(first_assistant_message=GREETING, user_stop_markers=TAU2_USER_MARKERS)
    task = _task("retail", RETAIL_TASK, conversation=rules, initial_user_message="")
    outcome = await _run(task, _agent({"content": "Which order?"}))
    messages = outcome.episode.messages
    assert messages[1:4] == [
        AssistantMessage(GREETING),
        UserMessage("Yes, please cancel it."),
        AssistantMessage("Which order?"),
    ]
    assert messages[4] == UserMessage("###STOP###")
    assert outcome.termination == TerminationReason.USER_STOP


@pytest.mark.parametrize("marker", TAU2_USER_MARKERS)
async def test_each_user_stop_marker_ends_the_episode(marker: str) -> None:
    rules = ConversationRules(user_stop_markers=TAU2_USER_MARKERS)
    simulator = UserSimulatorConfig(scripted_flow=[{"user": f"I'd rather talk to a person. {marker}"}])
    task = _task("retail", RETAIL_TASK, conversation=rules, user_simulator=simulator)
    outcome = await _run(task, _agent(*CANCEL))
    assert outcome.termination == TerminationReason.USER_STOP
    assert outcome.episode.messages[-1] == UserMessage(f"I'd rather talk to a person. {marker}")
    assert outcome.episode.assistant_turns == 2


async def test_a_marker_outside_the_rules_is_just_text() -> None:
    simulator = UserSimulatorConfig(scripted_flow=[{"user": "I'd rather talk to a person. ###TRANSFER###"}])
    outcome = await _run(_task("retail", RETAIL_TASK, user_simulator=simulator), _agent(*CANCEL))
    assert outcome.episode.assistant_turns == 4  # the conversation went on past the marker


async def test_an_agent_stop_marker_ends_the_episode_before_the_user_answers() -> None:
    rules = ConversationRules(agent_stop_markers=["###STOP###"])
    task = _task("retail", RETAIL_TASK, conversation=rules)
    outcome = await _run(
        task, _agent(CANCEL[0], {"content": "I cannot help with that. ###STOP###"}, *CANCEL[1:])
    )
    assert outcome.termination == TerminationReason.AGENT_DONE
    assert outcome.episode.messages[-1] == AssistantMessage("I cannot help with that. ###STOP###")
    assert outcome.episode.steps == 4
    # Without the rules the same turn is text like any other: the user answers it.
    plain = await _run(
        _task("retail", RETAIL_TASK), _agent(CANCEL[0], {"content": "I cannot help with that. ###STOP###"})
    )
    assert isinstance(plain.episode.messages[-1], UserMessage)


@pytest.mark.parametrize(
    ("max_steps", "ending", "steps", "last"),
    [
        (2, TerminationReason.MAX_TURNS, 3, ToolMessage),  # the call's own step is not checked: its answer is
        (3, TerminationReason.MAX_TURNS, 3, ToolMessage),
        (4, TerminationReason.MAX_TURNS, 4, AssistantMessage),
        (5, TerminationReason.MAX_TURNS, 5, UserMessage),
        (9, TerminationReason.MAX_TURNS, 9, UserMessage),  # ###STOP### on the last step: the budget wins
        (10, TerminationReason.USER_STOP, 9, UserMessage),
    ],
)
async def test_max_steps_counts_hops_as_tau2_does(
    max_steps: int, ending: TerminationReason, steps: int, last: type
) -> None:
    rules = ConversationRules(max_steps=max_steps, user_stop_markers=TAU2_USER_MARKERS)
    outcome = await _run(_task("retail", RETAIL_TASK, conversation=rules), _agent(*CANCEL))
    assert outcome.termination == ending
    assert outcome.episode.steps == steps
    assert isinstance(outcome.episode.messages[-1], last)
    assert outcome.grade is not None  # max_turns is graded, as the harness's own budget is


async def test_max_steps_replaces_the_assistant_turn_budget() -> None:
    rules = ConversationRules(max_steps=100)
    outcome = await _run(_task("retail", RETAIL_TASK, conversation=rules, max_turns=1), _agent(*CANCEL))
    assert outcome.termination == TerminationReason.USER_STOP
    assert outcome.episode.assistant_turns == 4
    # Without max_steps the task's max_turns still applies under rules.
    capped = await _run(
        _task("retail", RETAIL_TASK, conversation=ConversationRules(), max_turns=1), _agent(*CANCEL)
    )
    assert capped.termination == TerminationReason.MAX_TURNS and capped.episode.assistant_turns == 1


@pytest.mark.parametrize("max_steps", [None, 5])
async def test_max_errors_ends_the_trial_too_many_errors(max_steps: int | None) -> None:
    rules = ConversationRules(max_errors=2, max_steps=max_steps)
    agent = _agent(
        {"tool_calls": [_call("get_order_details", "{")]},  # not JSON: INVALID_ARGUMENTS, error 1
        {
            "tool_calls": [
                _call("get_order_details", {"order_id": "O-50035"}),
                _call("get_order_details", {"order_id": 50035}),  # wrong type: error 2
            ]
        },
        {"content": "never said"},
    )
    outcome = await _run(_task("retail", RETAIL_TASK, conversation=rules), agent)
    # At step 5 both budgets are reached: the error budget is checked last and wins, as in τ².
    assert outcome.termination == TerminationReason.TOO_MANY_ERRORS
    assert outcome.episode.tool_errors == 2 and outcome.episode.steps == 5
    assert [call.status for call in outcome.episode.calls] == [
        "INVALID_ARGUMENTS",
        "SUCCESS",
        "INVALID_ARGUMENTS",
    ]
    assert isinstance(outcome.episode.messages[-1], ToolMessage)
    assert outcome.episode.messages[-1].content.startswith("Error: ")
    # Graded exactly when the ending is one GradeTrial accepts (a task's grading may then score it 0).
    assert (outcome.grade is not None) == (TerminationReason.TOO_MANY_ERRORS in GRADEABLE_TERMINATION_REASONS)


async def test_an_unknown_tool_is_answered_and_the_episode_goes_on() -> None:
    rules = ConversationRules(unknown_tool="answer", max_errors=10)
    agent = _agent({"tool_calls": [_call("refund_everything", {"order_id": "O-50035"}, "c1")]}, *CANCEL)
    outcome = await _run(_task("retail", RETAIL_TASK, conversation=rules), agent)
    answer = outcome.episode.messages[3]
    assert answer == ToolMessage("Error: Tool 'refund_everything' not found.", "c1")
    assert outcome.episode.calls[0].status == "TOOL_NOT_FOUND"
    assert outcome.episode.tool_errors == 1
    assert outcome.termination == TerminationReason.USER_STOP
    assert outcome.grade is not None, outcome.grading_error
    # The default is "answer"; "fail" makes the same call end the trial.
    assert ConversationRules().unknown_tool == "answer"
    rules = ConversationRules(unknown_tool="fail")
    failed = await _run(_task("retail", RETAIL_TASK, conversation=rules), agent)
    assert failed.termination == TerminationReason.TOOL_NOT_FOUND


async def test_golden_user_side_actions_run_as_the_users_in_their_place() -> None:
    loaded = _task("dual_control", PHONE_TASK)
    task: TaskDescription = loaded.task
    state_checks = task.grading.state_checks
    assert state_checks is not None
    actions = [
        GoldenAction(tool_name="get_network_status", arguments={"line_id": "L-1003"}),
        GoldenAction(
            tool_name="toggle_airplane_mode",
            arguments={"line_id": "L-1003", "enabled": False},
            executor="user",
        ),
        GoldenAction(tool_name="get_network_status", arguments={"line_id": "L-1003"}),
    ]
    grading = task.grading.model_copy(
        update={"state_checks": state_checks.model_copy(update={"golden_actions": actions})}
    )
    for rules in (None, ConversationRules(first_assistant_message=GREETING, max_steps=50)):
        changed = dataclasses.replace(
            loaded, task=task.model_copy(update={"grading": grading, "conversation": rules})
        )
        outcome = await _run(changed, GoldenAgentFactory())
        episode = outcome.episode
        assert outcome.termination == TerminationReason.AGENT_DONE
        assert [(call.name, call.executor, call.status) for call in episode.calls] == [
            ("get_network_status", "agent", "SUCCESS"),
            ("toggle_airplane_mode", "user", "SUCCESS"),
            ("get_network_status", "agent", "SUCCESS"),
        ]
        assert json.loads(episode.calls[0].output)["registered"] is False
        assert json.loads(episode.calls[2].output)["registered"] is True  # the user's action came between
        user_turn = next(m for m in episode.messages if isinstance(m, UserMessage) and m.tool_calls)
        assert (user_turn.content, user_turn.tool_calls[0].name) == ("", "toggle_airplane_mode")
        assert episode.assistant_turns == 3  # two agent calls and the golden response; the user's is not one


# --- the LLM agent and the LLM user -------------------------------------------------------------

TAU2_USER_PROMPT = (
    "# User simulation guidelines\nYou play a customer.\n\n<scenario>\nNo signal on L-1003.\n</scenario>"
)
TAU2_RULES = ConversationRules(
    first_assistant_message=GREETING,
    agent_stop_markers=["###STOP###"],
    user_stop_markers=TAU2_USER_MARKERS,
    max_steps=50,
    max_errors=10,
    unknown_tool="answer",
)


async def _llm_run(loaded: Any, server: ChatServer, agents: AgentFactory | None = None) -> TrialOutcome:
    async with aiohttp.ClientSession() as session:
        client = ChatClient(
            ChatSettings(model="gpt-4o-mini", base_url=server.url, api_key="test-key"),
            session,
            DEFAULT_PRICES,
        )
        return await _run(loaded, agents or LLMAgentFactory(client), UserRouter(llm=LLMUserFactory(client)))


async def test_tau2_conversation_with_llm_agent_and_llm_user(
    chat_server: Callable[[Responder], Awaitable[ChatServer]], replies: Replies
) -> None:
    requests: dict[str, list[dict[str, Any]]] = {"agent": [], "user": []}

    async def respond(body: dict[str, Any], count: int) -> web.StreamResponse:
        role = "user" if body["messages"][0]["content"] == TAU2_USER_PROMPT else "agent"
        step = len(requests[role])
        requests[role].append(body)
        if role == "user":
            if step == 0:
                return replies.completion({"content": "My phone says no service."})
            if step == 1:  # two device calls in one message, one of a tool the phone does not have
                calls = [
                    replies.tool_call(
                        "u1", "toggle_airplane_mode", '{"line_id": "L-1003", "enabled": false}'
                    ),
                    replies.tool_call("u2", "call_my_mum", "{}"),
                ]
                return replies.completion(
                    {"content": None, "tool_calls": [c["tool_calls"][0] for c in calls]}
                )
            return replies.completion({"content": "Done, I have signal again."})
        if step == 0:  # text and a call in one message: the call runs, the user never reads the text
            call = replies.tool_call("a1", "get_network_status", '{"line_id": "L-1003"}')
            return replies.completion({**call, "content": "Let me check your line."})
        if step == 1:
            return replies.completion({"content": "Airplane mode is on: please turn airplane mode off."})
        return replies.completion({"content": "Glad it works. ###STOP###"})

    server = await chat_server(respond)
    simulator = UserSimulatorConfig(mode="llm", system_prompt=TAU2_USER_PROMPT, persona="ignored")
    task = _task(
        "dual_control", PHONE_TASK, conversation=TAU2_RULES, user_simulator=simulator, initial_user_message=""
    )
    outcome = await _llm_run(task, server)
    episode = outcome.episode

    assert outcome.termination == TerminationReason.AGENT_DONE  # the LLM agent's ###STOP###
    assert (len(requests["agent"]), len(requests["user"])) == (3, 3)
    # user text 1 | agent call 2, answers 3 | agent text 4 | user calls 5, answers 6 | user text 7 | agent 8
    assert episode.steps == 8
    assert episode.tool_errors == 1
    unknown = next(m for m in episode.messages if isinstance(m, ToolMessage) and m.tool_call_id == "u2")
    assert unknown.content == "Error: Tool 'call_my_mum' not found."

    # The user model: the pack's prompt verbatim, then the greeting as the other party's words.
    first = requests["user"][0]
    assert first["messages"] == [
        {"role": "system", "content": TAU2_USER_PROMPT},
        {"role": "user", "content": GREETING},
    ]
    assert {tool["function"]["name"] for tool in first["tools"]} == {
        "check_status_bar",
        "toggle_airplane_mode",
        "restart_device",
    }
    # It never reads the agent's turn that called tools, text included, nor the agent's tool results.
    second = requests["user"][1]["messages"]
    assert second[1:] == [
        {"role": "user", "content": GREETING},
        {"role": "assistant", "content": "My phone says no service."},
        {"role": "user", "content": "Airplane mode is on: please turn airplane mode off."},
    ]
    third = requests["user"][2]["messages"]
    assert [m["role"] for m in third[4:]] == ["assistant", "tool", "tool"]
    assert third[6] == {
        "role": "tool",
        "tool_call_id": "u2",
        "content": "Error: Tool 'call_my_mum' not found.",
    }

    # The agent model: the greeting as its own first message; the user's device turn is not shown to it.
    agent_first = requests["agent"][0]["messages"]
    assert [m["role"] for m in agent_first] == ["system", "assistant", "user"]
    assert agent_first[1]["content"] == GREETING
    agent_last = requests["agent"][2]["messages"]
    assert [m["role"] for m in agent_last] == [
        "system",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert agent_last[3]["content"] == "Let me check your line."  # its own text-and-call turn, as it said it
    assert agent_last[-1] == {"role": "user", "content": "Done, I have signal again."}


async def test_llm_user_stops_on_a_tau2_marker_and_user_calls_without_user_tools_are_answered(
    chat_server: Callable[[Responder], Awaitable[ChatServer]], replies: Replies
) -> None:
    async def respond(body: dict[str, Any], count: int) -> web.StreamResponse:
        if count == 1:  # the model calls a tool it was not offered
            return replies.completion(replies.tool_call("u1", "check_status_bar", "{}"))
        return replies.completion({"content": "That is not something you can do. ###OUT-OF-SCOPE###"})

    server = await chat_server(respond)
    simulator = UserSimulatorConfig(mode="llm", system_prompt="You are a retail customer.")
    task = _task("retail", RETAIL_TASK, conversation=TAU2_RULES, user_simulator=simulator)
    outcome = await _llm_run(task, server, _agent({"content": "Can you read me the code on your receipt?"}))
    assert "tools" not in server.requests[0]  # retail offers the user no tools
    answer = next(m for m in outcome.episode.messages if isinstance(m, ToolMessage))
    assert answer == ToolMessage("Error: User tools not available", "u1")
    assert outcome.episode.tool_errors == 1
    assert outcome.termination == TerminationReason.USER_STOP
