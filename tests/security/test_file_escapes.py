"""The file escapes the confinement issue lists, tried through a real sandboxed runner.

The fs provider asked for ``/etc/shadow`` (by name, by ``..``, and with the file system's root as the
call's working directory); a workspace path swapped between a file or folder and a symlink out of
the workspace while the fs provider reads it, a few hundred times; a 1 GiB sparse file, a FIFO and a
link to ``/etc/shadow`` graded by file checks. The hostile side is the trial's own code
(attack_pack/tools.py runs the python a test sends), as any pack's code could be.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tolokaforge.contracts.runner import (
    ExecuteToolRequest,
    ExecuteToolResponse,
    ExecutionStatus,
    GradeTrialRequest,
    RegisterTrialRequest,
    RegisterTrialResponse,
    RegistrationErrorKind,
)
from tolokaforge.contracts.tool import ToolErrorCategory
from tolokaforge.core.protocol import ENGINE_PROTOCOL_VERSION
from tolokaforge.runner import RunnerHandle
from tolokaforge.runner.grading.file_checks import MAX_FILE_BYTES

from . import test_escapes
from .test_escapes import ATTACK_TOOL, PACK
from .test_provider_access import FS, call, started

runner = test_escapes.runner  # the sandboxed runner those escapes run against, API key in its environment

DENIED = ToolErrorCategory.PERMISSION_DENIED
OUTSIDE = "tf-outside-the-workspace-7f3a"
INSIDE = "tf-inside-the-workspace"
FS_SERVER: dict[str, Any] = {
    "name": "fs",
    "protocol": "provider",
    "command": list(FS),
    "prefix": "fs_",
}


async def register(
    runner: RunnerHandle,
    trial_id: str,
    *,
    pack: Path | None = None,
    server: dict[str, Any] | None = None,
    grading: dict[str, Any] | None = None,
) -> RegisterTrialResponse:
    """Register a trial with the fs provider and, given a pack, the attack tool."""
    task: dict[str, Any] = {
        "task_id": trial_id.split(":")[0],
        "agent_tools": [ATTACK_TOOL] if pack is not None else [],
        "user_tools": [],
        "tool_servers": [server if server is not None else FS_SERVER],
    }
    if pack is not None:
        task["tool_code"] = {"path": str(pack)}
    if grading is not None:
        task["grading"] = grading
    return await runner.servicer.register_trial(
        RegisterTrialRequest(
            trial_id=trial_id,
            trial_spec_json=json.dumps({"trial_id": trial_id, "task": task}),
            engine_protocol_version=ENGINE_PROTOCOL_VERSION,
        )
    )


async def tool(
    runner: RunnerHandle, trial_id: str, name: str, arguments: dict[str, Any]
) -> ExecuteToolResponse:
    return await runner.servicer.execute_tool(
        ExecuteToolRequest(
            trial_id=trial_id,
            tool_name=name,
            arguments_json=json.dumps(arguments),
            executor="agent",
            call_id=os.urandom(6).hex(),
        )
    )


async def hostile(runner: RunnerHandle, trial_id: str, code: str) -> Any:
    reply = await tool(runner, trial_id, "attack", {"code": code})
    assert reply.status == ExecutionStatus.SUCCESS, reply
    return json.loads(reply.output)


def shadow_secrets() -> list[str]:
    """The lines of /etc/shadow, where this process can read it (as root): none may reach a reply."""
    try:
        return [line for line in Path("/etc/shadow").read_text().splitlines() if line.strip()]
    except PermissionError:
        return []


def outside_pack(tmp_path: Path) -> Path:
    """The attack pack beside a file of its own: outside every workspace, yet readable in each sandbox."""
    pack = tmp_path / "pack"
    shutil.copytree(PACK, pack)
    (pack / "secret.txt").write_text(OUTSIDE)
    return pack


SHADOW_BY_NAME = [
    "/etc/shadow",
    "../../../../../../etc/shadow",
    "./../../../../../../etc/shadow",
    "/env/fs/agent-visible/../../../../etc/shadow",
    "/work/../etc/shadow",
    "notes/../../../../../../../etc/shadow",
]


async def test_fs_calls_naming_shadow_or_leaving_the_workspace_are_refused(runner: RunnerHandle) -> None:
    registered = await register(runner, "shadow:0")
    assert registered.success, registered.error
    attempts: list[tuple[str, dict[str, Any]]] = []
    for path in SHADOW_BY_NAME:
        attempts += [
            ("fs_read", {"path": path}),
            ("fs_read_file", {"path": path}),
            ("fs_copy_file", {"source": path, "destination": "stolen"}),
            ("fs_append_file", {"path": path, "content": "x"}),
        ]
    for folder in ("..", "../..", "/", "/etc", "/env/fs/agent-visible/..", "/work/.."):
        attempts += [
            ("fs_list", {"path": folder}),
            ("fs_list_dir", {"path": folder}),
            ("fs_grep_workspace", {"path": folder, "pattern": "root"}),
        ]
    leaked = shadow_secrets()
    for name, arguments in attempts:
        reply = await tool(runner, "shadow:0", name, arguments)
        assert reply.status != ExecutionStatus.SUCCESS and reply.output == "", (name, arguments, reply)
        assert reply.tool_error is not None and reply.tool_error.category == DENIED, (name, arguments, reply)
        seen = str(reply)
        assert not any(secret in seen for secret in leaked), (name, arguments)
    workspace = runner.servicer.runner.registry.get("shadow:0").files.workspace
    assert workspace is not None and sorted(workspace.iterdir()) == []


@pytest.mark.parametrize("mount", ["/", "//", "/./", "/usr/..", "/etc/../", "/usr/../usr"])
async def test_a_workspace_mounted_over_the_root_or_the_system_is_refused_by_name(
    runner: RunnerHandle, mount: str
) -> None:
    # A pack chooses where its provider sees the workspace (workspace_mount): that path is the calls'
    # working directory, so the root there would make every host file a workspace file, and a system
    # folder there would hide what the sandbox needs. Each spelling is refused before anything starts.
    server = {**FS_SERVER, "workspace_mount": mount}
    registered = await register(runner, f"mount:{len(mount)}", server=server)
    assert not registered.success, registered
    if mount == "/":
        assert registered.error_kind == RegistrationErrorKind.TOOL_LOAD, registered
        assert "would hide the system" in registered.error, registered.error
    else:
        assert registered.error_kind == RegistrationErrorKind.INVALID_SPEC, registered
        assert "workspace_mount" in registered.error and "plain absolute path" in registered.error


async def test_a_provider_told_the_root_is_its_workspace_refuses_every_call(tmp_path: Path) -> None:
    # The provider as the runner starts it (its token on stdin, a unix socket), outside the sandbox:
    # as root it could open /etc/shadow, so its own refusal is all that stands in the way.
    leaked = shadow_secrets()
    if os.geteuid() == 0:
        assert leaked, "root reads /etc/shadow here: the refusal below is what keeps it"
    async with started(FS, Path("/")) as provider:
        await call(provider, "Configure", provider.bearer)
        for operation, arguments in (
            ("read", {"path": "etc/shadow"}),
            ("read_file", {"path": "/etc/shadow"}),
            ("read", {"path": "/work/etc/shadow"}),
            ("list", {}),
            ("grep_workspace", {"pattern": ".", "path": "etc"}),
            ("copy_file", {"source": "etc/shadow", "destination": str(tmp_path / "stolen")}),
        ):
            events = await call(provider, "Invoke", provider.bearer, operation=operation, arguments=arguments)
            assert events is not None and len(events) == 1, events
            [event] = events
            assert event.result is None and event.error is not None, (operation, event)
            assert event.error.category == DENIED, (operation, event.error)
            assert not any(secret in str(event) for secret in leaked)
    assert not (tmp_path / "stolen").exists()


SWAPPER = """
import json, os, time
# Three names, each a real file or folder of the workspace one moment and a link out of it the next:
# a folder to the pack's folder, a file to the pack's secret, a folder to /etc.
os.makedirs('d', exist_ok=True)
open('d/secret.txt', 'w').write(INSIDE)
open('f', 'w').write(INSIDE)
os.makedirs('e', exist_ok=True)
open('e/passwd', 'w').write(INSIDE)
os.symlink(PACK, 'd.link')
os.symlink(PACK + '/secret.txt', 'f.link')
os.symlink('/etc', 'e.link')
# The links lead somewhere real: a read that followed one would show it.
reach = {'d': open('d.link/secret.txt').read(), 'f': open('f.link').read(), 'e': open('e.link/passwd').read()[:5]}
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        swaps = 0
        give_up = time.monotonic() + 120  # a bound for a test that died before saying stop
        while not os.path.exists('stop') and time.monotonic() < give_up:
            for name in ('d', 'f', 'e'):
                os.rename(name, name + '.real')
                os.rename(name + '.link', name)
                os.rename(name, name + '.link')
                os.rename(name + '.real', name)
            swaps += 1
        open('swaps.tmp', 'w').write(str(swaps))
        os.rename('swaps.tmp', 'swaps')
        os._exit(0)
    os._exit(0)
