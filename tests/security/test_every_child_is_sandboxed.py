"""Every process that runs code we did not write is in the sandbox, for every task kind that starts one.

One golden trial of each kind runs on the embedded runner at the default isolation (``sandbox``):
python tools (retail, with trace checks), a public-layout pack with custom checks, the rubric judge
(the offline mock model), an MCP server, the fs and exec tool providers (files_family; a terminal task
with its verifier), a τ² domain, a web task (its site's routes in the worker, Chromium) and an RL
environment's episode (packages/env).

The processes are observed, not inferred: a watcher (this file run as a script, as root) listens to
the kernel's process connector for every fork, exec and setuid below the test process, reads each new
image from ``/proc`` at once, and sweeps the live ones every few milliseconds; the runner's own starts
are logged as they pass through subprocess, so a child that exits before it can be read is still
named. Each process must then be either in the sandbox -- a pid namespace other than the runner's,
below a ``bwrap``, as uid 65534 (65533 for the browser) -- or one of the few processes of ours listed
in :data:`OUTSIDE` with the reason. The runner is embedded, so its pid namespace is this process's, and
running a trial may import no module of the pack here.

Loading a pack is checked apart: what the host's loader learns of the pack's code (tool schemas, a
site's routes, whether the checks import) it asks a child in the sandbox; the loader itself imports
no module of the pack. It imports τ²'s domain modules here to read a domain's tasks, deliberately: a
pinned dependency, not pack code; the domain's tools run in the sandboxed workers.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO

import pytest
import yaml

from tolokaforge.core.models import MOCK_JUDGE_MODEL, JudgeModelConfig
from tolokaforge.env import Environments, golden_call
from tolokaforge.host.agents import GoldenAgentFactory
from tolokaforge.host.packs import Pack, inspect_pack, load_pack
from tolokaforge.host.run.schedule import RunSettings, run_pack
from tolokaforge.host.users.router import UserRouter
from tolokaforge.runner.browser.confined import BROWSER_UID
from tolokaforge.runner.process import sandbox
from tolokaforge.runner.process.confinement import SANDBOX_UID

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
HOST_PACKS = ROOT / "packages" / "host" / "tests" / "fixtures" / "packs"
COMPAT_PACKS = ROOT / "tests" / "compat" / "packs"

UIDS = {SANDBOX_UID, BROWSER_UID}
"""Whom sandboxed code runs as under a root runner: tool servers and workers, and the browser."""
ENTRIES = (
    [os.path.realpath(sandbox.__file__)],
    ["-m", "tolokaforge.runner.workers.zygote"],
    ["-m", "tolokaforge.runner.workers.child"],
)
"""What bubblewrap execs inside as root (``python -I ENTRY``): our code, which drops to the sandbox uid
(sandbox.confine) before it runs or imports anything of the pack; the launcher then execs the program."""


def _is_entry(cmdline: list[str]) -> bool:
    return cmdline[1:2] == ["-I"] and any(
        [os.path.realpath(part) if part.endswith(".py") else part for part in cmdline[2 : 2 + len(entry)]]
        == entry
        for entry in ENTRIES
    )


# -- the watcher: ``python THIS_FILE ROOT_PID`` (stdlib only), one JSON line per observation ----------

_NETLINK_CONNECTOR = 11
_CN_IDX_PROC = 1
_PROC_CN_MCAST_LISTEN = 1
_FORK, _EXEC, _UID, _EXIT = 0x1, 0x2, 0x4, 0x80000000
_EVENT = 36
"""Where a proc_event starts in a message: nlmsghdr (16 bytes), then cn_msg (20)."""
_SWEEP_S = 0.005


def _snapshot(pid: int) -> dict[str, Any] | None:
    """What /proc says of ``pid`` now; None once it has gone."""
    base = f"/proc/{pid}"
    try:
        exe = os.readlink(f"{base}/exe")
        while True:  # the same image throughout: an exec between the reads would mix two programs
            with open(f"{base}/cmdline", "rb") as file:
                cmdline = [part.decode("utf-8", "replace") for part in file.read().split(b"\0")[:-1]]
            with open(f"{base}/status") as file:
                status = dict(line.rstrip("\n").split(":\t", 1) for line in file if ":\t" in line)
            pidns = os.readlink(f"{base}/ns/pid")
            exe, before = os.readlink(f"{base}/exe"), exe
            if exe == before:
                break
    except OSError:
        return None
    if not cmdline:
        return None  # exiting: its memory is gone, and with it what it ran
    uids = [int(value) for value in status["Uid"].split()[:2]]
    return {"cmdline": cmdline, "exe": exe, "uids": uids, "pidns": pidns}


def _watch(root: int, out: TextIO) -> None:
    """Follow every process born below ``root`` until SIGTERM."""
    listener = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_CONNECTOR)
    listener.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE: a burst of forks must not overflow
    listener.bind((os.getpid(), _CN_IDX_PROC))
    payload = struct.pack("=I", _PROC_CN_MCAST_LISTEN)
    message = struct.pack("=IIIIHH", _CN_IDX_PROC, 1, 0, 0, len(payload), 0) + payload
    listener.send(struct.pack("=IHHII", 16 + len(message), 3, 0, 0, os.getpid()) + message)
    listener.settimeout(_SWEEP_S)
    serial = 0
    live: dict[int, int] = {root: 0}  # pid -> serial of the process that now has that pid
    last: dict[int, dict[str, Any]] = {}

    def emit(kind: str, number: int, pid: int, parent: int | None) -> None:
        seen = _snapshot(pid)
        if kind == "seen" and (seen is None or last.get(number) == seen):
            return  # nothing new (a process ending is its exit event's business)
        record = {"event": kind, "serial": number, "pid": pid, "parent": parent, "t": time.time()}
        record.update(seen or {"gone": True})
        if seen is not None:
            last[number] = seen
        out.write(json.dumps(record) + "\n")

    stopping: list[bool] = []

    def stop(signum: int, frame: object) -> None:
        stopping.append(True)

    signal.signal(signal.SIGTERM, stop)
    out.write(json.dumps({"event": "ready", "pid": os.getpid()}) + "\n")
    out.flush()
    sweep_at = time.monotonic()
    while not stopping and os.getppid() == root:  # ends with the test process, however that ends
        try:
            data = listener.recv(1 << 16)
        except TimeoutError:
            data = b""
        except OSError as error:  # ENOBUFS: events were lost, and the test must know
            out.write(json.dumps({"event": "lost", "error": str(error)}) + "\n")
            data = b""
        if len(data) >= _EVENT + 32:
            what = struct.unpack_from("=I", data, _EVENT)[0]
            a, b, c, d = struct.unpack_from("=IIII", data, _EVENT + 16)
            if what == _FORK and b in live and c == d:  # a new process (c == d), not a thread
                serial += 1
                live[d] = serial
                if b == root:  # the runner's own command line now (pytest-xdist retitles it per test)
                    own = _snapshot(root)
                    out.write(json.dumps({"event": "runner", "cmdline": own and own["cmdline"]}) + "\n")
                emit("fork", serial, d, live[b])
            elif what == _EXEC and b in live:
                emit("exec", live[b], b, None)
            elif what == _UID and b in live:  # setuid and friends: the kernel says whom it became
                out.write(
                    json.dumps({"event": "uid", "serial": live[b], "pid": b, "parent": None, "ids": [c, d]})
                    + "\n"
                )
            elif what == _EXIT and a == b and b in live and b != root:
                last.pop(live.pop(b), None)
        if time.monotonic() >= sweep_at:
            sweep_at = time.monotonic() + _SWEEP_S
            for pid, number in list(live.items()):
                if pid != root:
                    emit("seen", number, pid, None)
        out.flush()


# -- the test side ---------------------------------------------------------------------------------


@dataclass
class Process:
    serial: int
    parent: int | None
    pid: int = 0
    images: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    execed: bool = False
    unread_exec: int | None = None
    """The record number of an exec whose image was gone before it could be read."""
    dropped_at: list[int] = field(default_factory=list[int])
    """The record numbers where the kernel reported it took a sandbox uid (real and effective)."""

    def label(self) -> str:
        return " ".join(self.images[-1]["cmdline"])[:200] if self.images else "(gone before seen)"


@dataclass(frozen=True)
class Allowed:
    """A process of ours allowed outside the sandbox (or as root inside it), and why."""

    why: str
    cmdline: tuple[str, ...]
    """Fragments its command line holds, in order."""
    execs_bwrap: bool = False
    """Allowed only when its next image is bubblewrap (a shell of ours that execs it)."""

    def matches(self, image: dict[str, Any]) -> bool:
        line = " ".join(image["cmdline"])
        return all(fragment in line for fragment in self.cmdline)


OUTSIDE = (
    Allowed(
        "process/confinement.py: the runner's start of a sandbox joins the trial's cgroup, then execs bwrap",
        ("/bin/sh -c ", 'exec "$@"', " sh "),
        execs_bwrap=True,
    ),
    Allowed(
        "browser/confined.py: the runner's generated wrapper for Chromium, which execs bwrap",
        ("/bin/sh ", "/chromium "),
        execs_bwrap=True,
    ),
    Allowed(
        "ctypes.util.find_library, when the runner imports pyseccomp to compile its filter: the system's "
        "ldconfig, listing libraries; no pack code",
        ("/sbin/ldconfig -p",),
    ),
    Allowed(
        "Playwright's driver (node): a pinned dependency of the runner that drives the confined browser "
        "over a pipe; it runs no pack code (pages run in Chromium, in the sandbox)",
        ("playwright/driver/node", "run-driver"),
    ),
)
"""Everything allowed in the runner's pid namespace besides ``bwrap`` itself and the runner's own forks."""

PROBE = Allowed(
    "process/confinement.py _probe: at start the runner runs /bin/true in bwrap, as root, to learn "
    "whether bubblewrap can make its namespaces here",
    ("/bin/true",),
)


class Watch:
    def __init__(self, path: Path, watcher: int, spawned: dict[int, list[str]]) -> None:
        self.path = path
        self.watcher = watcher
        self.spawned = spawned
        """The argv of every child this process started through subprocess (by pid): a child of the
        runner that execs and exits before the watcher can read it (ldconfig) is still named."""
        self.runner_ns = os.readlink("/proc/self/ns/pid")
        self.runner_cmdlines = {
            tuple(part.decode() for part in Path("/proc/self/cmdline").read_bytes().split(b"\0")[:-1])
        }
        """What this process's command line has been: a fork of it shows one until it execs."""

    def mark(self) -> int:
        """The number of records so far: :meth:`verdicts` judges what comes after."""
        with self.path.open() as file:
            return sum(1 for _ in file)

    def _processes(self) -> tuple[dict[int, Process], list[str]]:
        processes: dict[int, Process] = {0: Process(0, None)}
        lost: list[str] = []
        with self.path.open() as file:
            for number, line in enumerate(file):
                record: dict[str, Any] = json.loads(line)
                if record["event"] == "lost":
                    lost.append(record["error"])
                if record["event"] == "runner" and record["cmdline"]:
                    self.runner_cmdlines.add(tuple(record["cmdline"]))
                if "serial" not in record:
                    continue
                process = processes.setdefault(record["serial"], Process(record["serial"], record["parent"]))
                if record["event"] == "fork":
                    process.parent, process.pid = record["parent"], record["pid"]
                    argv = self.spawned.get(record["pid"]) if record["parent"] == 0 else None
                    if argv is not None:  # what the runner asked to run: judged even if gone unread
                        exe = {"exe": argv[0], "uids": [os.geteuid()] * 2, "pidns": self.runner_ns}
                        spawn = {**record, **exe, "event": "spawn", "cmdline": argv, "line": number}
                        process.images.append(spawn)
                if record["event"] == "uid" and set(record["ids"]) <= UIDS:
                    process.dropped_at.append(number)
                if record["event"] == "exec":
                    process.execed = True
                    if "gone" in record:
                        process.unread_exec = number
                if "cmdline" in record:
                    record["line"] = number
                    process.images.append(record)
        return processes, lost

    def verdicts(self, since: int) -> tuple[list[str], list[Process]]:
        """Violations (one line each) among what was recorded after ``since``, and the sandboxed processes."""
        time.sleep(0.1)  # the watcher's last sweep reaches the file
        processes, lost = self._processes()
        violations = [f"the watcher lost events: {error}" for error in lost]
        inside: list[Process] = []

        def ancestors(process: Process) -> list[Process]:
            chain: list[Process] = []
            while process.parent is not None and process.parent in processes:
                process = processes[process.parent]
                chain.append(process)
            return chain

        def is_bwrap(image: dict[str, Any]) -> bool:
            return os.path.basename(image["exe"]) == "bwrap"

        def sandboxed(process: Process) -> bool:
            return any(image["pidns"] != self.runner_ns for image in process.images) and any(
                is_bwrap(image) for a in ancestors(process) for image in a.images
            )

        for process in processes.values():
            if process.serial == 0 or any(
                p.images and p.images[0]["pid"] == self.watcher for p in [process, *ancestors(process)]
            ):
                continue
            spawned = any(image["event"] == "spawn" for image in process.images)
            if process.unread_exec is not None and process.unread_exec >= since and not spawned:
                # Gone before its image could be read: it ran where its nearest seen ancestor put it
                # (seccomp keeps a sandboxed process in its pid namespace), so that ancestor answers for it.
                seen = next((a for a in ancestors(process) if a.images), None)
                if seen is None or not (sandboxed(seen) or is_bwrap(seen.images[-1])):
                    label = seen.label() if seen else "the runner"
                    violations.append(
                        f"a descendant of {label!r} exec'd and was gone before it could be read"
                    )
            images = [image for image in process.images if image["line"] >= since]
            chain = ancestors(process)
            below_bwrap = any(is_bwrap(image) for a in chain for image in a.images)
            for index, image in enumerate(images):
                line = " ".join(image["cmdline"])[:300]
                if is_bwrap(image):
                    continue
                later = images[index + 1 :]
                if image["pidns"] == self.runner_ns:
                    if tuple(image["cmdline"]) in self.runner_cmdlines and image["event"] != "spawn":
                        # a fork of the runner runs our code until it execs; one that never does is reported
                        if not process.execed:
                            violations.append(f"a fork of the runner that never exec'd: {line}")
                        continue
                    execs_bwrap = any(is_bwrap(after) for after in later)
                    if not any(a.matches(image) and (execs_bwrap or not a.execs_bwrap) for a in OUTSIDE):
                        violations.append(f"outside the sandbox (uid {image['uids']}): {line}")
                    continue
                if not below_bwrap:
                    violations.append(f"in another pid namespace but not below bwrap: {line}")
                    continue
                if process not in inside:
                    inside.append(process)
                if os.geteuid() != 0 or set(image["uids"]) <= UIDS:
                    continue
                # Root inside: our entry points until they drop the uid (or exec), and the runner's probe.
                dropped = any(line_at > image["line"] for line_at in process.dropped_at) or any(
                    set(after["uids"]) <= UIDS for after in later
                )
                if dropped and _is_entry(image["cmdline"]):
                    continue
                if PROBE.matches(image) and any(
                    a.images[-1]["cmdline"][-2:] == ["--", "/bin/true"] for a in chain[:2] if a.images
                ):
                    continue
                violations.append(f"in the sandbox as uid {image['uids']}: {line}")
        return violations, inside


