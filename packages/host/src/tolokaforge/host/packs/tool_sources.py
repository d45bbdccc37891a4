"""Stage three of loading a task: its tools, imported from the pack's python module or served by MCP.

``tools.agent.python`` is a dotted module path resolved like every other path of a task: from the
task's folder first, then the pack root. Each module is imported once per load (tool_module.py
imports it in isolation); a module that fails to import is reported on every task that names it
when the caller asks for per-task reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tolokaforge.core.models import ToolDescription, ToolServer

from .browser_block import REFUSED_TOOLS, RUNNER_TOOLS
from .builtin_tools import SHIPPED_PACKAGE, SHIPPED_TOOLS, shipped_tools
from .files import TaskFile
from .problems import ProblemLog
from .services import SERVICE_TOOLS
from .task_parts import resolve
from .tool_module import PackTool, ToolModuleError, describe_tool_module, is_module_shaped

__all__ = [
    "BUILTIN_TOOLS",
    "ToolImporter",
    "builtin_tool_servers",
    "module_shaped_tools",
    "python_tools",
    "tool_servers",
]


@dataclass
class ToolImporter:
    log: ProblemLog
    per_task: bool = False
    """Report a failed import on every task that uses the module, not only the first."""
    _modules: dict[str, dict[str, PackTool] | None] = field(
        default_factory=dict[str, "dict[str, PackTool] | None"]
    )
    _errors: dict[str, str] = field(default_factory=dict[str, str])

    def module_path(self, written: str, folder: Path) -> str:
        """The dotted path, relative to the pack root, of the module ``written`` names from ``folder``."""
        relative = Path(*written.split("."))
        for candidate in (folder / relative, self.log.root / relative):
            if candidate.with_suffix(".py").is_file() or candidate.is_dir():
                inside = candidate.resolve().relative_to(self.log.root.resolve())
                return ".".join(inside.parts)
        return written

    def tools(self, written: str, folder: Path, file: Path, key: str) -> dict[str, PackTool] | None:
        module_path = self.module_path(written, folder)
        if module_path not in self._modules:
            try:
                self._modules[module_path] = describe_tool_module(module_path)
            except ToolModuleError as error:
                self._modules[module_path] = None
                self._errors[module_path] = str(error)
                self.log.add(file, key, str(error))
        elif self._modules[module_path] is None and self.per_task:
            self.log.add(file, key, self._errors[module_path])
        return self._modules[module_path]


def python_tools(
    importer: ToolImporter, spec: TaskFile, file: Path
) -> tuple[list[ToolDescription], list[ToolDescription]]:
    """The agent's and the user's tools from ``tools.agent.python``, as ``enabled`` picks them."""
    log = importer.log
    tools = spec.tools
    agent = tools.agent if tools is not None else None
    user_names = tools.user.enabled if tools is not None and tools.user is not None else []
    if agent is None or agent.python is None:
        if user_names and (agent is None or agent.mcp_server is None):
            log.add(
                file, "tools.user.enabled", "user tools need tools.agent.python (the module they live in)"
            )
        unprovided = (
            [n for n in agent.enabled or () if n not in BUILTIN_TOOLS and n not in REFUSED_TOOLS]
            if agent is not None
            else []
        )
        if agent is not None and agent.mcp_server is None and unprovided:
            log.add(
                file,
                "tools.agent.enabled",
                f"no tool source provides {', '.join(map(repr, unprovided))}: give tools.agent.python or "
                f"tools.agent.mcp_server (the built-in tools are {', '.join(BUILTIN_TOOLS)})",
            )
        if agent is not None and agent.mcp_server is None:
            shipped = shipped_tools(agent.enabled or [])
            if shipped and (log.root / SHIPPED_PACKAGE).exists():
                reserved = f"{SHIPPED_PACKAGE}/ in the pack is reserved for built-in tools"
                log.add(file, "tools.agent.enabled", reserved)
            return shipped, []
        return [], []
    module = importer.tools(agent.python, file.parent, file, "tools.agent.python")
    return _pick(log, module, agent.python, agent.enabled, user_names, file)


def module_shaped_tools(
    importer: ToolImporter, spec: TaskFile, file: Path, module_path: str
) -> tuple[list[ToolDescription], list[ToolDescription]]:
    """The tools of a module-shaped ``mcp_server`` file, loaded as python tools."""
    tools = spec.tools
    assert tools is not None and tools.agent is not None
    user_names = tools.user.enabled if tools.user is not None else []
    module = importer.tools(module_path, importer.log.root, file, "tools.agent.mcp_server")
    return _pick(importer.log, module, module_path, tools.agent.enabled, user_names, file)


def _pick(
    log: ProblemLog,
    module: dict[str, PackTool] | None,
    written: str,
    enabled: list[str] | None,
    user_names: list[str],
    file: Path,
) -> tuple[list[ToolDescription], list[ToolDescription]]:
    if module is None:
        return [], []
    if enabled is None:
        agent_names = [name for name, tool in module.items() if tool.side != "user"]
    else:
        agent_names = enabled
    picked: dict[str, list[ToolDescription]] = {"agent": [], "user": []}
    for side, names, key in (
        ("agent", agent_names, "tools.agent.enabled"),
        ("user", user_names, "tools.user.enabled"),
    ):
        for index, name in enumerate(names):
            tool = module.get(name)
            if tool is None and side == "agent" and name in (*SERVICE_TOOLS, *RUNNER_TOOLS, *REFUSED_TOOLS):
                continue  # a built-in served elsewhere (services.py, browser_block.py), or refused there
            if tool is None:
                log.add(file, f"{key}[{index}]", f"no tool {name!r} in {written!r} ({', '.join(module)})")
            elif tool.side is not None and tool.side != side:
                log.add(file, f"{key}[{index}]", f"tool {name!r} is a {tool.side}-side tool")
            else:
                picked[side].append(tool.description)
    return picked["agent"], picked["user"]


def tool_servers(importer: ToolImporter, spec: TaskFile, file: Path) -> list[ToolServer] | str:
    """``tools.agent.mcp_server``: one stdio MCP server per trial, run by the runner from the pack's code.

    The script travels in the pack's code bundle, so it must live inside the pack; its tools are the
    ones the server lists (``tools.agent.enabled`` picks some when the task has no python module).
    A module-shaped file (``TOOLS`` dict and ``invoke_tool``, no server) is not run: its dotted module
    path is returned instead, for its tools to load as python tools.
    """
    log = importer.log
    agent = spec.tools.agent if spec.tools is not None else None
    if agent is not None and agent.python is None and agent.mcp_server is None and agent.enabled:
        return _builtin_tools(agent.enabled)
    if agent is None or agent.mcp_server is None:
        return []
    found = resolve(log.root, agent.mcp_server, file.parent)
    if found is None or not found.is_file():
        log.add(file, "tools.agent.mcp_server", f"file {agent.mcp_server!r} not found")
        return []
    if not found.is_relative_to(log.root.resolve()) or found.suffix != ".py":
        log.add(file, "tools.agent.mcp_server", "must be a .py file inside the pack (it ships with its code)")
        return []
    relative = found.relative_to(log.root.resolve())
    module_path = ".".join(relative.with_suffix("").parts)
    if agent.python is None:
        try:
            if is_module_shaped(module_path):
                return module_path
        except ToolModuleError as error:
            log.add(file, "tools.agent.mcp_server", str(error))
            return []
    if spec.tools is not None and spec.tools.user is not None and spec.tools.user.enabled:
        log.add(
            file, "tools.user.enabled", "an MCP server serves the agent only; user tools need a python module"
        )
    return [
        ToolServer(
            name="mcp",
            protocol="mcp",
            script=found.relative_to(log.root.resolve()).as_posix(),
            actor="agent",
            # those are ours (services.py, browser_block.py)
            enabled=[n for n in agent.enabled if n not in (*SERVICE_TOOLS, *RUNNER_TOOLS, *REFUSED_TOOLS)]
            if agent.python is None and agent.enabled is not None
            else None,
        )
    ]


_PROVIDERS = {"files": ["tolokaforge-tool-provider-fs"], "exec": ["tolokaforge-tool-provider-exec"]}
_BUILTINS = {
    "read_file": "files",
    "write_file": "files",
    "list_dir": "files",
    "append_file": "files",
    "copy_file": "files",
    "move_file": "files",
    "delete_file": "files",
    "grep_workspace": "files",
    "replace_lines": "files",
    "calculator": "exec",
    "bash": "exec",
}
# The database tools are python tool code of ours (builtin_tools.py), not a provider.
_BUILTINS.update(dict.fromkeys(SHIPPED_TOOLS, "shipped"))
# search_kb, http_request: python tool code of ours over the task's rag / mock_web (services.py)
_BUILTINS.update(dict.fromkeys(SERVICE_TOOLS, "shipped"))
# browser: served by the runner itself on the task's BrowserSettings (browser_block.py)
_BUILTINS.update(dict.fromkeys(RUNNER_TOOLS, "runner"))
BUILTIN_TOOLS = tuple(_BUILTINS)
"""Tools public packs enable by name with no source of their own, served by our providers: the file
tools (fs provider, over the trial's workspace), a calculator and ``bash`` (exec provider; bash is one
persistent shell per trial in the trial's sandbox), and ``browser`` (the runner's own)."""


def builtin_tool_servers(enabled: list[str]) -> list[ToolServer]:
    """The provider servers that serve the built-in tools named in ``enabled`` (a terminal task's bash)."""
    return _builtin_tools(enabled)


def _builtin_tools(enabled: list[str]) -> list[ToolServer]:
    servers: list[ToolServer] = []
    for server, command in _PROVIDERS.items():
        names = [name for name in enabled if _BUILTINS.get(name) == server]
        if names:
            servers.append(ToolServer(name=server, protocol="provider", command=command, enabled=names))
    return servers
