"""Every escape the confinement issue lists, tried by a hostile tool in a real sandboxed runner.

Each attempt must be contained: the attempt fails for the tool (an exception it sees, or nothing to
find), the runner goes on, and other trials are unaffected. The tool runs the python a test sends it
(attack_pack/tools.py), as any pack's code could.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tolokaforge.contracts.runner import (
    CleanupTrialRequest,
    ExecuteToolRequest,
    ExecutionStatus,
    HealthCheckRequest,
    RegisterTrialRequest,
)
from tolokaforge.core.protocol import ENGINE_PROTOCOL_VERSION
from tolokaforge.runner import RunnerHandle, RunnerSettings, start_runner
from tolokaforge.runner.process.sandbox import Limits

PACK = Path(__file__).parent / "attack_pack"
SECRET = "tf-secret-api-key-0123456789"

ATTACK_TOOL: dict[str, Any] = {
    "name": "attack",
    "description": "runs the attempt it is given",
    "parameters": {
        "type": "object",
        "properties": {"code": {"type": "string"}},
        "required": ["code"],
        "additionalProperties": False,
    },
    "source": {"module_path": "tools", "class_name": "Attack"},
    "timeout_s": 20.0,
}


@pytest.fixture
async def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[RunnerHandle]:
    # The secret lives where API keys live: in the runner's own environment.
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    work = tmp_path / "work"
    work.mkdir()
    handle = await start_runner(
        RunnerSettings(
            work_dir=work, isolation="sandbox", limits=Limits(processes=64, memory_bytes=512 << 20)
        ),
        serve=False,
    )
    try:
        yield handle
    finally:
        await handle.close()


class Hostile:
    def __init__(self, runner: RunnerHandle) -> None:
        self.stub = runner.servicer
        self.runner = runner
        self.calls = 0

    async def register(self, trial_id: str) -> None:
        spec: dict[str, Any] = {
            "trial_id": trial_id,
            "task": {
                "task_id": trial_id.split(":")[0],
                "agent_tools": [ATTACK_TOOL],
                "user_tools": [],
                "tool_code": {"path": str(PACK)},
                "initial_state": {"tables": {"notes": []}},
            },
        }
        reply = await self.stub.register_trial(
            RegisterTrialRequest(
                trial_id=trial_id,
                trial_spec_json=json.dumps(spec),
                engine_protocol_version=ENGINE_PROTOCOL_VERSION,
            )
        )
        assert reply.success, reply.error

    async def run(self, trial_id: str, code: str) -> Any:
        """The attempt's result; the call itself must succeed (the tool saw what it could reach)."""
        self.calls += 1
        reply = await self.stub.execute_tool(
            ExecuteToolRequest(
                trial_id=trial_id,
                tool_name="attack",
                arguments_json=json.dumps({"code": code}),
                executor="agent",
                call_id=f"c{self.calls}",
            )
        )
        assert reply.status == ExecutionStatus.SUCCESS, reply
        return json.loads(reply.output)

    def workspace(self, trial_id: str) -> Path:
        return self.runner.servicer.runner.registry.get(trial_id).files.workspace or Path("/nonexistent")


@pytest.fixture
async def hostile(runner: RunnerHandle) -> Hostile:
    return Hostile(runner)


def attempt(body: str) -> str:
    """``body`` sets ``result``; any exception it raises becomes the result (the attempt failed)."""
    indented = "\n".join("    " + line for line in body.strip().splitlines())
    return f"try:\n{indented}\nexcept BaseException as error:\n    result = 'refused: ' + type(error).__name__ + ': ' + str(error)\n"


async def test_the_runner_reports_every_layer_on(runner: RunnerHandle) -> None:
    health = await runner.servicer.health_check(HealthCheckRequest())
    adapters = set(health.available_adapters)
    assert "isolation:sandbox" in adapters
    assert any(a.startswith("sandbox:bubblewrap=ok") for a in adapters), adapters
    assert "sandbox:seccomp=on" in adapters
    assert any(a.startswith("sandbox:landlock=abi") for a in adapters), adapters
    assert any(a.startswith("sandbox:cgroup=v") for a in adapters), adapters