@pytest.fixture(scope="module")
def watch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Watch]:
    if os.geteuid() != 0:
        pytest.fail("the process connector needs root: run the security suite as root, as CI does")
    path = tmp_path_factory.mktemp("watch") / "processes.jsonl"
    spawned: dict[int, list[str]] = {}
    fork_exec: Callable[..., int] = vars(subprocess)["_fork_exec"]
    posix_spawn = os.posix_spawn

    def logged_fork_exec(args: Sequence[str | bytes], *rest: Any) -> int:
        pid = fork_exec(args, *rest)
        spawned[pid] = [os.fsdecode(arg) for arg in args]
        return pid

    def logged_posix_spawn(path: str, argv: list[str], env: Mapping[str, str], **options: Any) -> int:
        pid = posix_spawn(path, argv, env, **options)
        spawned[pid] = [os.fsdecode(arg) for arg in argv]
        return pid

    with path.open("w") as out:
        watcher = subprocess.Popen([sys.executable, "-I", __file__, str(os.getpid())], stdout=out)
    try:
        deadline = time.monotonic() + 30
        while not path.read_text().startswith('{"event": "ready"'):
            assert watcher.poll() is None and time.monotonic() < deadline, "the watcher did not start"
            time.sleep(0.02)
        # Pass-through logs of the runner's own starts (every subprocess, asyncio's too, goes through one).
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(subprocess, "_fork_exec", logged_fork_exec)
            patch.setattr(os, "posix_spawn", logged_posix_spawn)
            yield Watch(path, watcher.pid, spawned)
    finally:
        watcher.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            watcher.wait(timeout=10)
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()


