"""Start a trial's tool servers (TaskDescription.tool_servers) and add their tools to its registries.

Either every server starts and every tool is registered, or every server already started is
stopped again and registration fails: a half-started trial never keeps a child process.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tolokaforge.core.models import ToolServer

from ..errors import ToolLoadError
from ..process.cgroups import TrialCgroup
from ..process.confinement import Confinement, View
from ..process.sandbox import Limits, scrubbed_env
from ..process.supervisor import confined_launch
from .base import ToolRegistry, compile_parameters
from .mcp_tools import McpSource
from .provider_tools import ProviderSource
from .remote import RemoteTool, ToolSourceSession

__all__ = ["AGENT_VISIBLE_ROOT", "RELAY_PORT", "ServerPlaces", "start_tool_servers"]

RELAY_PORT = 8765
"""The loopback port a sandboxed MCP server finds its trial's tables on (its own network namespace's)."""
AGENT_VISIBLE_ROOT = "/env/fs/agent-visible"
"""Where public packs' commands name the workspace (``cat /env/fs/agent-visible/x``): in the sandbox
the workspace is bound there too, so a ``bash`` command sees it under both paths."""


@dataclass(frozen=True)
class ServerPlaces:
    """Where a trial's servers run and what they are told."""

    trial_id: str
    workspace: Path
    """The trial's own directory: providers work inside it."""
    code_root: Path | None
    log_dir: Path
    trial_url: Callable[[], Awaitable[str]]
    """A capability URL of the runner's state gateway opening this trial alone, for unsandboxed MCP
    servers (state_gateway.py)."""
    limits: Limits = field(default_factory=lambda: Limits(network=True))
    """Servers keep the network: they speak to the runner (providers) or the DB service (MCP) over TCP."""
    confinement: Confinement = field(default_factory=Confinement.process)
    cgroup: TrialCgroup | None = None
    state_socket: Callable[[], Awaitable[Path]] | None = None
    """The trial's socket on the runner's state gateway (state_gateway.py), for sandboxed MCP servers."""

    def view(self, cwd: Path, also_at: str | None = None) -> View:
        """A server sees the trial's workspace (read-write, also at :data:`AGENT_VISIBLE_ROOT` and at
        ``also_at``) and the task's code (read-only)."""
        read = (self.code_root,) if self.code_root is not None else ()
        binds = ((self.workspace, AGENT_VISIBLE_ROOT),)
        if also_at is not None:
            binds = (*binds, (self.workspace, also_at))
        return View(cwd=cwd, write=(self.workspace,), read=read, cgroup=self.cgroup, binds=binds)


async def start_tool_servers(
    servers: Sequence[ToolServer], places: ServerPlaces, registries: dict[str, ToolRegistry]
) -> list[ToolSourceSession]:
    """Start every server, register its tools; returns the sources (the trial must clean them up)."""
    started: list[ToolSourceSession] = []
    try:
        for server in servers:
            source = await _make_source(server, places)
            started.append(source)
            operations = await source.setup()
            offered = {description.name for _, description in operations}
            for name in server.enabled or ():
                if name not in offered:
                    raise ToolLoadError(
                        f"tool server {server.name!r} offers no tool {name!r} ({', '.join(sorted(offered))})"
                    )
            for spec, description in operations:
                if server.enabled is not None and description.name not in server.enabled:
                    continue
                named = description.model_copy(
                    update={
                        "name": server.prefix + description.name,
                        "timeout_s": description.timeout_s or server.timeout_s,
                    }
                )
                registries[server.actor].add(
                    RemoteTool(
                        description=named, validator=compile_parameters(named), spec=spec, source=source
                    )
                )
    except BaseException:
        for source in started:
            await source.cleanup()
        raise
    return started


async def _make_source(server: ToolServer, places: ServerPlaces) -> ToolSourceSession:
    cwd = places.code_root or places.workspace
    if server.script is not None:
        if places.code_root is None:
            raise ToolLoadError(f"tool server {server.name!r}: a script needs the task's tool code")
        script = (places.code_root / server.script).resolve()
        if not script.is_relative_to(places.code_root.resolve()) or not script.is_file():
            raise ToolLoadError(
                f"tool server {server.name!r}: script {server.script!r} not found in the task's code"
            )
        argv = [sys.executable, str(script)]
    else:
        assert server.command is not None
        argv = list(server.command)
    safe_id = places.trial_id.replace("/", "_").replace(":", "_")
    sandboxed = places.confinement.sandboxed
    # Sandboxed servers have no network: a provider listens on a unix socket the runner gives it, an
    # MCP server reaches its trial's tables through a relay to the trial's own gateway socket.
    limits = places.limits.replace(network=False) if sandboxed else places.limits
    if server.protocol == "provider":
        mount = server.workspace_mount
        if mount is not None and not sandboxed:
            raise ToolLoadError(
                f"tool server {server.name!r} works in the workspace at {mount}, which only the sandbox "
                "can give it: run with --isolation sandbox"
            )
        if mount is not None and places.confinement.shadows(mount):
            raise ToolLoadError(
                f"tool server {server.name!r}: a workspace at {mount} would hide the system or the Python "
                "environment on this machine"
            )
        return ProviderSource(
            server.name,
            argv,
            cwd=cwd,
            env=server.env,
            config=server.config,
            limits=limits,
            confinement=places.confinement,
            view=places.view(cwd, also_at=mount),
            enabled=server.enabled,
            workspace_path=mount,
        )
    view = places.view(cwd)
    if sandboxed and places.state_socket is not None:
        socket_path = await places.state_socket()
        view = dataclasses.replace(
            view, write=(*view.write, socket_path.parent), relay=(RELAY_PORT, socket_path)
        )
        db_url = f"http://127.0.0.1:{RELAY_PORT}"
    else:
        db_url = await places.trial_url()
    env = {
        **server.env,
        "TOLOKAFORGE_DB_URL": db_url,
        "TOLOKAFORGE_TRIAL_ID": places.trial_id,
    }
    places.log_dir.mkdir(parents=True, exist_ok=True)
    log_path = places.log_dir / f"{safe_id}.{server.name}.log"
    scrubbed = scrubbed_env(env, home=str(places.workspace))
    try:
        launch = confined_launch(places.confinement, limits, argv, scrubbed, view)
    except FileNotFoundError as error:
        raise ToolLoadError(
            f"tool server {server.name!r}: cannot start {argv[0]!r}: {error.strerror}"
        ) from error
    return McpSource(server.name, argv, cwd=cwd, env=scrubbed, log_path=log_path, launch=launch)
