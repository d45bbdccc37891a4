"""The persistent shells behind the ``bash`` operation: one bash process per trial, kept between calls.

A call's command is written to a file in the shell's private directory, read and evaluated by the
waiting shell, so ``cd``, exported variables and shell functions stay for the trial's next call. After it the
shell prints an end marker carrying the command's exit status on stdout and another on stderr; a pipe
keeps order, so everything the command printed before has arrived once both markers have. The marker
holds a random nonce per shell, so ordinary output never ends a call early.

The shell is its own process group. A command past its deadline is killed with the whole group (the
shell and everything it started) and the next call of that trial starts a fresh shell; so does a
command that ends the shell itself (``exit``). Releasing the shells kills every group, so nothing a
trial started outlives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import secrets
import shutil
import signal
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "HEAD_BYTES",
    "TAIL_BYTES",
    "Captured",
    "ShellOutcome",
    "ShellStartError",
    "TrialShells",
    "hide_from_commands",
]

HEAD_BYTES = 32 * 1024
"""Kept from the start of each stream, stdout and stderr each."""
TAIL_BYTES = 32 * 1024
"""Kept from the end of each stream: a long build or test log keeps both its start and its verdict."""
_READ_SIZE = 65536
_SHELL = ("bash", "--noprofile", "--norc")
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_REAP_S = 1.0
_PRIVATE_ROOT = "/tmp"


class ShellStartError(Exception):
    """bash could not be started (the message says why)."""


@dataclass
class Captured:
    """One stream of one call: the first :data:`HEAD_BYTES` and the last :data:`TAIL_BYTES`."""

    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)
    total: int = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = HEAD_BYTES - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            del self.tail[: max(len(self.tail) - TAIL_BYTES, 0)]

    @property
    def cut(self) -> int:
        """Bytes dropped from the middle."""
        return self.total - len(self.head) - len(self.tail)

    def text(self) -> str:
        if self.cut == 0:
            return (self.head + self.tail).decode("utf-8", errors="replace")
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        return f"{head}\n[... {self.cut} bytes cut ...]\n{tail}"


@dataclass(frozen=True)
class ShellOutcome:
    """What one call did: the command's status (None when it ran past its deadline) and its output."""

    exit_code: int | None
    stdout: Captured
    stderr: Captured
    shell_ended: bool = False
    """The shell itself is gone (the command ended it, or the deadline killed it): the next call gets a fresh one."""
    signal: int = 0


class _Scanner:
    """Passes a stream's bytes on until the end marker; holds back a tail that may be a marker's start."""

    def __init__(self, marker: bytes, *, with_status: bool) -> None:
        self._marker = marker
        self._with_status = with_status
        self._pending = bytearray()
        self.done = False
        self.status: int | None = None

    def feed(self, data: bytes, sink: Captured) -> None:
        self._pending += data
        at = self._pending.find(self._marker)
        if at < 0:
            keep = len(self._marker) - 1
            sink.add(bytes(self._pending[: max(len(self._pending) - keep, 0)]))
            del self._pending[: max(len(self._pending) - keep, 0)]
            return
        rest = self._pending[at + len(self._marker) :]
        if self._with_status:
            end = rest.find(b";")
            if end < 0:  # the status digits are still on their way
                return
            self.status = int(rest[:end])
        sink.add(bytes(self._pending[:at]))
        self._pending.clear()
        self.done = True

    def flush(self, sink: Captured) -> None:
        """The stream ended without a marker: what was held back is output too."""
        sink.add(bytes(self._pending))
        self._pending.clear()