# -- one trial of each kind ------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    name: str
    pack: Path | str
    """A pack folder (copied, so its modules are recognisable by path), or a τ² domain's name."""
    task_id: str
    expect: tuple[str, ...]
    """Fragments of command lines that must be seen inside the sandbox (so the kind really ran there)."""
    episode: bool = False
    """Played through the RL environment API (packages/env) rather than ``run_pack``."""
    judged: bool = False
    """Graded by the rubric judge too (the offline mock model: its tools read the state in the runner)."""


def _load(kind: Kind, tmp_path: Path, *, fresh: bool = False) -> Pack:
    """``fresh``: the copy's python files get a comment of their own, so no answer about its code is kept
    from an earlier load in this process (the loader keeps them by the code's digest)."""
    if isinstance(kind.pack, str):
        # a τ² domain by name (inspect_pack: the tasks that load; mock has two it refuses by name)
        return inspect_pack(Path(kind.pack)).pack
    target = tmp_path / kind.pack.name
    shutil.copytree(kind.pack, target, ignore=shutil.ignore_patterns("__pycache__"))
    if fresh:
        for source in target.rglob("*.py"):
            with source.open("a", encoding="utf-8") as out:
                out.write(f"\n# {tmp_path.name}\n")
    return load_pack(target)


async def _golden(
    pack: Pack,
    task_id: str,
    output: Path,
    isolation: Literal["sandbox", "process"] = "sandbox",
    *,
    judged: bool = False,
) -> None:
    """One golden trial (at the default isolation, ``sandbox``); it must pass (so everything it has ran)."""
    judge = JudgeModelConfig(model=MOCK_JUDGE_MODEL) if judged else None
    settings = RunSettings(output=output, task_ids=(task_id,), isolation=isolation, judge_model=judge)
    summary = await run_pack(pack, GoldenAgentFactory(), UserRouter(stand_in=True), settings)
    grade = yaml.safe_load((output / "trials" / task_id / "0" / "grade.yaml").read_text())
    assert summary.pass_rate == 1.0, grade["reasons"]


