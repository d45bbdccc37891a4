"""Only the run that owns a trial can touch it: the control plane tried as a hostile local user would.

Each hop against real servers on loopback: the runner's gRPC port (every RPC, without a token and
with a wrong one), the DB service (every operation of its contract), its body cap and per-trial
quota, squatting a trial id, a public bind without TLS (and with it), a token file others can read,
a host holding a wrong token, and an unsandboxed MCP server's capability URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import subprocess
import sys
import urllib.parse
from collections.abc import AsyncIterator, Generator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from grpclib.client import Channel
from grpclib.const import Status
from grpclib.exceptions import GRPCError, StreamTerminatedError

from tolokaforge.contracts.db_api import openapi_document
from tolokaforge.contracts.runner import HealthCheckRequest, RunnerServiceStub
from tolokaforge.core.credentials import authorize_channel, client_tls, new_token, write_token_file
from tolokaforge.db import (
    ConflictError,
    HttpStateClient,
    LocalStateClient,
    MemoryStore,
    PayloadTooLargeError,
    Settings,
    create_app,
    serve_app,
)
from tolokaforge.runner import RunnerHandle, RunnerSettings, start_runner

from .test_server_escapes import MCP_ATTACK, call, register

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
async def served_runner(tmp_path: Path) -> AsyncIterator[RunnerHandle]:
    handle = await start_runner(RunnerSettings(work_dir=tmp_path, isolation="process"))
    try:
        yield handle
    finally:
        await handle.close()


def _rpc_paths(handle: RunnerHandle) -> dict[str, Any]:
    return dict(handle.servicer.__mapping__())


@pytest.mark.parametrize("presented", [None, "not-the-token", ""])
async def test_every_rpc_without_the_runners_token_is_unauthenticated(
    served_runner: RunnerHandle, presented: str | None
) -> None:
    mapping = _rpc_paths(served_runner)
    assert len(mapping) >= 7  # register, execute, grade, cleanup, reset, state, health at least
    channel = Channel(served_runner.host, served_runner.port)
    metadata = None if presented is None else {"authorization": f"Bearer {presented}"}
    try:
        for path, handler in mapping.items():
            _func, cardinality, request_type, reply_type = handler
            with pytest.raises(GRPCError) as refused:
                async with channel.request(
                    path, cardinality, request_type, reply_type, metadata=metadata, timeout=10
                ) as stream:
                    await stream.send_message(request_type(), end=True)
                    await stream.recv_message()
            assert refused.value.status == Status.UNAUTHENTICATED, (path, refused.value)
    finally:
        channel.close()
    # and the runner's own token opens every door
    channel = served_runner.channel()
    try:
        health = await RunnerServiceStub(channel).health_check(HealthCheckRequest())
        assert health.version
    finally:
        channel.close()


def _operations() -> list[tuple[str, str]]:
    document = yaml.safe_load(openapi_document().read_text())
    names = {"trial_id": "t:0", "table_name": "orders", "snapshot_name": "snap", "owner": "runner-x"}
    found: list[tuple[str, str]] = []
    for template, item in document["paths"].items():
        path = template
        for name, value in names.items():
            path = path.replace("{" + name + "}", urllib.parse.quote(value, safe=""))
        found += [(method.upper(), path) for method in item if method in ("get", "post", "patch", "delete")]
    return found


@pytest.fixture
async def db_service() -> AsyncIterator[tuple[str, str]]:
    token = new_token()
    async with serve_app(create_app(Settings(token=token), store=MemoryStore())) as url:
        yield url, token


@pytest.mark.parametrize("presented", [None, "Bearer not-the-token", "Basic dXNlcjpwYXNz", "Bearer "])
async def test_every_db_operation_without_the_services_token_is_401(
    db_service: tuple[str, str], presented: str | None
) -> None:
    url, _token = db_service
    operations = _operations()
    assert len(operations) >= 12
    headers = {} if presented is None else {"Authorization": presented}
    async with aiohttp.ClientSession() as session:
        for method, path in operations:
            async with session.request(method, url + path, headers=headers, data=b"{}") as answer:
                body = await answer.json()
                assert answer.status == 401, (method, path, answer.status, body)
                assert body["error"] == "unauthorized"
                assert answer.headers["WWW-Authenticate"].startswith("Bearer")
        async with session.get(url + "/openapi.yaml") as answer:  # the contract itself stays public
            assert answer.status == 200


async def test_bodies_are_capped_and_a_trial_has_a_quota() -> None:
    token = new_token()
    settings = Settings(token=token, max_body_bytes=1 << 20, max_trial_bytes=3 << 20)
    async with serve_app(create_app(settings, store=MemoryStore())) as url:
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        async with aiohttp.ClientSession(headers=headers) as session:
            big = json.dumps({"tables": {"t": [{"pad": "x" * (2 << 20)}]}}).encode()
            async with session.post(url + "/trials/big:0/init", data=io.BytesIO(big)) as answer:
                body = await answer.json()
                assert answer.status == 413 and str(1 << 20) in body["message"], body
            # a trial may grow only so far, patch after patch
            async with session.post(url + "/trials/q:0/init", data=b'{"tables": {"t": []}}') as answer:
                assert answer.status == 201
            statuses: list[int] = []
            for index in range(5):
                record = {"id": str(index), "pad": "y" * (900 << 10)}
                patch = {"operations": [{"op": "insert", "record": record}]}
                sent = io.BytesIO(json.dumps(patch).encode())
                async with session.patch(url + "/trials/q:0/state/t", data=sent) as answer:
                    statuses.append(answer.status)
                    if answer.status == 413:
                        body = await answer.json()
                        assert str(3 << 20) in body["message"] and "quota" in body["message"], body
            assert statuses[:3] == [200, 200, 200] and statuses[3:] == [413, 413], statuses
        # nothing of a refused patch landed
        async with (
            aiohttp.ClientSession(headers=headers) as session,
            session.get(url + "/trials/q:0/state") as answer,
        ):
            assert len((await answer.json())["tables"]["t"]) == 3


async def test_the_in_process_store_keeps_the_same_quota() -> None:
    """The embedded runner's store (no HTTP in between) counts a trial's changes against the same quota."""
    store = MemoryStore()
    client = await LocalStateClient.open(store)
    client.service.max_trial_bytes = 2 << 20
    try:
        await client.init_trial("q:0", {"t": []})
        record = {"id": "r", "pad": "z" * (900 << 10)}
        change = [{"table_name": "t", "operations": [{"op": "insert", "record": record}]}]
        await client.patch("q:0", change)
        await client.patch("q:0", change, parsed_json=True)
        with pytest.raises(PayloadTooLargeError, match="quota"):
            await client.patch("q:0", change, parsed_json=True)
        assert (await client.get_hashes("q:0")).version == 2
        await client.delete_trial("q:0")  # a new trial under the id starts a fresh count
        await client.init_trial("q:0", {"t": []})
        await client.patch("q:0", change)
    finally:
        await client.aclose()


async def test_one_quota_whichever_door_the_changes_come_through() -> None:
    """The embedded store served to the gateway is the same Service: one count per trial."""
    client = await LocalStateClient.open(MemoryStore())
    client.service.max_trial_bytes = 2 << 20
    token = new_token()
    record = {"id": "r", "pad": "z" * (900 << 10)}
    change = [{"table_name": "t", "operations": [{"op": "insert", "record": record}]}]
    try:
        await client.init_trial("q:0", {"t": []})
        async with client.serve_http(token=token) as url:
            remote = HttpStateClient(url, token=token)
            try:
                await client.patch("q:0", change)
                await remote.patch("q:0", change)
                with pytest.raises(PayloadTooLargeError, match="quota"):
                    await remote.patch("q:0", change)
            finally:
                await remote.aclose()
    finally:
        await client.aclose()


class _SlowStore(MemoryStore):
    """A store whose patch awaits, as a durable store's does."""

    async def patch(self, trial_id: str, changes: Any, expected_version: int | None) -> tuple[int, int]:
        await asyncio.sleep(0.02)
        return await super().patch(trial_id, changes, expected_version)