class _Shell:
    """One running bash, its private directory, and the lock that makes its calls take turns."""

    def __init__(self, process: asyncio.subprocess.Process, directory: Path) -> None:
        self.process = process
        self.directory = directory
        self.lock = asyncio.Lock()
        self.nonce = secrets.token_hex(12)
        self.calls = 0
        self.abandoned = False
        """A call was cancelled mid-command: the shell's state is unknown, so it is not used again."""

    @classmethod
    async def start(cls, workspace: str, env: dict[str, str]) -> _Shell:
        # /tmp, not TMPDIR: the runner points TMPDIR at the workspace (the agent's files, which graders
        # read) or the pack's read-only code. In the sandbox /tmp is private to the trial.
        directory = Path(tempfile.mkdtemp(prefix="tf-bash-", dir=_PRIVATE_ROOT))
        try:
            process = await asyncio.create_subprocess_exec(
                *_SHELL,
                cwd=workspace,
                env=env,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                # Its own group: a deadline kills the shell with everything it started.
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        except OSError as error:
            shutil.rmtree(directory, ignore_errors=True)
            raise ShellStartError(f"cannot start bash: {error.strerror or error}") from error
        return cls(process, directory)

    def alive(self) -> bool:
        return self.process.returncode is None and not self.abandoned

    async def run(self, command: str, deadline: float) -> ShellOutcome:
        # One file, rewritten per call: the shell has read the previous one before it printed its marker.
        script = self.directory / "command.sh"
        _overwrite(script, (command + "\n").encode())
        # The call's number in the marker too: no marker of an earlier call can end this one.
        self.calls += 1
        nonce = f"{self.nonce}.{self.calls}"
        marker = b"\x1e" + nonce.encode() + b"\x1f"
        quoted = str(script).replace("'", "'\\''")
        # Read by a builtin and eval'ed, not sourced: no fork per call, and bash names no file of ours in
        # its messages. stdin is /dev/null for the command: the shell's own stdin carries the next calls.
        # The stderr marker goes first, so both are usually waiting when the stdout one wakes us.
        line = (
            f"IFS= read -r -d '' __tolokaforge_command <'{quoted}'; eval \"$__tolokaforge_command\" </dev/null; "
            f"__tolokaforge_status=$?; printf '\\036%s\\037' {nonce} >&2; "
            f"printf '\\036%s\\037%d;' {nonce} \"$__tolokaforge_status\"\n"
        )
        stdout, stderr = Captured(), Captured()
        out_scan = _Scanner(marker, with_status=True)
        err_scan = _Scanner(marker, with_status=False)
        process = self.process
        assert process.stdin is not None and process.stdout is not None and process.stderr is not None
        try:
            process.stdin.write(line.encode())
            await process.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            await self.kill()
            return ShellOutcome(process.returncode, stdout, stderr, shell_ended=True)
        readers = {
            asyncio.ensure_future(process.stdout.read(_READ_SIZE)): (process.stdout, out_scan, stdout),
            asyncio.ensure_future(process.stderr.read(_READ_SIZE)): (process.stderr, err_scan, stderr),
        }
        loop = asyncio.get_running_loop()
        ends_at = loop.time() + deadline
        timed_out = False
        try:
            while readers:
                left = ends_at - loop.time()
                if left <= 0:
                    timed_out = True
                    break
                done, _ = await asyncio.wait(readers, timeout=left, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    reader, scan, sink = readers.pop(task)
                    data = task.result()
                    if not data:  # the shell is gone: what it printed is all there is
                        scan.flush(sink)
                        continue
                    scan.feed(data, sink)
                    if not scan.done:
                        readers[asyncio.ensure_future(reader.read(_READ_SIZE))] = (reader, scan, sink)
        finally:
            for task in readers:
                task.cancel()
        if timed_out:
            # What a scanner held back as a possible marker start is output after all.
            out_scan.flush(stdout)
            err_scan.flush(stderr)
            await self.kill()
            code = process.returncode or 0
            return ShellOutcome(None, stdout, stderr, shell_ended=True, signal=-code if code < 0 else 0)
        if out_scan.done and err_scan.done:
            assert out_scan.status is not None
            return ShellOutcome(out_scan.status, stdout, stderr)
        # The command ended the shell (exit, exec, a fatal signal): its status is the shell's.
        await self.kill()
        code = process.returncode if process.returncode is not None else -1
        signal_number = -code if code < 0 else 0
        return ShellOutcome(
            128 + signal_number if signal_number else code,
            stdout,
            stderr,
            shell_ended=True,
            signal=signal_number,
        )

    async def kill(self) -> None:
        """Kill the shell's whole process group and remove its directory."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        # Bounded: asyncio's wait also waits for the pipes, which a process that left the group holds.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.process.wait(), _REAP_S)
        shutil.rmtree(self.directory, ignore_errors=True)

    def abandon(self) -> None:
        """A call ended half way (cancelled): the command may still run and the shell's state is
        unknown, so the shell is killed at once and never used again."""
        self.abandoned = True
        self.kill_now()

    def kill_now(self) -> None:
        """:meth:`kill` without waiting (at exit, or while a cancellation unwinds)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        shutil.rmtree(self.directory, ignore_errors=True)


class TrialShells:
    """The shells of every trial this provider serves, by trial id; two trials never share one."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self._env = env if env is not None else _shell_environment()
        self._shells: dict[str, _Shell] = {}

    async def run(self, trial_id: str, workspace: str, command: str, deadline: float) -> ShellOutcome:
        """Run ``command`` in the trial's shell (started in ``workspace`` on its first call)."""
        shell = self._shells.get(trial_id)
        if shell is None or not shell.alive():
            if shell is not None:
                await shell.kill()
            shell = await _Shell.start(workspace, self._env)
            self._shells[trial_id] = shell
        async with shell.lock:
            if not shell.alive():  # a call before ours ended it: take the fresh one
                return await self.run(trial_id, workspace, command, deadline)
            try:
                outcome = await shell.run(command, deadline)
            except BaseException:  # cancelled: the kernel abandoned the call
                shell.abandon()
                raise
        if outcome.shell_ended and self._shells.get(trial_id) is shell:
            del self._shells[trial_id]
        return outcome

    async def release(self, trial_id: str) -> None:
        shell = self._shells.pop(trial_id, None)
        if shell is not None:
            await shell.kill()

    async def release_all(self) -> None:
        for trial_id in list(self._shells):
            await self.release(trial_id)

    def kill_all_now(self) -> None:
        for shell in self._shells.values():
            shell.kill_now()
        self._shells.clear()

    def pids(self) -> dict[str, int]:
        """The shell of each trial (for tests and diagnostics)."""
        return {trial_id: shell.process.pid for trial_id, shell in self._shells.items()}


def _overwrite(path: Path, data: bytes) -> None:
    # Not O_TRUNC: on ext4 truncating a file that holds data flushes it at close (milliseconds a call).
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


def _shell_environment() -> dict[str, str]:
    # The provider's own settings (who may call it, what it serves) are not the commands' business.
    env = {key: value for key, value in os.environ.items() if not key.startswith("TOLOKAFORGE_PROVIDER")}
    # A command's temporary files (mktemp, compilers) go to /tmp, not into the graded workspace.
    env["TMPDIR"] = _PRIVATE_ROOT
    return env


def hide_from_commands() -> None:
    """Make this process's memory and ``/proc`` files unreadable to the commands its shells run.

    They run as the same user in the same sandbox, which would let them open ``/proc/<provider>/mem``
    and read the token the runner handed the provider. Not dumpable, those files are root's. bash and
    what it runs become dumpable again at exec: this covers the provider alone.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def _die_with_parent() -> None:
    # Runs in the child before exec: if the provider dies without releasing its shells (SIGKILL
    # under --isolation process, where no pid namespace ends with it), the kernel kills the shell.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
