"""Serve the RunnerService: in this process on an ephemeral loopback port, or as a service.

``start_runner`` is the one public way to get a runner: the host's embedded mode and the pytest
plugin use it, and so does the ``tolokaforge-runner`` command. Its :attr:`RunnerHandle.runner` is the
runner in this process behind the Runner interface (lifecycle/local.py), called directly; with
``serve`` the same runner is also served over gRPC (servicer.py). With ``serve=False`` nothing listens.
"""

from __future__ import annotations

import logging
import socket
import ssl
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from grpclib.client import Channel
from grpclib.encoding.base import CodecBase
from grpclib.server import Server

from tolokaforge.core.credentials import (
    authorize_channel,
    client_tls,
    new_token,
    refuse_clear_token,
    refuse_public_bind,
)
from tolokaforge.db import StateClient

from ..calls.executor import Isolation, ToolExecutor
from ..lifecycle.local import LocalRunner
from ..lifecycle.registry import TrialRegistry
from ..process.confinement import Confinement
from ..process.sandbox import Limits
from ..process.supervisor import kill_all_supervised
from ..state.endpoint import StateEndpoint
from ..trials.golden_memo import GoldenReplay
from ..trials.scratch import Scratch, new_scratch
from .guard import EdgeLimits, GuardedServer
from .servicer import RunnerServicer

log = logging.getLogger(__name__)

__all__ = ["RunnerHandle", "RunnerSettings", "start_runner"]


@dataclass(frozen=True)
class RunnerSettings:
    """How to run a runner. ``db_url`` None means the in-process memory store (the embedded default)."""

    host: str = "127.0.0.1"
    port: int = 0
    token: str | None = None
    """The token every gRPC call must carry; None: a fresh one (read it from :attr:`RunnerHandle.token`)."""
    tls_cert: Path | None = None
    tls_key: Path | None = None
    """TLS for the gRPC port (PEM files); required to listen on anything but loopback."""
    db_url: str | None = None
    db_token: str | None = None
    """The DB service's token (with ``db_url``): the admin credential, held by the runner alone."""
    db_ca: Path | None = None
    """The CA that signed an ``https`` DB service's certificate (None: the system's CAs)."""
    default_tool_timeout_s: float = 30.0
    max_tool_threads: int = 64
    work_dir: Path | None = None
    """Scratch for workspaces, logs and code bundles; None: a new directory, removed at close (scratch.py)."""
    isolation: Isolation = "sandbox"
    """``sandbox``: python tools, tool servers and custom checks run in supervised
    processes inside the OS sandbox (docs/isolation.md); ``process`` (today's default, until every
    tool-source path is sandboxed): the same processes without it; ``thread``: trusted mode, python tools in this process."""
    sandbox_without: frozenset[str] = frozenset()
    """Sandbox layers this machine lacks that the user accepts running without (``--without``)."""
    limits: Limits = field(default_factory=Limits)
    """The confinement of tool workers, tool servers and custom checks (see docs/isolation.md)."""
    fork_server: bool = True
    """Isolated mode: fork each worker from a zygote of its code (cheap) rather than spawn an interpreter
    that imports the tools (see docs/isolation.md); ``False`` spawns every worker afresh."""
    lease_seconds: float = 30.0
    """How long the store keeps this runner's trials its own without a renewal (docs/faults.md)."""
    edge: EdgeLimits = field(default_factory=EdgeLimits)
    """Message size, receive and idle timeouts, streams per connection (grpc_edge.py)."""
    golden_replay: GoldenReplay = "task"
    """``task``: reuse a task's golden replay once two trials' replays agree (golden_memo.py);
    ``trial``: replay the golden path for every trial."""