async def test_a_tool_runs_unprivileged_without_the_runners_environment(hostile: Hostile) -> None:
    await hostile.register("env:0")
    seen = await hostile.run(
        "env:0",
        attempt(
            """
import os, glob
found = []
for path in glob.glob('/proc/*/environ'):
    try:
        found.append(open(path, 'rb').read().decode('latin-1'))
    except OSError:
        pass
result = {'uid': os.getuid(), 'euid': os.geteuid(), 'env': dict(os.environ), 'environs': found}
"""
        ),
    )
    assert seen["uid"] != 0 and seen["euid"] != 0
    assert SECRET not in json.dumps(seen)
    assert "OPENAI_API_KEY" not in seen["env"]


async def test_the_runner_process_is_out_of_sight_and_out_of_reach(hostile: Hostile) -> None:
    await hostile.register("kill:0")
    runner_pid = os.getpid()
    seen = await hostile.run(
        "kill:0",
        attempt(
            f"""
import os, signal
pids = [int(p) for p in os.listdir('/proc') if p.isdigit()]
outcome = []
for pid in ({runner_pid}, 1, os.getppid()):
    try:
        os.kill(pid, signal.SIGKILL if pid == {runner_pid} else 0)
        outcome.append('sent')
    except OSError as error:
        outcome.append(type(error).__name__)
result = {{'pids': pids, 'kill': outcome}}
"""
        ),
    )
    assert seen["kill"][0] in ("ProcessLookupError", "PermissionError")
    assert runner_pid not in seen["pids"] or seen["kill"][0] != "sent"
    assert psutil.pid_exists(runner_pid)  # and we are still here to check


async def test_no_file_outside_the_sandbox_is_readable_or_writable(hostile: Hostile, tmp_path: Path) -> None:
    results = tmp_path / "runs"
    results.mkdir()
    (results / "grade.yaml").write_text("passed: false\n")
    await hostile.register("fs:0")
    site = next(p for p in sys.path if p.endswith("site-packages"))
    seen = await hostile.run(
        "fs:0",
        attempt(
            f"""
import os
outcome = {{}}
for path in ('/etc/shadow', '/root/.bash_history', {str(results / "grade.yaml")!r}, '/var/run/postgresql'):
    try:
        outcome[path] = open(path).read()[:40]
    except OSError as error:
        outcome[path] = type(error).__name__
for path in ({site + "/evil.pth"!r}, {str(results / "grade.yaml")!r}, '/usr/lib/evil'):
    try:
        with open(path, 'w') as out:
            out.write('import os; os.system("id")')
        outcome['wrote ' + path] = 'yes'
    except OSError as error:
        outcome['wrote ' + path] = type(error).__name__
result = outcome
"""
        ),
    )
    for key, value in seen.items():
        assert value in ("FileNotFoundError", "PermissionError", "OSError", "IsADirectoryError"), (key, value)
    assert not Path(site, "evil.pth").exists()
    assert (results / "grade.yaml").read_text() == "passed: false\n"


async def test_no_network_and_no_way_into_another_namespace(hostile: Hostile) -> None:
    await hostile.register("net:0")
    seen = await hostile.run(
        "net:0",
        attempt(
            """
import ctypes, os, socket
libc = ctypes.CDLL(None, use_errno=True)
outcome = {}
try:
    socket.create_connection(('127.0.0.1', 5432), timeout=2)
    outcome['postgres'] = 'connected'
except OSError as error:
    outcome['postgres'] = type(error).__name__
try:
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.connect('/var/run/postgresql/.s.PGSQL.5432')
    outcome['postgres_socket'] = 'connected'
except OSError as error:
    outcome['postgres_socket'] = type(error).__name__
try:
    fd = os.open('/proc/1/ns/net', os.O_RDONLY)
except OSError:
    fd = os.open('/proc/self/ns/net', os.O_RDONLY)
outcome['setns'] = libc.setns(fd, 0), ctypes.get_errno()
outcome['unshare'] = libc.unshare(0x40000000), ctypes.get_errno()
outcome['ptrace'] = libc.ptrace(16, 1, 0, 0), ctypes.get_errno()  # PTRACE_ATTACH to the sandbox's init
outcome['mount'] = libc.mount(b'none', b'/tmp', b'tmpfs', 0, None), ctypes.get_errno()
result = outcome
"""
        ),
    )
    assert seen["postgres"] != "connected" and seen["postgres_socket"] != "connected"
    for call in ("setns", "unshare", "ptrace", "mount"):
        assert seen[call][0] == -1, (call, seen[call])


