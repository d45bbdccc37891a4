"""What a pack's code declares, asked of a sandboxed child: the loader never runs pack code itself.

Loading a pack means learning what its python modules declare (tool classes and their schemas, whether
an ``mcp_server`` file is a module of tools, a site's ``ROUTES``) and whether its custom-checks file
imports. All of that runs the pack's code. In the host's own process it would run as the host's user,
with its environment (API keys), its files and its network -- so the loader asks a child instead, in
the same sandbox a runner gives pack code (docs/isolation.md): the pack's code bundle copied to a
private folder and bound read-only, no network, an empty environment, an unprivileged uid, seccomp and
Landlock. ``--isolation process`` / ``thread`` run the child without the sandbox (still a child,
still with an empty environment); a missing layer stops the load as it stops a runner.

One child serves a whole load (started on the first question, stopped when the load ends); answers
are kept per process by the code's digest, so loading the same pack again asks nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Generator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from tolokaforge.core.models import ToolCode

from ..errors import ConfigError

if TYPE_CHECKING:
    from tolokaforge.runner import Confinement

__all__ = ["CodeProbe", "Isolation", "ProbeError", "code_probe", "probing"]

Isolation = Literal["sandbox", "process", "thread"]
PROBE_MODULE = "tolokaforge.core.pack_probe"
CHECKS_HARNESS = "tolokaforge.sdk.checks_runner"
IMPORT_TIMEOUT_S = 60.0
"""How long importing one module (or a checks file) may take before the load reports it."""
_KEPT_ANSWERS = 4096


class ProbeError(Exception):
    """The pack's code could not answer: an import failed, a declaration is wrong, or it took too long."""


@dataclass(frozen=True)
class _Key:
    isolation: Isolation
    without: tuple[str, ...]


_confinements: dict[_Key, Confinement] = {}
_answers: dict[tuple[_Key, str, str, str], tuple[bool, Any]] = {}
_lock = threading.Lock()
_scratch: Path | None = None


def _confinement(key: _Key) -> Confinement:
    """The sandbox for pack code at ``key``'s level, detected once per process."""
    from tolokaforge.runner import Confinement, SandboxUnavailable

    global _scratch
    with _lock:
        known = _confinements.get(key)
        if known is not None:
            return known
        if key.isolation != "sandbox":
            made = Confinement.process()
        else:
            if _scratch is None:
                _scratch = Path(tempfile.mkdtemp(prefix="tolokaforge-probe-"))
            try:
                # No cgroup: a load is not a trial; the child's rlimits bound it.
                made = Confinement.detect(_scratch, without=("cgroup", *key.without))
            except SandboxUnavailable as error:  # a setup error, said in one line, as a runner says it
                raise ConfigError(f"reading the pack's code: {error}") from error
        _confinements[key] = made
        return made