async def _episode(pack: Pack, task_id: str) -> None:
    """One RL episode played golden on the embedded runner (default isolation), rewarded as a pass."""
    async with Environments.open(pack) as envs:
        env = envs.env()
        observation = await env.reset(task_id, seed=0)
        names = [tool["function"]["name"] for tool in observation.tools]
        task = envs.tasks[task_id].task
        assert task.grading.state_checks is not None
        for number, action in enumerate(task.grading.state_checks.golden_actions, start=1):
            await env.step(golden_call(action, number, names))
        done = False
        while not done:  # words go to the scripted user, who answers until its flow says stop
            _, done, _ = await env.step({"role": "assistant", "content": task.golden_response or "Done."})
        reward = await env.reward()
        await env.close()
    assert reward.passed, reward.reasons


def _pack_modules(tmp_path: Path) -> set[str]:
    """Pack modules imported in this process: from a file under ``tmp_path`` (where the pack was copied),
    or from a code bundle the runner wrote for a trial (runner/tools/code_loader.py: beneath the bundle's
    synthetic package, which the runner mounts, codeless, wherever it keeps a task's code)."""
    return {
        name
        for name, module in list(sys.modules.items())
        if (name.startswith("_tolokaforge_code_") and "." in name)
        or str(getattr(module, "__file__", None) or "").startswith(str(tmp_path))
    }


