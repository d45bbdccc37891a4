"""A zygote: one sandboxed process per distinct worker code that forks the trial workers of that code.

``python -I -m tolokaforge.runner.workers.zygote LIMITS``, its stdin a unix SOCK_SEQPACKET socket to
the runner (the control socket). It confines itself exactly as a worker does (sandbox.apply: resource
limits, a private network namespace, death with the runner), reads which code to import, imports the
worker child's modules and the task's tools once, and answers ``ready``. From then on it is a plain
blocking loop -- no event loop, no threads: forking a process that has either is unsafe -- that
answers each ``fork`` request (JSON, with the worker's socket and log file passed as descriptors) by
forking a worker, reads a task's initial state when asked to ``hold`` it ahead of its first fork, and
reports the exit status of every worker it reaps.

A forked worker starts from the zygote's memory: its own copy of every module the tools imported, in
the state import left it, so two trials never share module globals. Before running anything of the
trial it leads a session of its own, asks to die with the zygote (in whose network namespace it
stays), sets its CPU limit (its CPU clock starts at the fork), keeps only its socket and the log of
its descriptors, and takes the trial's workspace and environment. Then it serves the worker protocol
(workers/child.py) over its socket.

A code whose modules fail to import, or leave a thread running or a descriptor open, is not forked: the
zygote answers ``ready: false`` with the reason, and the runner spawns that code's workers afresh.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import select
import signal
import socket
import sys
import traceback
from typing import Any, cast

import orjson
from cachetools import LRUCache

from tolokaforge.runner.process import landlock
from tolokaforge.runner.process.sandbox import Limits, become_subreaper, confine, die_with_parent, limit_cpu

from .child import import_tools, register_package, serve
from .frames import read_request

_INIT_BYTES = 1 << 20
_BASES = 1
"""Initial states a zygote holds: one (the runner keys zygotes by it), so a worker's memory never holds
another task's initial state."""
_REQUEST_BYTES = 1 << 16
"""A fork request's limit: a workspace path and an environment (a larger one is refused, not truncated)."""


def main() -> None:
    limits, report = confine(sys.argv[1], cpu=False)
    walls = _walls(sys.argv[1])
    control = socket.socket(fileno=os.dup(0))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    init = _receive(control)
    if init is None:
        return
    importlib.import_module("tolokaforge.runner.state.cow")  # the workers' table views, imported once, here

    descriptors = _descriptors()
    why = _import_modules(init["root"], init["package"], init["modules"]) or _unforkable(descriptors)
    if why:
        _send(control, {"ready": False, "why": why[:4000]})
        return
    # What import built is never freed: keep the collector off those pages, so forks share them.
    gc.collect()
    gc.freeze()
    wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    _send(control, {"ready": True, "pid": os.getpid()})
    live: set[int] = set()
    bases: LRUCache[str, Base] = LRUCache(maxsize=_BASES)
    try:
        while True:
            readable, _, _ = select.select([control, wake_read], [], [])
            if wake_read in readable:
                while len(os.read(wake_read, 512)) == 512:
                    pass
                _reap(control, live)
            if control in readable:
                message, fds, flags, _ = socket.recv_fds(control, _REQUEST_BYTES, 2)
                if not message:
                    return  # the runner hung up
                request: dict[str, Any] = json.loads(message) if not flags & socket.MSG_TRUNC else {}
                if "hold" in request and not fds:
                    # An initial state read ahead of its first fork; a failure is met again at that fork.
                    with contextlib.suppress(OSError, ValueError):
                        _hold(bases, str(request["hold"]), str(request["base_file"]))
                    continue
                try:
                    if "fork" not in request or len(fds) != 2:
                        raise ValueError("the request was too large or carried no socket")
                    if "base" in request:
                        _hold(bases, str(request["base"]), str(request["base_file"]))
                    pid = _fork(request, fds, report, limits, bases, walls)
                except (OSError, ValueError) as error:  # no process to be had: the runner spawns instead
                    _send(control, {"forked": request.get("fork", -1), "error": str(error)})
                else:
                    live.add(pid)
                    _send_forked(control, request["fork"], pid)
                finally:
                    for fd in fds:
                        os.close(fd)
    finally:
        for pid in live:
            _kill_group(pid)


Base = tuple[dict[str, Any], dict[str, Any]]
"""An initial state's tables, and the working views a tool's calls go through, built over them."""


def _hold(bases: LRUCache[str, Base], full_hash: str, file: str) -> None:
    """Hold the initial state ``full_hash``, read from ``file`` unless held already.

    Its views are built here too: building one references every record of its table, and in a
    worker that would write to every record's page (reference counts), copying the whole table into
    the worker's memory; built before the fork, those pages stay shared.
    """
    from tolokaforge.runner.state.cow import CowDict, CowList

    if bases.get(full_hash) is not None:  # a lookup, so the held state counts as used
        return
    with open(file, "rb") as source:
        data = source.read()
    # A fresh document holds no cycle: the collector's passes over its containers (two per record)
    # would cost twice the parse. The runner wrote the file with orjson, which reads it fastest too.
    gc.disable()
    try:
        tables = orjson.loads(data)
    finally:
        gc.enable()
    if not isinstance(tables, dict):
        raise ValueError(f"{file} does not hold tables")
    held = cast(dict[str, Any], tables)
    views: dict[str, Any] = {}
    for name, table in held.items():
        if type(table) is list:
            views[name] = CowList(cast(list[Any], table))
        elif type(table) is dict:
            views[name] = CowDict(cast(dict[str, Any], table))
    bases[full_hash] = (held, views)
    # Like the imported modules: kept off the collector's pages, so forked workers share them.
    gc.freeze()