async def test_concurrent_patches_cannot_pass_the_quota_together() -> None:
    client = await LocalStateClient.open(_SlowStore())
    client.service.max_trial_bytes = 3 << 20
    record = {"id": "r", "pad": "z" * (900 << 10)}
    change = [{"table_name": "t", "operations": [{"op": "insert", "record": record}]}]
    try:
        await client.init_trial("q:0", {"t": []})
        results = await asyncio.gather(
            *(client.patch("q:0", change) for _ in range(10)), return_exceptions=True
        )
        refused = [r for r in results if isinstance(r, PayloadTooLargeError)]
        assert len(refused) == 7, results
        assert len((await client.get_state("q:0")).tables["t"]) == 3
    finally:
        await client.aclose()


async def test_init_of_a_trial_another_run_holds_is_refused(db_service: tuple[str, str]) -> None:
    url, token = db_service
    owner = HttpStateClient(url, token=token)
    squatter = HttpStateClient(url, token=token)
    try:
        await owner.init_trial("held:0", {"t": [{"v": 1}]}, owner="runner-a", lease_seconds=60)
        with pytest.raises(ConflictError):
            await squatter.init_trial("held:0", {"t": [{"v": 2}]}, owner="runner-b", lease_seconds=60)
        with pytest.raises(ConflictError):
            await squatter.delete_trial("held:0", owner="runner-b")
        assert (await owner.get_state("held:0")).tables == {"t": [{"v": 1}]}
    finally:
        await owner.aclose()
        await squatter.aclose()
    intruder = HttpStateClient(url, token=None)  # a local user without the token cannot even try
    try:
        with pytest.raises(Exception, match="token"):
            await intruder.init_trial("fresh:0", {"t": []})
    finally:
        await intruder.aclose()