class CodeProbe:
    """Questions about one pack's code for one load, answered by a sandboxed child."""

    def __init__(self, root: Path, isolation: Isolation, without: tuple[str, ...]) -> None:
        self.root = root
        self._key = _Key(isolation, tuple(sorted(without)))
        self._files: dict[str, str] | None = None
        self._digest = ""
        self._folder: Path | None = None
        self._child: subprocess.Popen[bytes] | None = None
        self._pending = b""

    def attach(self, code: ToolCode) -> None:
        """The code bundle the runner will load: the child reads exactly these files."""
        self._files = dict(code.files or {})
        text = hashlib.sha256()
        for name in sorted(self._files):
            text.update(name.encode() + b"\0" + self._files[name].encode() + b"\0")
        self._digest = text.hexdigest()

    # -- questions --------------------------------------------------------------------------------

    def tools(self, module_path: str) -> list[dict[str, Any]]:
        """The tools ``module_path`` declares: ToolDescription fields plus ``side`` (ProbeError: the defect)."""
        answer = self._ask("tools", module_path)
        assert isinstance(answer, list)
        return list(answer)  # pyright: ignore[reportUnknownArgumentType]

    def module_shaped(self, module_path: str) -> bool:
        """Whether an ``mcp_server`` file is a plain module of tools (public style), not a server."""
        return self._ask("shaped", module_path) is True

    def routes(self, module_path: str) -> list[dict[str, Any]] | None:
        """``ROUTES`` as ``{key, text, callable}`` rows; None when the module has no ROUTES dict."""
        answer = self._ask("routes", module_path)
        return None if answer is None else list(answer)  # pyright: ignore[reportUnknownArgumentType]

    def checks_failure(self, checks_path: str, imports: list[str]) -> str | None:
        """Why the custom-checks file cannot be imported as the runner imports it; None when it can."""
        argument = json.dumps([checks_path, imports])
        kept = _answers.get((self._key, self._digest, "checks", argument))
        if kept is not None:
            return kept[1]
        failure = self._import_checks(checks_path, imports)
        self._keep("checks", argument, (True, failure))
        return failure

    def close(self) -> None:
        self._stop()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    # -- the child --------------------------------------------------------------------------------

    def _ask(self, op: str, module: str) -> Any:
        kept = _answers.get((self._key, self._digest, op, module))
        if kept is None:
            kept = self._request(op, module)
            self._keep(op, module, kept)
        ok, value = kept
        if not ok:
            raise ProbeError(str(value))
        return value

    def _keep(self, op: str, argument: str, answer: tuple[bool, Any]) -> None:
        with _lock:
            if len(_answers) >= _KEPT_ANSWERS:
                _answers.pop(next(iter(_answers)))
            _answers[(self._key, self._digest, op, argument)] = answer

    def _request(self, op: str, module: str) -> tuple[bool, Any]:
        child = self._child or self._start()
        assert child.stdin is not None and child.stdout is not None
        try:
            child.stdin.write(json.dumps({"op": op, "module": module}).encode() + b"\n")
            child.stdin.flush()
        except BrokenPipeError:
            return False, self._ended(f"importing {module!r}")
        line = self._read_line(child, time.monotonic() + IMPORT_TIMEOUT_S)
        if line is None:
            if child.poll() is None:
                self._stop()
                return False, f"importing {module!r} took longer than {IMPORT_TIMEOUT_S:g}s"
            return False, self._ended(f"importing {module!r}")
        try:
            reply = json.loads(line)
        except ValueError:
            self._stop()
            return False, f"importing {module!r}: the probe answered {line[:200]!r}"
        if "error" in reply:
            return False, str(reply["error"])
        return True, reply.get("ok")

    def _read_line(self, child: subprocess.Popen[bytes], deadline: float) -> str | None:
        assert child.stdout is not None
        fd = child.stdout.fileno()
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line.decode("utf-8", errors="replace")

    def _ended(self, doing: str) -> str:
        child, status = self._child, None
        if child is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                status = child.wait(timeout=1.0)
        self._stop()
        how = f" (exit status {status})" if status is not None else ""
        return f"{doing}: the pack's code ended the process reading it{how}"

    def _start(self) -> subprocess.Popen[bytes]:
        self._child = self._spawn(PROBE_MODULE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self._pending = b""
        return self._child

    def _spawn(self, module: str, *, stdout: int, stderr: int) -> subprocess.Popen[bytes]:
        """``python -I -m module`` in the pack's sandbox over the bundle folder, its stdin a pipe."""
        folder = self._bundle_folder()
        from tolokaforge.runner import Limits, View, confined_launch, scrubbed_env

        confinement = _confinement(self._key)
        env = scrubbed_env({}, home="/tmp" if confinement.sandboxed else str(folder))
        view = View(cwd=folder, read=(folder,))
        launch = confined_launch(confinement, Limits(), [sys.executable, "-I", "-m", module], env, view)
        with launch.opened() as (argv, fds):
            return subprocess.Popen(
                argv,
                cwd=folder,
                env=env,
                stdin=subprocess.PIPE,
                stdout=stdout,
                stderr=stderr,
                pass_fds=fds,
                start_new_session=True,
            )

    def _stop(self) -> None:
        child, self._child = self._child, None
        if child is None:
            return
        with contextlib.suppress(OSError):
            os.killpg(child.pid, signal.SIGKILL)  # its group: whatever the pack's import started goes too
        child.wait()
        for stream in (child.stdin, child.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()

    def _bundle_folder(self) -> Path:
        """The bundle written to a private folder the sandbox user can read (the pack's own may be 0700)."""
        if self._folder is not None:
            return self._folder
        if self._files is None:
            raise RuntimeError("CodeProbe.attach(code) comes before any question")
        folder = Path(tempfile.mkdtemp(prefix="tolokaforge-pack-code-"))
        folder.chmod(0o755)
        for name, text in self._files.items():
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        _confinement(self._key).own(folder)
        self._folder = folder
        return folder

    def _import_checks(self, checks_path: str, imports: list[str]) -> str | None:
        """Import the checks file the way the runner will: the same harness in a fresh confined interpreter."""
        folder = self._bundle_folder()
        path = folder / checks_path
        payload = {
            "file": str(path),
            "search_paths": [str(path.parent), *(str(folder / relative) for relative in imports)],
            "load_only": True,
        }
        child = self._spawn(CHECKS_HARNESS, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            _, stderr = child.communicate(json.dumps(payload).encode(), timeout=IMPORT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return f"importing it took longer than {IMPORT_TIMEOUT_S:g}s"
        finally:
            with contextlib.suppress(OSError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        if child.returncode == 0:
            return None
        lines = stderr.decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else f"the harness exited with status {child.returncode}"


_current: ContextVar[CodeProbe | None] = ContextVar("tolokaforge_code_probe", default=None)


@contextlib.contextmanager
def probing(
    root: Path, isolation: Isolation = "sandbox", without: tuple[str, ...] = ()
) -> Generator[CodeProbe]:
    """The probe for one load of the pack at ``root``; the load's stages reach it with :func:`code_probe`."""
    probe = CodeProbe(root, isolation, without)
    token = _current.set(probe)
    try:
        yield probe
    finally:
        _current.reset(token)
        probe.close()


def code_probe() -> CodeProbe:
    """The probe of the load in progress."""
    probe = _current.get()
    if probe is None:
        raise RuntimeError("the pack's code is read during a load (code_probe.probing)")
    return probe