async def test_one_trial_cannot_reach_another_trials_files_memory_or_processes(hostile: Hostile) -> None:
    await hostile.register("victim:0")
    await hostile.register("thief:0")
    await hostile.run(
        "victim:0", "open('diary.txt', 'w').write('victim-secret'); import os; result = os.getpid()"
    )
    victim_dir = hostile.workspace("victim:0")
    seen = await hostile.run(
        "thief:0",
        attempt(
            f"""
import os, signal
outcome = {{}}
try:
    outcome['file'] = open({str(victim_dir / "diary.txt")!r}).read()
except OSError as error:
    outcome['file'] = type(error).__name__
try:
    outcome['listing'] = os.listdir({str(victim_dir.parent)!r})
except OSError as error:
    outcome['listing'] = type(error).__name__
leaked = []
for pid in (p for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()):
    for what in ('environ', 'mem', 'maps'):
        try:
            with open(f'/proc/{{pid}}/{{what}}', 'rb') as handle:
                leaked.append(handle.read(64))
        except OSError:
            pass
    try:
        os.kill(int(pid), signal.SIGKILL)
        leaked.append(f'killed {{pid}}')
    except OSError:
        pass
outcome['leaked'] = leaked
result = outcome
"""
        ),
    )
    assert seen["file"] in ("PermissionError", "FileNotFoundError")
    assert not isinstance(seen["listing"], list) or "victim-secret" not in json.dumps(seen)
    assert seen["leaked"] == []
    # The victim's worker is alive and its state intact.
    assert await hostile.run("victim:0", "result = open('diary.txt').read()") == "victim-secret"


async def test_a_daemon_a_tool_double_forked_dies_with_its_trial(
    hostile: Hostile, runner: RunnerHandle
) -> None:
    await hostile.register("daemon:0")
    marker = f"tf-daemon-{os.getpid()}-{time.monotonic_ns()}"
    await hostile.run(
        "daemon:0",
        f"""
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv('/bin/sh', ['/bin/sh', '-c', 'sleep 300; : {marker}'])
    os._exit(0)
time.sleep(0.2)
result = 'spawned'
""",
    )

    def daemons() -> list[psutil.Process]:
        found: list[psutil.Process] = []
        for proc in psutil.process_iter(["cmdline"]):
            cmdline: list[str] = proc.info["cmdline"] or []
            if any(marker in part for part in cmdline):
                found.append(proc)
        return found

    assert daemons(), "the daemon should be running while its trial lives"
    await runner.servicer.cleanup_trial(CleanupTrialRequest(trial_id="daemon:0"))
    for _ in range(100):
        if not daemons():
            break
        time.sleep(0.02)
    assert daemons() == []


async def test_a_fork_bomb_is_bounded_per_trial_and_the_next_trial_runs(hostile: Hostile) -> None:
    await hostile.register("bomb:0")
    seen = await hostile.run(
        "bomb:0",
        attempt(
            """
import os, time
children = 0
failed = None
for _ in range(500):
    try:
        pid = os.fork()
    except OSError as error:
        failed = type(error).__name__
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    children += 1
result = {'children': children, 'failed': failed}
"""
        ),
    )
    assert seen["children"] < 64 and seen["failed"] == "BlockingIOError", seen
    await hostile.register("after:0")
    assert await hostile.run("after:0", "result = 'alive'") == "alive"


async def test_memory_is_limited_per_trial_not_per_process(hostile: Hostile) -> None:
    # Four children of 200 MiB each under a trial limit of 512 MiB: they cannot all hold it.
    await hostile.register("memory:0")
    seen = await hostile.run(
        "memory:0",
        attempt(
            """
import os, time
pids = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        block = bytearray(200 << 20)
        for index in range(0, len(block), 4096):
            block[index] = 1
        time.sleep(2)
        os._exit(0)
    pids.append(pid)
statuses = [os.waitpid(pid, 0)[1] for pid in pids]
result = {'survived': sum(1 for status in statuses if status == 0), 'statuses': statuses}
"""
        ),
    )
    assert seen["survived"] < 4, seen


async def test_seccomp_refuses_kernel_surface(hostile: Hostile) -> None:
    await hostile.register("seccomp:0")
    seen = await hostile.run(
        "seccomp:0",
        """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
outcome = {}
for name, number, args in (('bpf', 321, (0, 0, 0)), ('keyctl', 250, (0, 0, 0)), ('perf_event_open', 298, (0, 0, 0, 0, 0)), ('process_vm_readv', 310, (1, 0, 0, 0, 0, 0))):
    outcome[name] = (libc.syscall(number, *args), ctypes.get_errno())
result = outcome
""",
    )
    for name, (value, errno) in seen.items():
        assert value == -1 and errno == 1, (name, value, errno)
