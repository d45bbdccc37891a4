"""The OpenEnv adapter in process: OpenEnv's server over an open Environments, its sessions, its sync API,
and its door: the server's token on every HTTP request and WebSocket handshake, TLS off loopback."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import InvalidStatus

from tolokaforge.core.credentials import CredentialError, bearer, new_token
from tolokaforge.env import Environments, golden_call
from tolokaforge.env.adapters.openenv_env import (
    ChatAction,
    ChatObservation,
    TolokaforgeClient,
    TolokaforgeEnvironment,
    serve,
)

TASK = "write_update_shipping_address"


def _golden_moves(envs: Environments, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The task's golden play as assistant messages: its tool calls, then its golden response."""
    task = envs.tasks[TASK].task
    checks = task.grading.state_checks
    assert checks is not None
    offered = [str(tool["function"]["name"]) for tool in tools]
    calls = [golden_call(action, n + 1, offered) for n, action in enumerate(checks.golden_actions)]
    return [*calls, {"role": "assistant", "content": task.golden_response}]


async def test_served_by_openenvs_server_with_this_envs_schemas(retail: Path) -> None:
    async with (
        Environments.open(retail) as envs,
        serve(envs) as served,
        httpx.AsyncClient(base_url=served.url, headers=served.headers) as http,
    ):
        health = await http.get("/health")
        schema = (await http.get("/schema")).json()
        # OpenEnv's stateless reset: a throwaway environment, its trial released when the request ends.
        reset = (await http.post("/reset", json={"task_id": TASK, "seed": 1})).json()
    assert health.status_code == 200
    assert [m["role"] for m in reset["observation"]["messages"]] == ["system", "user"]
    assert "message" in schema["action"]["properties"]
    assert {"system_prompt", "tools", "messages", "passed", "reasons"} <= set(
        schema["observation"]["properties"]
    )


async def test_a_session_plays_an_episode_and_gets_the_grade_on_its_last_step(
    retail: Path, tmp_path: Path
) -> None:
    async with Environments.open(retail, output=tmp_path / "run") as envs, serve(envs) as served:
        client = TolokaforgeClient(served.url, token=served.token)
        try:
            first = await client.reset(task_id=TASK, seed=3)
            observation = first.observation
            assert observation.system_prompt and observation.tools
            assert [m["role"] for m in observation.messages] == ["system", "user"]
            assert (await client.state()).task_id == TASK
            results = [
                await client.step(ChatAction(message=move)) for move in _golden_moves(envs, observation.tools)
            ]
            # A tool-call step answers with the tool's result and no reward yet.
            assert results[0].observation.messages[0]["role"] == "tool" and results[0].reward is None
            while not results[-1].done:
                results.append(
                    await client.step(ChatAction(message={"role": "assistant", "content": "Anything else?"}))
                )
            last = results[-1]
        finally:
            await client.close()
    grade = yaml.safe_load(next((tmp_path / "run").glob(f"trials/{TASK}/*/grade.yaml")).read_text())
    assert last.reward == grade["score"] == 1.0
    assert last.observation.passed is True and last.observation.reasons == grade["reasons"]
    assert last.observation.termination is not None


async def test_the_sync_api_works_from_another_thread_and_close_releases_the_trial(
    retail: Path, tmp_path: Path
) -> None:
    async with Environments.open(retail, output=tmp_path / "run") as envs:
        env = TolokaforgeEnvironment(envs, asyncio.get_running_loop(), task_id=TASK)
        first = await asyncio.to_thread(env.reset)
        move = _golden_moves(envs, first.tools)[0]
        stepped: ChatObservation = await asyncio.to_thread(env.step, ChatAction(message=move))
        assert stepped.messages[0]["role"] == "tool" and not stepped.done
        assert env.state.step_count == 1 and env.state.task_id == TASK
        # Closed mid-episode, as OpenEnv closes a dropped session (from a worker thread).
        await asyncio.to_thread(env.close)
    summary = yaml.safe_load((tmp_path / "run" / "summary.yaml").read_text())
    assert summary["ran"] == 1 and summary["passed"] == 0