os.wait()
result = reach
"""

STOP = """
import os, time
open('stop', 'w').close()
for _ in range(2000):
    if os.path.exists('swaps'):
        break
    time.sleep(0.01)
result = int(open('swaps').read())
"""


async def test_a_path_swapped_for_a_link_during_reads_never_leaks_outside_bytes(
    runner: RunnerHandle, tmp_path: Path
) -> None:
    pack = outside_pack(tmp_path)
    registered = await register(runner, "swap:0", pack=pack)
    assert registered.success, registered.error
    code = SWAPPER.replace("INSIDE", repr(INSIDE)).replace("PACK", repr(str(pack)))
    reach = await hostile(runner, "swap:0", code)
    assert reach == {"d": OUTSIDE, "f": OUTSIDE, "e": "root:"}, reach
    reads: list[tuple[str, dict[str, Any]]] = [
        ("fs_read", {"path": "d/secret.txt"}),
        ("fs_read_file", {"path": "f"}),
        ("fs_read", {"path": "/env/fs/agent-visible/e/passwd"}),
        ("fs_list_dir", {"path": "d"}),
        ("fs_grep_workspace", {"path": "e", "pattern": "root"}),
        ("fs_copy_file", {"source": "f", "destination": "copied"}),
    ]
    outcomes: dict[str, int] = {}
    try:
        for index in range(420):
            name, arguments = reads[index % len(reads)]
            reply = await tool(runner, "swap:0", name, arguments)
            text = str(reply)
            assert OUTSIDE not in text and "root:" not in text and "tools.py" not in text, (name, reply)
            if reply.status == ExecutionStatus.SUCCESS:
                outcomes["success"] = outcomes.get("success", 0) + 1
            else:
                assert reply.tool_error is not None, reply
                category = reply.tool_error.category
                assert category in (DENIED, ToolErrorCategory.NOT_FOUND), (name, reply)
                outcomes[category.name] = outcomes.get(category.name, 0) + 1
    finally:
        swaps = await hostile(runner, "swap:0", STOP)
    workspace = runner.servicer.runner.registry.get("swap:0").files.workspace
    assert workspace is not None
    copied = workspace / "copied"
    assert not copied.is_symlink() and (not copied.exists() or copied.read_text() == INSIDE)
    assert swaps > 0 and sum(outcomes.values()) == 420, (swaps, outcomes)
    # The race was on: some reads met a link (or the gap between renames), some the real file.
    assert outcomes.get("success", 0) > 0 and len(outcomes) > 1, (swaps, outcomes)
    assert (pack / "secret.txt").read_text() == OUTSIDE


def peak_rss_reset() -> int:
    """Reset this process's peak resident size to its current one (Linux clear_refs "5"); that size."""
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")
    return peak_rss()