KINDS = (
    Kind("python tools", EXAMPLES / "packs" / "retail", "trace_ordering_cancel_after_lookup", ("zygote",)),
    Kind("custom checks", HOST_PACKS / "library", "lend_book", ("tolokaforge.sdk.checks_runner", "zygote")),
    Kind(
        "rubric judge", EXAMPLES / "packs" / "dual_control", "dc_data_addon_judged", ("zygote",), judged=True
    ),
    Kind("mcp server", EXAMPLES / "packs" / "mcp_notes", "mcp_add_reminder_note", ("mcp_server.py",)),
    Kind("fs provider", COMPAT_PACKS / "files_family", "tidy_workspace", ("tolokaforge-tool-provider-fs",)),
    Kind(
        "terminal",
        EXAMPLES / "terminal",
        "csv-region-totals",
        ("tolokaforge-tool-provider-exec", "bash --noprofile", "pytest"),
    ),
    Kind("tau2", "tau2:mock", "create_task_1_with_env_assertions", ("zygote",)),
    Kind("web", EXAMPLES / "packs" / "web_shop", "cancel_stove_order", ("/chromium", "zygote")),
    Kind("rl environment", EXAMPLES / "packs" / "retail", "lookup_order_tracking", ("zygote",), episode=True),
)

READ_BY_THE_LOADER = ("python tools", "custom checks", "rubric judge", "mcp server", "web")
"""Kinds whose load asks the pack's own code what it declares (host/packs/code_probe.py)."""
"""The kinds whose pack code the host's loader runs in its own process or an unconfined child (below)."""