def _service(module: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=60, env=env
    )


@pytest.mark.parametrize("module", ["tolokaforge.runner.edge.cli", "tolokaforge.db.cli"])
def test_a_public_bind_without_tls_refuses_to_start_naming_the_flag(module: str, tmp_path: Path) -> None:
    env = {**os.environ, "TOLOKAFORGE_TOKEN_DIR": str(tmp_path)}
    done = _service(module, "--host", "0.0.0.0", "--port", "0", env=env)
    assert done.returncode == 2, done
    assert "--tls-cert" in done.stderr and "0.0.0.0" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.mark.parametrize("module", ["tolokaforge.runner.edge.cli", "tolokaforge.db.cli"])
def test_a_token_file_others_can_read_is_refused(module: str, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(new_token())
    token_file.chmod(0o644)
    env = {**os.environ, "TOLOKAFORGE_TOKEN_DIR": str(tmp_path)}
    done = _service(module, "--port", "0", "--token-file", str(token_file), env=env)
    assert done.returncode == 2, done
    assert "chmod 600" in done.stderr, done.stderr


@contextlib.contextmanager
def _serving(module: str, *args: str, env: dict[str, str]) -> Generator[tuple[str, Path]]:
    """A service process (``python -m module --port 0 ARGS``), its address and token file from the two
    lines it prints; terminated on exit."""
    process = subprocess.Popen(
        [sys.executable, "-m", module, "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        address = process.stdout.readline().rsplit(" ", 1)[1].strip()
        token_file = Path(process.stdout.readline().rsplit(" ", 1)[1].strip())
        yield address, token_file
    finally:
        process.terminate()
        process.wait(30)
        if process.stdout is not None:
            process.stdout.close()


async def test_a_second_db_service_on_a_busy_port_leaves_the_live_token_alone(tmp_path: Path) -> None:
    env = {**os.environ, "TOLOKAFORGE_TOKEN_DIR": str(tmp_path)}
    with _serving("tolokaforge.db.cli", env=env) as (address, token_file):
        port = address.rsplit(":", 1)[1]
        assert token_file == tmp_path / f"db-{port}.token"
        token = token_file.read_text().strip()
        second = _service("tolokaforge.db.cli", "--port", port, env=env)
        assert second.returncode == 2 and "cannot start" in second.stderr, second
        assert token_file.read_text().strip() == token
        client = HttpStateClient(f"http://{address}", token=token)
        try:
            for _ in range(100):  # bound at once, serving a moment later
                try:
                    assert (await client.health()).status == "healthy"
                    break
                except Exception:
                    await asyncio.sleep(0.05)
            else:
                raise AssertionError("the first service never answered")
        finally:
            await client.aclose()


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"),
            *(
                "-nodes",
                "-keyout",
                str(key),
                "-out",
                str(cert),
                "-days",
                "1",
                "-subj",
                "/CN=tolokaforge-test",
            ),
            *("-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


async def test_a_public_bind_with_tls_serves_only_tls_and_the_token(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    settings = RunnerSettings(
        work_dir=tmp_path, isolation="process", host="0.0.0.0", tls_cert=cert, tls_key=key
    )
    handle = await start_runner(settings)
    try:
        channel = Channel("127.0.0.1", handle.port, ssl=client_tls(cert))
        authorize_channel(channel, handle.token)
        try:
            assert (await RunnerServiceStub(channel).health_check(HealthCheckRequest(), timeout=10)).version
        finally:
            channel.close()
        anonymous = Channel("127.0.0.1", handle.port, ssl=client_tls(cert))  # TLS alone opens nothing
        try:
            with pytest.raises(GRPCError) as refused:
                await RunnerServiceStub(anonymous).health_check(HealthCheckRequest(), timeout=10)
            assert refused.value.status == Status.UNAUTHENTICATED
        finally:
            anonymous.close()
        plain = Channel("127.0.0.1", handle.port)  # the token without TLS: nothing is answered
        authorize_channel(plain, handle.token)
        try:
            with pytest.raises((GRPCError, StreamTerminatedError, OSError, TimeoutError)):
                await RunnerServiceStub(plain).health_check(HealthCheckRequest(), timeout=5)
        finally:
            plain.close()
    finally:
        await handle.close()


def test_clients_never_send_a_token_off_the_machine_in_clear(tmp_path: Path) -> None:
    """A host pointed at a remote runner without --runner-ca, a runner at a remote http:// DB service:
    both stop before connecting (192.0.2.0/24 is TEST-NET: nothing answers there anyway)."""
    token_file = tmp_path / "t.token"
    write_token_file(token_file, new_token())
    env = {**os.environ, "TOLOKAFORGE_TOKEN_DIR": str(tmp_path)}
    host = subprocess.run(
        [
            sys.executable,
            "-c",
            "from tolokaforge.host.cli import main; main()",
            "run",
            "--pack",
            str(REPO / "examples/packs/retail"),
            "--runner",
            "192.0.2.2:50999",
            "--runner-token-file",
            str(token_file),
            "--output",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert host.returncode == 2, (host.stdout[-1500:], host.stderr[-1500:])
    assert "--runner-ca" in host.stdout + host.stderr and "in clear" in host.stdout + host.stderr
    runner = _service(
        "tolokaforge.runner.edge.cli",
        *("--port", "0", "--db-url", "http://192.0.2.2:8765", "--db-token-file", str(token_file)),
        env=env,
    )
    assert runner.returncode == 2, runner
    assert "https://" in runner.stderr and "in clear" in runner.stderr, runner.stderr


def test_a_host_with_a_wrong_runner_token_stops_with_a_setup_error(tmp_path: Path) -> None:
    """``tolokaforge run --runner`` against a runner process, with the wrong token: exit 2, one line."""
    env = {
        **os.environ,
        "TOLOKAFORGE_TOKEN_DIR": str(tmp_path / "tokens"),
        "TOLOKAFORGE_RUN_KEY_DIR": str(tmp_path / "run-keys"),
    }
    with _serving("tolokaforge.runner.edge.cli", "--isolation", "process", env=env) as (address, token_file):
        assert token_file.parent == tmp_path / "tokens"
        wrong = tmp_path / "wrong.token"
        write_token_file(wrong, new_token())
        command = [
            sys.executable,
            "-c",
            "from tolokaforge.host.cli import main; main()",
            "run",
            "--pack",
            str(REPO / "examples/packs/retail"),
        ]
        command += [
            "--agent",
            "golden",
            "--runner",
            address,
            "--output",
            str(tmp_path / "out"),
            "--trials",
            "1",
        ]
        done = subprocess.run(
            [*command, "--runner-token-file", str(wrong)],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert done.returncode == 2, (done.stdout[-2000:], done.stderr[-2000:])
        assert "--runner-token-file" in done.stdout + done.stderr
        # the token the runner wrote for its port is found without a flag
        found = subprocess.run(
            [*command, "--task", "lookup_order_tracking"],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        assert found.returncode == 0, (found.stdout[-2000:], found.stderr[-2000:])


async def test_an_unsandboxed_servers_capability_url_opens_its_own_trial_alone(tmp_path: Path) -> None:
    handle = await start_runner(RunnerSettings(work_dir=tmp_path, isolation="process"), serve=False)
    try:
        await register(handle, "victim:0", MCP_ATTACK)
        await register(handle, "thief:0", MCP_ATTACK)
        victim = urllib.parse.quote("victim:0", safe="")
        own = urllib.parse.quote("thief:0", safe="")
        seen = await call(
            handle,
            "thief:0",
            "attack",
            {
                "code": f"""
import os, urllib.request, urllib.parse
base = os.environ['TOLOKAFORGE_DB_URL']
parts = urllib.parse.urlsplit(base)
root = f'{{parts.scheme}}://{{parts.netloc}}'
def status(url, method='GET', body=None):
    request = urllib.request.Request(url, method=method, data=body, headers={{'Content-Type': 'application/json'}})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read().decode()[:200]
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()[:200]
result = {{
    'base': base,
    'own': status(base + '/trials/{own}/state'),
    'victim': status(base + '/trials/{victim}/state'),
    'victim_delete': status(base + '/trials/{victim}', 'DELETE'),
    'own_delete': status(base + '/trials/{own}', 'DELETE'),
    'own_init': status(base + '/trials/{own}/init', 'POST', b'{{"tables": {{}}, "owner": "squatter", "lease_seconds": 86400}}'),
    'own_lease': status(base + '/owners/squatter/lease', 'POST'),
    'own_reset': status(base + '/trials/{own}/reset', 'POST'),
    'no_key': status(root + '/trials/{victim}/state'),
    'forged_key': status(root + '/trial-key/forged/trials/{victim}/state'),
    'env': {{k: v for k, v in os.environ.items() if k.startswith('TOLOKAFORGE')}},
}}
"""
            },
        )
        assert seen["own"][0] == 200 and "thief:0-secret" in seen["own"][1], seen
        for key in ("victim", "victim_delete", "no_key", "forged_key", "own_delete", "own_init", "own_lease"):
            assert seen[key][0] == 403, (key, seen[key])
        assert seen["own_reset"][0] == 200, seen["own_reset"]  # a data operation on its own trial
        door = await handle.servicer.runner.registry.gateway._state_door()  # pyright: ignore[reportPrivateUsage]
        assert door.token is not None and door.token not in json.dumps(seen)  # the admin token never leaves
        assert seen["env"]["TOLOKAFORGE_DB_URL"] == seen["base"] and "/trial-key/" in seen["base"]
        await handle.servicer.runner.registry.cleanup("thief:0")  # the key dies with its trial
        async with (
            aiohttp.ClientSession() as session,
            session.get(seen["base"] + f"/trials/{own}/state") as answer,
        ):
            assert answer.status == 403
    finally:
        await handle.close()


async def test_a_trials_socket_answers_its_own_processes_alone(tmp_path: Path) -> None:
    """A process outside the trial's cgroup (here: this test, root) that reaches the socket gets 403;
    the trial's own sandboxed server, through its relay, is served."""
    handle = await start_runner(RunnerSettings(work_dir=tmp_path, isolation="sandbox"), serve=False)
    try:
        await register(handle, "own:0", MCP_ATTACK)
        door = handle.servicer.runner.registry.gateway._doors["own:0"]  # pyright: ignore[reportPrivateUsage]
        assert door.path is not None and door.cgroup is not None
        connector = aiohttp.UnixConnector(path=str(door.path))
        async with (
            aiohttp.ClientSession(connector=connector) as session,
            session.get("http://gateway/trials/own%3A0/state") as answer,
        ):
            assert answer.status == 403, await answer.text()
        seen = await call(
            handle,
            "own:0",
            "attack",
            {
                "code": """
import os, urllib.request
with urllib.request.urlopen(os.environ['TOLOKAFORGE_DB_URL'] + '/trials/own%3A0/state', timeout=10) as answer:
    result = answer.status
"""
            },
        )
        assert seen == 200
    finally:
        await handle.close()