def peak_rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/self/status")


GIB = 1 << 30
HUGE = """
import os
with open('huge.log', 'wb') as handle:
    handle.truncate(GIB)  # sparse: a gigabyte of NULs that costs no disk
os.mkfifo('pipe.log')  # a reader of it blocks until a writer comes; none will
os.symlink('/etc/shadow', 'shadow.log')
open('notes.log', 'w').write('the agent was here')
result = os.stat('huge.log').st_size
"""


async def test_a_sparse_gigabyte_a_fifo_and_a_link_to_shadow_are_graded_in_bounded_memory(
    runner: RunnerHandle, tmp_path: Path
) -> None:
    checks = [
        {"path_glob": "huge.log", "contains": "\0"},
        {"path_glob": "huge.log", "equals": ""},
        {"path_glob": "pipe.log", "contains": "x"},
        {"path_glob": "shadow.log", "exists": True},
        {"path_glob": "*.log", "contains": "root:"},
        {"path_glob": "notes.log", "contains": "agent"},
    ]
    grading = {
        "combine_method": "weighted",
        "weights": {"state_checks": 1.0},
        "pass_threshold": 1.0,
        "state_checks": {"files": checks},
    }
    registered = await register(runner, "sparse:0", pack=outside_pack(tmp_path), grading=grading)
    assert registered.success, registered.error
    assert await hostile(runner, "sparse:0", HUGE.replace("GIB", str(GIB))) == GIB
    before = peak_rss_reset()
    graded = await runner.servicer.grade_trial(
        GradeTrialRequest(trial_id="sparse:0", termination_reason="agent_done")
    )
    grown = peak_rss() - before
    assert graded.success and graded.grade is not None, graded.error
    grade = graded.grade
    # Only notes.log holds: the gigabyte is never judged on a prefix, the FIFO and the link are no files.
    assert grade.components is not None and grade.components.state_checks == pytest.approx(1 / 6), grade
    assert f"'huge.log' is larger than the {MAX_FILE_BYTES}-byte limit of file checks" in grade.reasons
    assert "expected a file matching 'shadow.log'" in grade.reasons, grade.reasons
    assert not any(secret in str(graded) for secret in shadow_secrets())
    assert grown < 64 << 20, f"grading grew the runner by {grown >> 20} MiB"
    # The runner goes on serving the trial.
    assert await hostile(runner, "sparse:0", "result = open('notes.log').read()") == "the agent was here"