@dataclass
class RunnerHandle:
    """A running runner. ``address`` is ``host:port`` (port 0: not served); ``close()`` stops it and frees its state."""

    host: str
    port: int
    token: str
    """What a gRPC client must present (:meth:`channel` does)."""
    runner: LocalRunner
    """The runner in this process: call it directly (it is what the gRPC port serves too)."""
    servicer: RunnerServicer
    _server: Server | None
    _client: StateClient
    _executor: ToolExecutor
    _endpoint: StateEndpoint
    _tmp: Scratch | None = field(default=None)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def channel(
        self, *, codec: CodecBase | None = None, ssl_context: ssl.SSLContext | None = None
    ) -> Channel:
        """A grpclib channel to this runner whose every call carries its token."""
        channel = Channel(self.host, self.port, codec=codec, ssl=ssl_context)
        authorize_channel(channel, self.token)
        return channel

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        # No tool process outlives the runner: every trial's servers and providers stop here.
        await self.runner.registry.close()
        await self._endpoint.aclose()
        await self._executor.close()
        kill_all_supervised()  # belt and braces: no child of this runner outlives it
        await self._client.aclose()
        if self._tmp is not None:
            self._tmp.cleanup()

    async def __aenter__(self) -> RunnerHandle:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def _state_client(settings: RunnerSettings) -> tuple[StateClient, str]:
    if settings.db_url is None:
        from tolokaforge.db import LocalStateClient

        return await LocalStateClient.open(), "memory"
    from tolokaforge.db import HttpStateClient

    return HttpStateClient(settings.db_url, token=settings.db_token, ssl_context=_db_tls(settings)), "http"


def _db_tls(settings: RunnerSettings) -> ssl.SSLContext | None:
    return None if settings.db_ca is None else client_tls(settings.db_ca)


async def start_runner(settings: RunnerSettings | None = None, *, serve: bool = True) -> RunnerHandle:
    """Start a runner in the current event loop and return once it accepts connections (with ``serve``;
    without, it is called through :attr:`RunnerHandle.runner` alone)."""
    settings = settings or RunnerSettings()
    tls = _tls_context(settings)
    if serve:
        refuse_public_bind(settings.host, tls=tls is not None, flags="--tls-cert and --tls-key")
    if settings.db_url is not None:
        parts = urllib.parse.urlsplit(settings.db_url)
        refuse_clear_token(
            parts.hostname or "", tls=parts.scheme == "https", service="db", flags="an https:// --db-url"
        )
    token = settings.token or new_token()
    client, store_name = await _state_client(settings)
    tmp = None
    work_dir = settings.work_dir
    if work_dir is None:
        tmp = new_scratch()
        work_dir = Path(tmp.name)
    try:
        confinement = (
            Confinement.detect(work_dir, without=settings.sandbox_without)
            if settings.isolation == "sandbox"
            else Confinement.process()
        )
    except BaseException:
        await client.aclose()
        if tmp is not None:
            tmp.cleanup()
        raise
    # Said at start, not only in HealthCheck: a layer run without is never a silent downgrade.
    log.info(
        "isolation %s: %s",
        confinement.level,
        ", ".join(f"{name}={value}" for name, value in confinement.report.items()),
    )
    executor = ToolExecutor(
        max_workers=settings.max_tool_threads,
        isolation=settings.isolation,
        limits=settings.limits,
        log_dir=work_dir / "logs",
        fork_server=settings.fork_server,
        confinement=confinement,
    )
    endpoint = StateEndpoint(client, settings.db_url, settings.db_token, _db_tls(settings))
    registry = TrialRegistry(
        client,
        executor,
        work_dir,
        settings.default_tool_timeout_s,
        state_door=endpoint.door,
        lease_seconds=settings.lease_seconds,
        golden_replay=settings.golden_replay,
    )
    registry.start_lease_renewal()
    runner = LocalRunner(registry, executor)
    servicer = RunnerServicer(runner, store_name=store_name, limits=settings.edge, token=token)
    if not serve:
        return RunnerHandle(settings.host, 0, token, runner, servicer, None, client, executor, endpoint, tmp)
    server = GuardedServer([servicer], settings.edge)
    # Bind first so an ephemeral port is known before serving (grpclib does not report it back).
    # proto=IPPROTO_TCP matters: asyncio only sets TCP_NODELAY on sockets that say they are TCP, and
    # without it every unary call waits ~40 ms for a delayed ACK.
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((settings.host, settings.port))
    port: int = sock.getsockname()[1]
    await server.start(sock=sock, ssl=tls)
    return RunnerHandle(settings.host, port, token, runner, servicer, server, client, executor, endpoint, tmp)


def _tls_context(settings: RunnerSettings) -> ssl.SSLContext | None:
    if settings.tls_cert is None and settings.tls_key is None:
        return None
    if settings.tls_cert is None or settings.tls_key is None:
        raise ValueError("TLS needs both --tls-cert and --tls-key")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(settings.tls_cert, settings.tls_key)
    context.set_alpn_protocols(["h2"])
    return context