Walls = tuple[list[str], int] | None
"""Where a forked worker may read, and the Landlock ABI, when the zygote is sandboxed: the worker's own
Landlock domain narrows the zygote's (which may write every workspace) to its trial's workspace."""


def _walls(spec: str) -> Walls:
    sandbox: dict[str, Any] | None = json.loads(spec).get("sandbox")
    if not sandbox or not sandbox.get("landlock"):
        return None
    return list(sandbox["read"]), int(sandbox["landlock"])


def _send_forked(control: socket.socket, ident: int, pid: int) -> None:
    """Answer a fork with the worker's pid here and a pidfd: in a pid namespace, only the pidfd names
    the process for the runner (which reads its own pid for it from the descriptor)."""
    message = json.dumps({"forked": ident, "pid": pid}).encode()
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:  # it died already: its exit report follows
        control.send(message)
        return
    try:
        socket.send_fds(control, [message], [pidfd])
    finally:
        os.close(pidfd)


def _fork(
    request: dict[str, Any],
    fds: list[int],
    report: dict[str, str],
    limits: Limits,
    bases: LRUCache[str, Base],
    walls: Walls,
) -> int:
    conn, log = fds
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            _become_worker(request, conn, log, report, limits, bases, walls)
            code = 0
        except BaseException:  # the worker's own failure: to its log, and out
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return pid


def _become_worker(
    request: dict[str, Any],
    conn: int,
    log: int,
    report: dict[str, str],
    limits: Limits,
    bases: LRUCache[str, Base],
    walls: Walls,
) -> None:
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    die_with_parent()
    os.dup2(log, 1)
    os.dup2(log, 2)
    # Nothing else of the zygote's (its control socket, its wake-up pipe) reaches the tool: only stdio
    # and the worker's socket stay open.
    os.closerange(3, conn)
    os.closerange(conn + 1, 1 << 20)
    os.set_inheritable(conn, False)
    # The network namespace is the zygote's (no interface up): a namespace per worker would cost each a
    # millisecond and the kernel more to tear down, and would part nothing the shared file system joins.
    limits_report = {**report, "cpu_time": limit_cpu(limits)}
    # Orphans of the tool's children are re-parented here, not to the zygote: they stay the worker's
    # descendants, found and killed with it.
    become_subreaper()
    if walls is not None:
        read, abi = walls
        limits_report["landlock"] = landlock.restrict(
            read, [request["workspace"], "/dev"], network=limits.network, abi=abi
        )
    os.chdir(request["workspace"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile = sys.modules.get("tempfile")  # not imported here: it imports random, reseeded at every fork
    if tempfile is not None:
        setattr(tempfile, "tempdir", None)  # noqa: B010  (chosen anew from TMPDIR, the workspace)
    init = read_request(conn)
    if init is None:
        return
    # The modules are imported already: this finds the trial's classes, and says which are missing.
    tools, problems = import_tools(init["root"], init["package"], init["tools"])
    tables: dict[str, Any] = init["tables"]
    views: dict[str, Any] = {}
    if "base" in init:
        # The zygote's copy of the initial state (and its views), under the tables the trial changed
        # since. The worker's own changes go to its copy-on-write pages, never the zygote's.
        held, held_views = bases[init["base"]]
        views = {name: view for name, view in held_views.items() if name not in tables}
        tables = {**held, **tables}
    hello = {"ok": True, "limits": limits_report, "problems": problems}
    serve(conn, conn, tables, tools, hello, views)


def _reap(control: socket.socket, live: set[int]) -> None:
    while live:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        live.discard(pid)
        _send(control, {"exit": pid, "code": os.waitstatus_to_exitcode(status)})


def _import_modules(root: str, package: str, modules: list[str]) -> str:
    """Import the task's tool modules; why not, if one fails (its workers are then spawned, and say why)."""
    register_package(root, package)
    for name in modules:
        try:
            importlib.import_module(f"{package}.{name}")
        except BaseException as error:  # pack code raising at import time: the spawned worker reports it
            return f"importing {name!r} raised {type(error).__name__}: {error}"
    return ""


def _unforkable(descriptors: set[str]) -> str:
    threads = os.listdir("/proc/self/task")
    if len(threads) > 1:
        names = sorted(_thread_name(tid) for tid in threads if tid != str(os.getpid()))
        return f"importing the tools left {len(threads) - 1} thread(s) running ({', '.join(names)})"
    opened = _descriptors() - descriptors
    if opened:
        return f"importing the tools left descriptor(s) {sorted(opened, key=int)} open"
    return ""


def _thread_name(tid: str) -> str:
    try:
        with open(f"/proc/self/task/{tid}/comm", encoding="utf-8") as comm:
            return comm.read().strip()
    except OSError:
        return tid


def _descriptors() -> set[str]:
    return {fd for fd in os.listdir("/proc/self/fd") if os.path.exists(f"/proc/self/fd/{fd}")}


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return


def _receive(control: socket.socket) -> Any | None:
    message = control.recv(_INIT_BYTES)
    return json.loads(message) if message else None


def _send(control: socket.socket, message: dict[str, Any]) -> None:
    control.send(json.dumps(message).encode())


if __name__ == "__main__":
    main()
