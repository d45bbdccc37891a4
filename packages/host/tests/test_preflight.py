"""The preflight spends one token per model, not a run; a provider lost mid-run leaves trials for --resume.

Every run is the real ``tolokaforge run`` in a subprocess against a real local HTTP server speaking
the chat-completions API (conftest ``chat_server``), with the embedded runner.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import pytest
import yaml
from aiohttp import web

from tolokaforge.core.models import JudgeModelConfig
from tolokaforge.host.agents.setup import AgentRecipe, LLMOptions
from tolokaforge.host.errors import EndpointUnreachableError, ModelRefusedError
from tolokaforge.host.llm.preflight import PREFLIGHT_MESSAGES, ModelCheck, check_models, judge_check

if TYPE_CHECKING:
    from conftest import ChatServer, Replies, Responder

TASK = "lookup_order_tracking"
TRIALS = 2


def _is_preflight(body: dict[str, Any]) -> bool:
    return body["messages"] == PREFLIGHT_MESSAGES and body.get("max_completion_tokens") == 1


async def _run(
    packs_dir: Path, output: Path, server: ChatServer, *extra: str, model: str = "gpt-4o-mini"
) -> tuple[int, str, str]:
    """``tolokaforge run`` with the llm agent, in a subprocess, while this loop serves the endpoint."""
    args = ["run", "--pack", str(packs_dir / "retail"), "--task", TASK, "--trials", str(TRIALS)]
    args += ["--agent", "llm", "--model", model]
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "from tolokaforge.host.cli import main; main()",
        *args,
        "--output",
        str(output),
        "--llm-max-retries",
        "1",
        *extra,
        env={"PATH": os.environ["PATH"], "OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "test-key"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=180)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def _error(status: int, message: str, code: str) -> web.Response:
    return web.json_response(
        {"error": {"message": message, "type": "invalid_request_error", "code": code}}, status=status
    )


async def test_a_refused_key_exits_2_before_any_trial_naming_role_and_model(
    packs_dir: Path, tmp_path: Path, chat_server: Callable[[Responder], Awaitable[ChatServer]]
) -> None:
    async def refuse(body: dict[str, Any], count: int) -> web.StreamResponse:
        # As a provider answers a wrong key, quoting part of what it received.
        return _error(401, "Incorrect API key provided: test-key.", "invalid_api_key")

    server = await chat_server(refuse)
    output = tmp_path / "run"
    code, out, err = await _run(packs_dir, output, server)

    assert code == 2, out + err
    assert err.startswith(
        f"tolokaforge: error (exit 2): preflight: the agent model 'gpt-4o-mini' at {server.url} "
        "refused the request: HTTP 401: "
    ), err
    assert "invalid_api_key" in err and "test-key" not in err  # the reason, the key redacted
    assert len(server.requests) == 1 and _is_preflight(server.requests[0])  # one call, one token at most
    assert not output.exists()  # no trial, no run folder
    assert "trials" not in out  # no progress bar either


async def test_an_unknown_model_exits_2_before_any_trial(
    packs_dir: Path, tmp_path: Path, chat_server: Callable[[Responder], Awaitable[ChatServer]]
) -> None:
    async def unknown(body: dict[str, Any], count: int) -> web.StreamResponse:
        return _error(404, f"The model `{body['model']}` does not exist.", "model_not_found")

    server = await chat_server(unknown)
    output = tmp_path / "run"
    code, out, err = await _run(packs_dir, output, server, model="gpt-nonexistent")

    assert code == 2, out + err
    assert err.startswith(
        f"tolokaforge: error (exit 2): preflight: the agent model 'gpt-nonexistent' at {server.url} "
        "refused the request: HTTP 404: "
    ), err
    assert "model_not_found" in err and err.count("\n") == 1
    assert [body["model"] for body in server.requests] == ["gpt-nonexistent"]
    assert not output.exists()


async def test_a_provider_lost_mid_run_leaves_trials_unfinished_exit_2_and_resume_finishes_them(
    packs_dir: Path,
    tmp_path: Path,
    chat_server: Callable[[Responder], Awaitable[ChatServer]],
    replies: Replies,
) -> None:
    healthy = True
    preflights = 0

    async def respond(body: dict[str, Any], count: int) -> web.StreamResponse:
        nonlocal healthy, preflights
        if _is_preflight(body):
            preflights += 1
            healthy = preflights > 1  # the first run's provider goes down right after its preflight
            return replies.completion({"content": "O"}, completion_tokens=1)
        if not healthy:
            return web.Response(status=429, headers={"Retry-After": "0"})
        if replies.assistant_turns(body) == 0:
            return replies.completion(replies.tool_call("c1", "get_order_details", '{"order_id": "O-50064"}'))
        return replies.completion({"content": "Tracking 1Z1749276956, arriving 2026-03-19."})

    server = await chat_server(respond)
    output = tmp_path / "run"
    code, out, err = await _run(packs_dir, output, server)

    assert code == 2, out + err
    assert out.strip().splitlines()[-1] == (
        f"exit 2: {TRIALS} of {TRIALS} trials unfinished by the infrastructure "
        f"(--resume runs them again); pass rate 0.000 (0/{TRIALS} passed)"
    )
    summary = yaml.safe_load((output / "summary.yaml").read_text())
    assert summary["outcomes"]["unfinished"] == TRIALS, summary["outcomes"]
    for index in range(TRIALS):
        folder = output / "trials" / TASK / str(index)
        assert not (folder / "grade.yaml").exists()  # never graded: no verdict on the agent
        trajectory = yaml.safe_load((folder / "trajectory.yaml").read_text())
        assert "failed after 2 attempt(s)" in trajectory["error"] and "HTTP 429" in trajectory["error"]
        assert yaml.safe_load((folder / "metrics.yaml").read_text())["llm_retries"] == 1
    trial_calls = len(server.requests) - 1
    assert trial_calls == 2 * TRIALS  # each trial's first try and its one retry

    code, out, err = await _run(packs_dir, output, server, "--resume")

    assert code == 0, out + err
    assert out.strip().splitlines()[-1].startswith(f"exit 0: all {TRIALS} trials graded")
    assert preflights == 2  # the resumed run checked the model again before its trials
    for index in range(TRIALS):
        assert (output / "trials" / TASK / str(index) / "grade.yaml").is_file()
    summary = yaml.safe_load((output / "summary.yaml").read_text())
    assert summary["outcomes"]["unfinished"] == 0


async def test_a_request_the_provider_refuses_for_its_content_stays_the_trials_own(
    packs_dir: Path,
    tmp_path: Path,
    chat_server: Callable[[Responder], Awaitable[ChatServer]],
    replies: Replies,
) -> None:
    async def respond(body: dict[str, Any], count: int) -> web.StreamResponse:
        if _is_preflight(body):
            return replies.completion({"content": "O"}, completion_tokens=1)
        return _error(400, "This model's maximum context length is 8 tokens.", "context_length_exceeded")

    server = await chat_server(respond)
    output = tmp_path / "run"
    code, out, err = await _run(packs_dir, output, server)

    # A 400 about what the trial sent is no outage: the trials are not gradeable, exit 1, never rerun.
    assert code == 1, out + err
    assert out.strip().splitlines()[-1].startswith(f"exit 1: {TRIALS} not gradeable of {TRIALS} trials")


async def test_roles_sharing_a_model_share_one_call_and_are_named_together(
    chat_server: Callable[[Responder], Awaitable[ChatServer]], monkeypatch: pytest.MonkeyPatch
) -> None:
    async def refuse(body: dict[str, Any], count: int) -> web.StreamResponse:
        return _error(403, "This key may not use the model.", "permission_denied")

    server = await chat_server(refuse)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.delenv("TOLOKAFORGE_LLM_API_KEY", raising=False)
    recipe = AgentRecipe.of("llm", LLMOptions("m", None, server.url, None, timeout_s=5.0), None, True)
    checks = recipe.model_checks()
    assert [(check.role, check.model) for check in checks] == [("agent", "m"), ("user simulator", "m")]
    async with aiohttp.ClientSession() as session:
        with pytest.raises(ModelRefusedError) as caught:
            await check_models(session, checks)
    assert len(server.requests) == 1  # one call for both roles
    assert str(caught.value).startswith(
        f"preflight: the agent and user simulator model 'm' at {server.url} refused the request: HTTP 403: "
    )


async def test_an_endpoint_nobody_listens_on_is_unreachable_not_refused() -> None:
    async with aiohttp.ClientSession() as session:
        probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = probe.sockets[0].getsockname()[1]
        probe.close()
        await probe.wait_closed()
        check = ModelCheck("judge", "j", f"http://127.0.0.1:{port}/v1", "key-123456789", 5.0, 0)
        with pytest.raises(
            EndpointUnreachableError, match=r"^preflight: the judge model 'j' at .* unreachable: "
        ):
            await check_models(session, [check])


def test_the_judge_is_checked_with_the_key_the_runner_reads() -> None:
    judge = JudgeModelConfig(model="gpt-4o", base_url="http://judge.example/v1")
    environ = {"TOLOKAFORGE_JUDGE_API_KEY": "judge-key-123", "OPENAI_API_KEY": "agent-key-456"}
    check = judge_check(judge, environ)
    assert check is not None
    assert (check.role, check.model, check.base_url, check.api_key) == (
        "judge",
        "gpt-4o",
        "http://judge.example/v1",
        "judge-key-123",
    )
    assert "judge-key-123" not in repr(check)
    assert (
        judge_check(judge, {"OPENAI_API_KEY": "agent-key-456"}) is not None
    )  # the agent's key, as the runner falls back
    assert judge_check(judge, {}) is None  # no key here: a remote runner has its own
    assert judge_check(JudgeModelConfig(model="tolokaforge-mock-judge"), environ) is None  # no network