@pytest.mark.parametrize("kind", KINDS, ids=[kind.name for kind in KINDS])
async def test_every_process_a_trial_starts_for_pack_code_is_sandboxed(
    kind: Kind, watch: Watch, tmp_path: Path
) -> None:
    pack = _load(kind, tmp_path)  # loading is the next test's subject
    loaded = _pack_modules(tmp_path)
    since = watch.mark()
    if kind.episode:
        await _episode(pack, kind.task_id)
    else:
        await _golden(pack, kind.task_id, tmp_path / "run", judged=kind.judged)
    violations, inside = watch.verdicts(since)
    assert violations == [], "\n".join(violations)
    seen = [process.label() for process in inside]
    missing = [fragment for fragment in kind.expect if not any(fragment in label for label in seen)]
    assert missing == [], seen
    # Pack code never runs in the runner's process: running the trial imported none of its modules here.
    assert sorted(_pack_modules(tmp_path) - loaded) == []


LOADS = [kind for kind in KINDS if not kind.episode]  # the episode's pack loads as the python tools' does


@pytest.mark.parametrize("kind", LOADS)
def test_loading_a_pack_runs_none_of_its_code_outside_the_sandbox(
    kind: Kind, watch: Watch, tmp_path: Path
) -> None:
    before = _pack_modules(tmp_path)  # an earlier test's trusted-mode runner may have imported some
    since = watch.mark()
    _load(kind, tmp_path, fresh=True)
    violations, inside = watch.verdicts(since)
    assert violations == [], "\n".join(violations)
    assert sorted(_pack_modules(tmp_path) - before) == []
    if kind.name in READ_BY_THE_LOADER:
        # The load did read the pack's code -- in a child, in the sandbox.
        seen = [process.label() for process in inside]
        assert any("tolokaforge.core.pack_probe" in label for label in seen), seen


async def test_the_watch_refuses_a_trial_run_without_the_sandbox(watch: Watch, tmp_path: Path) -> None:
    """The control: at ``--isolation process`` the same trials' tool worker and custom checks are named."""
    control = next(kind for kind in KINDS if kind.name == "custom checks")
    pack = _load(control, tmp_path)
    since = watch.mark()
    await _golden(pack, control.task_id, tmp_path / "run", isolation="process")
    violations, inside = watch.verdicts(since)
    assert inside == []
    assert any("tolokaforge.sdk.checks_runner" in line for line in violations), violations
    assert any("tolokaforge.runner.workers" in line for line in violations), violations


if __name__ == "__main__":
    _watch(int(sys.argv[1]), sys.stdout)
