"""The rubric judge end to end: a real runner on loopback, a real local chat-completions server as the judge."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from tolokaforge.contracts.runner import GetStateRequest, JudgeStatus, RunnerServiceStub

PAY_O1 = {"tool_name": "set_status", "arguments": {"order_id": "O-1", "status": "paid"}}
ORACLE = "ORACLE-MARKER-never-shown-to-the-judge"
KEY_ENV = "TF_TEST_JUDGE_KEY"

RUBRIC: dict[str, Any] = {
    "reference": "The order O-1 ends up paid and the customer is told so.",
    "criteria": [
        {
            "id": "confirmed",
            "description": "The agent tells the customer the order is paid.",
            "kind": "binary",
        },
        {"id": "tone", "description": "The agent is courteous.", "kind": "graded", "weight": 3.0},
        {"id": "paid_right_order", "description": "O-1 (not O-2) is paid.", "required": True},
    ],
}

Handler = Callable[[dict[str, Any], int], Awaitable[web.StreamResponse]]


@dataclass
class JudgeServer:
    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=lambda: [])


@pytest.fixture
async def judge_server() -> AsyncIterator[Callable[[Handler], Awaitable[JudgeServer]]]:
    runners: list[web.AppRunner] = []

    async def start(handler: Handler) -> JudgeServer:
        server = JudgeServer()

        async def handle(request: web.Request) -> web.StreamResponse:
            assert request.headers["Authorization"] == "Bearer judge-secret"
            body = json.loads(await request.text())
            server.requests.append(body)
            return await handler(body, len(server.requests))

        app = web.Application()
        app.router.add_post("/v1/chat/completions", handle)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        server.url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
        return server

    yield start
    for runner in runners:
        await runner.cleanup()


@pytest.fixture(params=["memory", "http-postgres"])
def store_mode(request: pytest.FixtureRequest) -> str:
    """Both stores: the judge reads the initial state by a snapshot round trip through either."""
    return request.param


@pytest.fixture(autouse=True)
def judge_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "judge-secret")


def completion(
    message: dict[str, Any], *, prompt: int = 1000, completion: int = 200, reasoning: int = 50
) -> web.Response:
    return web.json_response(
        {
            "id": "cmpl",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": "stop"}],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "completion_tokens_details": {"reasoning_tokens": reasoning},
            },
        }
    )


def call(call_id: str, name: str, arguments: dict[str, Any] | str) -> dict[str, Any]:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}],
    }


def report(confirmed: bool = True, tone: float = 0.8, paid_right_order: bool = True) -> dict[str, Any]:
    def because(met: bool) -> str:
        return "checked the evidence\nVERDICT: " + ("MET" if met else "NOT MET")

    return {
        "confirmed_justification": because(confirmed),
        "confirmed": confirmed,
        "tone_justification": because(tone >= 0.5),
        "tone": tone,
        "paid_right_order_justification": because(paid_right_order),
        "paid_right_order": paid_right_order,
        "reasons": "graded on the transcript and the state",
    }


def judge_model(server: JudgeServer, **overrides: Any) -> dict[str, Any]:
    model: dict[str, Any] = {
        "model": "judge-1",
        "base_url": server.url,
        "api_key_env": [KEY_ENV],
        "price": {"prompt_per_million": 2.0, "completion_per_million": 10.0},
        "backoff_s": 0.0,
    }
    model.update(overrides)
    return model


def grading(*, threshold: float = 1.0, rubric: dict[str, Any] | None = None, **judge: Any) -> dict[str, Any]:
    return {
        "combine_method": "weighted",
        "weights": {"state_checks": 1.0, "llm_judge": 1.0},
        "pass_threshold": threshold,
        "state_checks": {
            "hash_enabled": True,
            "golden_actions": [PAY_O1],
            "jsonpaths": [{"path": "$.db.orders[0].status", "equals": "paid", "description": ORACLE}],
            "hash_weight": 0.5,
        },
        "llm_judge": {"rubric": rubric or RUBRIC, **judge},
    }


async def setup_trial(
    stub: RunnerServiceStub,
    spec_factory: Any,
    request_for: Any,
    episode: Any,
    model: dict[str, Any],
    **task: Any,
) -> Any:
    task.setdefault("grading", grading())
    response = await stub.register_trial(request_for(spec_factory("t:0", judge_model=model, **task)))
    assert response.success, response.error
    ep = episode("t:0")
    await ep.call("set_status", {"order_id": "O-1", "status": "paid"}, "c1")
    ep.say("Your order O-1 is paid. Thank you for your patience!")
    return ep


async def stable_hash(stub: RunnerServiceStub) -> str:
    return (await stub.get_state(GetStateRequest(trial_id="t:0"))).stable_hash


async def test_completed_judge_scores_every_criterion_kind_with_a_truthful_report(
    stub: RunnerServiceStub, spec_factory: Any, request_for: Any, episode: Any, judge_server: Any
) -> None:
    async def respond(body: dict[str, Any], count: int) -> web.StreamResponse:
        if count == 1:
            return completion(call("j1", "get_state", {"tables": ["orders"]}))
        if count == 2:
            return completion(
                call("j2", "query_table", {"table": "orders", "path": "$[?(@.status == 'paid')].id"})
            )
        if count == 3:  # a write-shaped call: there is no such tool, and nothing reaches the trial's tables
            return completion(call("j3", "set_status", {"order_id": "O-2", "status": "paid"}))
        return completion(call("j4", "submit_report", report()))

    server = await judge_server(respond)
    ep = await setup_trial(stub, spec_factory, request_for, episode, judge_model(server))
    before = await stable_hash(stub)
    response = await ep.grade()
    assert response.success, response.error
    assert await stable_hash(stub) == before
    grade = response.grade
    assert grade.judge_status == JudgeStatus.COMPLETED
    results = {r.id: r for r in grade.criterion_results}
    assert [r.id for r in grade.criterion_results] == ["confirmed", "tone", "paid_right_order"]
    assert (results["confirmed"].met, results["confirmed"].score) == (True, 1.0)
    assert (results["tone"].met, results["tone"].score) == (True, 0.8)
    assert results["paid_right_order"].met and results["tone"].justification.endswith("VERDICT: MET")
    # weighted mean over non-required criteria: (1 * 1.0 + 3 * 0.8) / 4
    assert grade.components.llm_judge == pytest.approx(0.85)
    assert grade.score == pytest.approx((1.0 + 0.85) / 2)
    assert "Judge: score=0.85 (3/3 criteria met; graded on the transcript and the state)" in grade.reasons
    judge = grade.judge_report
    assert (judge.calls, judge.tool_calls) == (4, 3)
    assert (judge.prompt_tokens, judge.completion_tokens, judge.reasoning_tokens) == (4000, 800, 200)
    assert judge.cost_usd == pytest.approx((4000 * 2.0 + 800 * 10.0) / 1e6)
    assert judge.include_agent_system_prompt is True
    transcript = json.loads(judge.transcript_json)
    assert transcript[0]["role"] == "system" and transcript[-1] == {
        "role": "tool",
        "tool_call_id": "j4",
        "content": "report accepted",
    }
    answers = {m["tool_call_id"]: m["content"] for m in transcript if m["role"] == "tool"}
    assert json.loads(answers["j1"])["orders"][0] == {"id": "O-1", "status": "paid", "total": 10.5}
    assert json.loads(answers["j2"]) == ["O-1"]
    assert answers["j3"].startswith("error: no tool 'set_status'")
    evidence = server.requests[0]["messages"][1]["content"]
    assert "You are a careful shop assistant." in evidence  # the agent's system prompt
    assert "Your order O-1 is paid." in evidence and "[assistant calls set_status c1]" in evidence
    assert '~ orders[O-1].status: "open" -> "paid"' in evidence  # the initial -> final diff
    assert (
        "The order O-1 ends up paid" in evidence and "paid_right_order (binary, required: a gate)" in evidence
    )
    assert all(ORACLE not in json.dumps(body) for body in server.requests)
    tools = {tool["function"]["name"] for tool in server.requests[0]["tools"]}
    assert tools == {"get_state", "query_table", "submit_report"}


async def test_required_criterion_not_met_fails_the_trial_whatever_the_fold_says(
    stub: RunnerServiceStub, spec_factory: Any, request_for: Any, episode: Any, judge_server: Any
) -> None:
    async def respond(body: dict[str, Any], count: int) -> web.StreamResponse:
        return completion(call("j1", "submit_report", report(paid_right_order=False)))

    server = await judge_server(respond)
    ep = await setup_trial(
        stub, spec_factory, request_for, episode, judge_model(server), grading=grading(threshold=0.5)
    )
    response = await ep.grade()
    assert response.success, response.error
    grade = response.grade
    assert grade.judge_status == JudgeStatus.COMPLETED
    assert grade.components.llm_judge == 0.0
    assert grade.score == pytest.approx(0.5)  # the fold alone would pass at 0.5
    assert grade.binary_pass is False
    assert "required criteria not met: paid_right_order -- the trial fails" in grade.reasons
    assert [r.met for r in grade.criterion_results] == [True, True, False]


async def test_malformed_report_is_returned_to_the_judge_and_a_good_one_completes(
    stub: RunnerServiceStub, spec_factory: Any, request_for: Any, episode: Any, judge_server: Any
) -> None:
    async def respond(body: dict[str, Any], count: int) -> web.StreamResponse:
        if count == 1:  # inconsistent (says MET, reports false) and a graded score out of range
            bad = report(confirmed=False) | {"confirmed_justification": "fine\nVERDICT: MET", "tone": 1.5}
            return completion(call("j1", "submit_report", bad))
        return completion(call("j2", "submit_report", report()))

    server = await judge_server(respond)
    ep = await setup_trial(
        stub, spec_factory, request_for, episode, judge_model(server), grading=grading(threshold=0.9)
    )
    response = await ep.grade()
    assert response.success, response.error
    grade = response.grade
    assert grade.judge_status == JudgeStatus.COMPLETED
    assert grade.judge_report.calls == 2 and grade.binary_pass is True
    rejection = server.requests[1]["messages"][-1]
    assert rejection["role"] == "tool" and rejection["tool_call_id"] == "j1"
    assert "'tone' must be a number from 0 to 1" in rejection["content"]
    assert "'confirmed' is inconsistent" in rejection["content"]


async def test_always_malformed_reports_error_the_judge_with_no_score(
    stub: RunnerServiceStub, spec_factory: Any, request_for: Any, episode: Any, judge_server: Any
) -> None:
    async def respond(body: dict[str, Any], count: int) -> web.StreamResponse:
        return completion(call(f"j{count}", "submit_report", {"confirmed": True}))

    server = await judge_server(respond)
    ep = await setup_trial(
        stub, spec_factory, request_for, episode, judge_model(server, max_report_retries=2)
    )
    response = await ep.grade()
    assert response.success, response.error
    grade = response.grade
    assert grade.judge_status == JudgeStatus.ERRORED
    assert list(grade.criterion_results) == []
    assert grade.components.llm_judge == -1.0  # not evaluated -- never 0.0
    assert grade.components.state_checks == 1.0
    assert (grade.binary_pass, grade.score) == (False, 0.0)
    assert "Judge: errored -- 3 malformed or inconsistent reports (retry budget 2)" in grade.reasons
    assert grade.judge_report.calls == 3 == len(server.requests)


@pytest.mark.parametrize("failure", ["http-500", "timeout"])
async def test_failing_endpoint_errors_the_judge(
    stub: RunnerServiceStub,
    spec_factory: Any,
    request_for: Any,
    episode: Any,
    judge_server: Any,
    failure: str,
) -> None:
    async def respond(body: dict[str, Any], count: int) -> web.StreamResponse:
        if failure == "timeout":
            await asyncio.sleep(2.0)
        return web.Response(status=500, text="upstream broke")

    server = await judge_server(respond)
    model = judge_model(server, max_http_retries=1, request_timeout_s=0.3)
    ep = await setup_trial(stub, spec_factory, request_for, episode, model)
    before = await stable_hash(stub)
    response = await ep.grade()
    assert response.success, response.error
    grade = response.grade
    assert grade.judge_status == JudgeStatus.ERRORED and list(grade.criterion_results) == []
    assert grade.components.llm_judge == -1.0 and not grade.binary_pass
    why = "HTTP 500" if failure == "http-500" else "timeout after 0.3s"
    assert f"Judge: errored -- judge endpoint failed after 2 attempts: {why}" in grade.reasons
    assert len(server.requests) == 2 and grade.judge_report.calls == 0
    assert await stable_hash(stub) == before


async def test_wall_clock_budget_errors_the_judge(
    stub: RunnerServiceStub, spec_factory: Any, request_for: Any, episode: Any, judge_server: Any
) -> None:
    async def respond(body: dict[str, Any], count: int) -> web.StreamResponse:
        await asyncio.sleep(0.2)
        return completion({"content": "still thinking"})

    server = await judge_server(respond)
    ep = await setup_trial(stub, spec_factory, request_for, episode, judge_model(server, max_seconds=0.5))
    response = await ep.grade()
    grade = response.grade
    assert grade.judge_status == JudgeStatus.ERRORED
    assert "Judge: errored -- wall-clock budget exhausted: no accepted report within 0.5s" in grade.reasons
    transcript = json.loads(grade.judge_report.transcript_json)
    assert transcript[3] == {
        "role": "user",
        "content": "Finish by calling submit_report with a verdict on every criterion.",
    }


async def test_turn_budget_and_missing_key_error_the_judge(
    stub: RunnerServiceStub,
    spec_factory: Any,
    request_for: Any,
    episode: Any,
    judge_server: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def respond(body: dict[str, Any], count: int) -> web.StreamResponse:
        return completion(call(f"j{count}", "get_state", {}))

    server = await judge_server(respond)
    ep = await setup_trial(stub, spec_factory, request_for, episode, judge_model(server, max_turns=3))
    grade = (await ep.grade()).grade
    assert grade.judge_status == JudgeStatus.ERRORED and grade.judge_report.tool_calls == 3
    assert "turn budget exhausted: 3 judge calls and no accepted report" in grade.reasons
    monkeypatch.delenv(KEY_ENV)
    grade = (await ep.grade()).grade
    assert grade.judge_status == JudgeStatus.ERRORED and len(server.requests) == 3
    assert f"no API key for judge model 'judge-1': set one of {KEY_ENV}" in grade.reasons


async def test_agent_system_prompt_can_be_kept_from_the_judge(
    stub: RunnerServiceStub, spec_factory: Any, request_for: Any, episode: Any, judge_server: Any
) -> None:
    async def respond(body: dict[str, Any], count: int) -> web.StreamResponse:
        return completion(call("j1", "submit_report", report()))

    server = await judge_server(respond)
    customization = {"include_agent_system_prompt": False, "system_prompt": "You grade shop assistants."}
    ep = await setup_trial(
        stub,
        spec_factory,
        request_for,
        episode,
        judge_model(server),
        grading=grading(customization=customization),
    )
    grade = (await ep.grade()).grade
    assert grade.judge_report.include_agent_system_prompt is False
    system, evidence = (m["content"] for m in server.requests[0]["messages"][:2])
    assert system.startswith("You grade shop assistants.") and "submit_report" in system
    assert "careful shop assistant" not in evidence and "## The agent's system prompt" not in evidence


async def test_mock_judge_needs_no_network_and_can_be_told_a_criterion_is_unmet(
    stub: RunnerServiceStub, spec_factory: Any, request_for: Any, episode: Any
) -> None:
    ep = await setup_trial(
        stub, spec_factory, request_for, episode, {"model": "tolokaforge-mock-judge:unmet=tone"}
    )
    grade = (await ep.grade()).grade
    assert grade.judge_status == JudgeStatus.COMPLETED
    assert {r.id: r.score for r in grade.criterion_results} == {
        "confirmed": 1.0,
        "tone": 0.0,
        "paid_right_order": 1.0,
    }
    assert grade.components.llm_judge == pytest.approx(0.25)
    assert (grade.judge_report.calls, grade.judge_report.cost_usd) == (1, 0.0)


async def test_a_judge_without_a_judge_model_cannot_be_graded(
    stub: RunnerServiceStub, spec_factory: Any, request_for: Any, episode: Any
) -> None:
    response = await stub.register_trial(request_for(spec_factory("t:0", grading=grading())))
    assert response.success, response.error
    ep = episode("t:0")
    ep.say("hello")
    response = await ep.grade()
    assert not response.success
    assert response.error.startswith(
        "Trial 't:0' cannot be graded as authored: llm_judge needs a judge model"
    )


async def test_initial_state_after_initialization_actions_is_the_diff_base(
    stub: RunnerServiceStub, spec_factory: Any, request_for: Any, episode: Any, judge_server: Any
) -> None:
    async def respond(body: dict[str, Any], count: int) -> web.StreamResponse:
        return completion(call("j1", "submit_report", report()))

    server = await judge_server(respond)
    tables = {
        "orders": [
            {"id": "O-1", "status": "open", "total": 10.5},
            {"id": "O-2", "status": "open", "total": 3.0},
        ],
        "notes": [],
    }
    initial_state = {
        "tables": tables,
        "initialization_actions": [{"tool_name": "add_note", "arguments": {"text": "seeded"}}],
    }
    ep = await setup_trial(
        stub, spec_factory, request_for, episode, judge_model(server), initial_state=initial_state
    )
    await ep.call("add_note", {"text": "by the agent"}, "c2")
    before = await stable_hash(stub)
    grade = (await ep.grade()).grade
    assert grade.judge_status == JudgeStatus.COMPLETED
    assert await stable_hash(stub) == before
    evidence = server.requests[0]["messages"][1]["content"]
    diff = evidence.split("## How the agent changed the state (initial -> final)\n")[1].split("\n\n")[0]
    assert '~ orders[O-1].status: "open" -> "paid"' in diff
    assert "by the agent" in diff and "seeded" not in diff  # the seeded note is part of the initial state
    again = (await ep.grade()).grade  # the judge's snapshot is gone: grading twice reads the same evidence
    assert (
        again.judge_status == JudgeStatus.COMPLETED
        and server.requests[1]["messages"][1]["content"] == evidence
    )
    assert await stable_hash(stub) == before