async def test_without_the_token_no_route_and_no_session_opens(retail: Path, tmp_path: Path) -> None:
    async with (
        Environments.open(retail, output=tmp_path / "run") as envs,
        serve(envs) as served,
        httpx.AsyncClient(base_url=served.url) as http,
    ):
        wrong = {"Authorization": bearer(new_token())}
        answers = [
            await http.get("/health"),
            await http.post("/reset", json={"task_id": TASK}),
            await http.post("/reset", json={"task_id": TASK}, headers=wrong),
            await http.get("/schema", headers={"Authorization": f"Basic {served.token}"}),
        ]
        ws_url = served.url.replace("http://", "ws://") + "/ws"
        refused: list[InvalidStatus] = []
        for headers in ({}, wrong):
            with pytest.raises(InvalidStatus) as handshake:
                async with ws_connect(ws_url, additional_headers=headers, proxy=None):
                    pass
            refused.append(handshake.value)
        client = TolokaforgeClient(served.url, token=new_token())
        with pytest.raises(ConnectionError) as connecting:
            await client.reset(task_id=TASK)
        await client.close()
        # The right token still opens the same route.
        opened = await http.get("/health", headers=served.headers)
    assert [answer.status_code for answer in answers] == [401, 401, 401, 401]
    assert all(answer.headers["www-authenticate"].startswith("Bearer") for answer in answers)
    assert "needs its token" in answers[0].json()["detail"]
    assert "not this server's" in answers[2].json()["detail"]
    # Refused before the upgrade is accepted (closed with 1008, which uvicorn answers 403).
    assert [error.response.status_code for error in refused] == [403, 403]
    cause = connecting.value.__cause__
    assert isinstance(cause, InvalidStatus) and cause.response.status_code == 403
    assert "not this server's" in str(connecting.value)
    assert opened.status_code == 200
    # No refused request reached the environments: no trial was started.
    assert not list((tmp_path / "run").glob("trials/*/*"))


async def test_a_public_bind_without_tls_refuses_to_start_naming_the_options(retail: Path) -> None:
    async with Environments.open(retail) as envs:
        with pytest.raises(CredentialError) as refused:
            async with serve(envs, host="0.0.0.0"):
                pass
    assert "0.0.0.0" in str(refused.value) and "tls_cert= and tls_key=" in str(refused.value)


def test_the_client_never_sends_the_token_off_the_machine_in_clear() -> None:
    with pytest.raises(CredentialError) as refused:
        TolokaforgeClient("http://192.0.2.7:8000", token=new_token())
    assert "192.0.2.7" in str(refused.value) and "https://" in str(refused.value)


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"),
            *("-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1"),
            *("-subj", "/CN=tolokaforge-test", "-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


async def test_a_public_bind_with_tls_serves_sessions_over_wss_with_the_token(
    retail: Path, tmp_path: Path
) -> None:
    cert, key = _self_signed(tmp_path)
    trust = ssl.create_default_context(cafile=str(cert))
    async with (
        Environments.open(retail) as envs,
        serve(envs, host="0.0.0.0", tls_cert=cert, tls_key=key) as served,
    ):
        assert served.url.startswith("https://0.0.0.0:")
        url = served.url.replace("0.0.0.0", "127.0.0.1")
        client = TolokaforgeClient(url, token=served.token, tls=trust)
        try:
            first = await client.reset(task_id=TASK, seed=1)
        finally:
            await client.close()
        async with httpx.AsyncClient(base_url=url, verify=trust) as http:
            anonymous = await http.get("/health")  # TLS alone opens nothing
    assert [m["role"] for m in first.observation.messages] == ["system", "user"]
    assert anonymous.status_code == 401
