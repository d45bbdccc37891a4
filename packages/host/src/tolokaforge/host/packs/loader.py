"""Load a task pack (docs/pack-format.md) into TaskDescriptions, collecting every problem at once.

``load_pack(path)`` returns a :class:`Pack` or raises :class:`PackLoadError` listing each problem
with its file and key. ``inspect_pack(path)`` never raises for the pack's content: it returns a
:class:`PackReport` holding the tasks that loaded and, per task that did not, that task's problems (what
a per-task checker such as the pytest plugin needs). ``path`` may be the pack root or its ``tasks/`` folder. Per task: pack.yaml
``defaults`` are merged in key by key (the task wins), referenced files resolve from the task's folder
first and then the pack root, tools come from the pack's python module (imported in isolation, see
tool_module.py) and grading.yaml is translated to the runner's GradingConfig.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

import yaml
from pydantic import BaseModel, ValidationError

from tolokaforge.core.models import (
    InitialState,
    TaskDescription,
    ToolCode,
    ToolDescription,
    ToolServer,
    UserSimulatorConfig,
    describe_validation_error,
)

from ..errors import PackLoadError, PackProblem
from .files import GradingFile, PackFile, TaskFile
from .grading import to_grading_config
from .tool_module import PackTool, ToolModuleError, bundle_files, import_tool_module

__all__ = ["BrokenTask", "LoadedTask", "Pack", "PackReport", "inspect_pack", "load_pack", "resolve_pack_root"]

_M = TypeVar("_M", bound=BaseModel)
_TEXT_SUFFIXES = (".md", ".txt", ".markdown", ".rst")


@dataclass(frozen=True)
class LoadedTask:
    """One task of a pack: the runner's TaskDescription plus where it came from."""

    task: TaskDescription
    task_file: Path

    @property
    def task_id(self) -> str:
        return self.task.task_id


@dataclass(frozen=True)
class Pack:
    root: Path
    name: str
    version: str
    tasks: tuple[LoadedTask, ...]
    tool_code: ToolCode | None

    def task(self, task_id: str) -> LoadedTask:
        for loaded in self.tasks:
            if loaded.task_id == task_id:
                return loaded
        raise KeyError(task_id)


@dataclass(frozen=True)
class BrokenTask:
    """A task that did not load: its file, its id (the folder name when task.yaml gives none) and why."""

    task_file: Path
    task_id: str
    problems: tuple[PackProblem, ...]


@dataclass(frozen=True)
class PackReport:
    """What :func:`inspect_pack` found: the loadable part of the pack and every problem, by task."""

    pack: Pack
    """The pack with only the tasks that loaded."""
    broken: tuple[BrokenTask, ...]
    pack_problems: tuple[PackProblem, ...]
    """Problems of the pack as a whole (pack.yaml, a missing tasks/ folder), not of one task."""

    @property
    def problems(self) -> tuple[PackProblem, ...]:
        return self.pack_problems + tuple(p for task in self.broken for p in task.problems)


def resolve_pack_root(path: Path) -> Path:
    """The pack root for a ``--pack`` value: the folder itself, or the parent of a ``tasks/`` folder."""
    path = path.resolve()
    if path.name == "tasks" and not (path / "pack.yaml").exists() and not (path / "tasks").is_dir():
        return path.parent
    return path


@dataclass
class _Loader:
    root: Path
    problems: list[PackProblem] = field(default_factory=list[PackProblem])
    defaults: dict[str, Any] = field(default_factory=dict[str, Any])
    _modules: dict[str, dict[str, PackTool] | None] = field(
        default_factory=dict[str, "dict[str, PackTool] | None"]
    )
    _module_errors: dict[str, str] = field(default_factory=dict[str, str])
    per_task: bool = False
    """Report a failed tool import on every task that uses the module, not only the first."""
    check_golden_names: bool = True

    def problem(self, file: Path, key: str, message: str) -> None:
        self.problems.append(PackProblem(self.show(file), key, message))

    def show(self, file: Path) -> Path:
        try:
            return file.relative_to(self.root.parent)
        except ValueError:
            return file

    def read_yaml(self, file: Path) -> dict[str, Any] | None:
        try:
            loaded = yaml.safe_load(file.read_text(encoding="utf-8"))
        except OSError as error:
            self.problem(file, "", f"cannot be read: {error.strerror or error}")
            return None
        except yaml.YAMLError as error:
            self.problem(file, "", f"is not valid YAML: {' '.join(str(error).split())}")
            return None
        if loaded is None:
            return {}
        if not isinstance(loaded, dict):
            self.problem(file, "", f"must be a mapping, got {type(loaded).__name__}")
            return None
        return cast(dict[str, Any], loaded)

    def validate(
        self,
        model: type[_M],
        data: dict[str, Any],
        file: Path,
        *,
        key_file: Callable[[str], tuple[Path, str]],
    ) -> _M | None:
        try:
            return model.model_validate(data)
        except ValidationError as error:
            for item in error.errors(include_url=False):
                loc = [str(part) for part in item["loc"]]
                top = loc[0] if loc else ""
                where_file, prefix = key_file(top)
                key = ".".join([prefix, *loc] if prefix else loc)
                message = item["msg"]
                if item["type"] == "extra_forbidden":
                    message = f"unknown key {loc[-1]!r} (not part of the schema)"
                elif item["type"] in ("literal_error", "enum"):
                    message = f"{message}, got {item['input']!r}"
                self.problem(where_file, key, message)
            return None

    def resolve(self, relative: str, folder: Path) -> Path | None:
        for base in (folder, self.root):
            candidate = (base / relative).resolve()
            if candidate.exists():
                return candidate
        return None

    def tools(self, module_path: str, file: Path, key: str) -> dict[str, PackTool] | None:
        if module_path not in self._modules:
            try:
                self._modules[module_path] = import_tool_module(self.root, module_path)
            except ToolModuleError as error:
                self._modules[module_path] = None
                self._module_errors[module_path] = str(error)
                self.problem(file, key, str(error))
        elif self._modules[module_path] is None and self.per_task:
            self.problem(file, key, self._module_errors[module_path])
        return self._modules[module_path]


def load_pack(path: Path) -> Pack:
    """Load the pack at ``path``; raises PackLoadError naming every problem found."""
    report = _inspect(path, _Loader(resolve_pack_root(path)))
    if report.problems:
        raise PackLoadError(report.problems)
    return report.pack


def inspect_pack(path: Path, *, check_golden_names: bool = True) -> PackReport:
    """Load what loads of the pack at ``path`` and report the rest per task; never raises for content.

    ``check_golden_names=False`` leaves golden-action names unchecked here, for a caller that checks
    them against the tools a runner actually registers.
    """
    loader = _Loader(resolve_pack_root(path), per_task=True, check_golden_names=check_golden_names)
    return _inspect(path, loader)


def _inspect(path: Path, loader: _Loader) -> PackReport:
    root = loader.root
    if not root.is_dir():
        empty = Pack(root=root, name=root.name, version="", tasks=(), tool_code=None)
        return PackReport(empty, (), (PackProblem(path, "", "is not a directory"),))
    pack_file = root / "pack.yaml"
    config = PackFile()
    if pack_file.exists():
        raw = loader.read_yaml(pack_file)
        if raw is not None:
            config = loader.validate(PackFile, raw, pack_file, key_file=lambda _: (pack_file, "")) or config
    loader.defaults = dict(config.defaults)
    tasks_dir = root / "tasks"
    task_files = sorted(tasks_dir.rglob("task.yaml")) if tasks_dir.is_dir() else []
    if not task_files:
        loader.problem(
            tasks_dir, "", "holds no task.yaml (a pack keeps its tasks under tasks/<task>/task.yaml)"
        )
    pack_problems = list(loader.problems)
    code = bundle_files(root) if task_files else None
    tasks: list[LoadedTask] = []
    broken: list[BrokenTask] = []
    seen: dict[str, Path] = {}
    for task_file in task_files:
        before = len(loader.problems)
        loaded = _load_task(loader, task_file, pack_file, code)
        if loaded is not None and loaded.task_id in seen:
            loader.problem(
                task_file,
                "task_id",
                f"{loaded.task_id!r} is also the task_id of {loader.show(seen[loaded.task_id])}",
            )
        elif loaded is not None:
            seen[loaded.task_id] = task_file
            tasks.append(loaded)
        if len(loader.problems) > before:
            task_id = loaded.task_id if loaded is not None else _raw_task_id(task_file)
            broken.append(BrokenTask(task_file, task_id, tuple(loader.problems[before:])))
    pack = Pack(
        root=root,
        name=config.name or root.name,
        version=config.version or "",
        tasks=tuple(tasks),
        tool_code=code,
    )
    return PackReport(pack, tuple(broken), tuple(pack_problems))


def _raw_task_id(task_file: Path) -> str:
    """The task_id a task.yaml states, when it can be read; else its folder's name."""
    try:
        raw = yaml.safe_load(task_file.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return task_file.parent.name
    value = cast(dict[str, Any], raw).get("task_id") if isinstance(raw, dict) else None
    return value if isinstance(value, str) and value else task_file.parent.name


def _load_task(loader: _Loader, task_file: Path, pack_file: Path, code: ToolCode | None) -> LoadedTask | None:
    raw = loader.read_yaml(task_file)
    if raw is None:
        return None
    merged = {**loader.defaults, **raw}

    def key_file(top: str) -> tuple[Path, str]:
        # A bad key that came from pack.yaml defaults is reported where the author wrote it.
        if top and top not in raw and top in loader.defaults:
            return pack_file, "defaults"
        return task_file, ""

    spec = loader.validate(TaskFile, merged, task_file, key_file=key_file)
    if spec is None:
        return None
    folder = task_file.parent
    problems_before = len(loader.problems)

    system_prompt = _text_or_file(loader, spec.system_prompt, folder, task_file, "system_prompt")
    initial_state = _initial_state(loader, spec, folder, task_file)
    agent_tools, user_tools = _tools(loader, spec, task_file)
    tool_servers = _tool_servers(loader, spec, task_file)
    grading_file, grading_path = _grading(loader, spec, folder, task_file)
    grading = None
    golden_response = None
    if grading_file is not None:
        golden_response = grading_file.golden_response
        checks_path = None
        if grading_file.custom_checks is not None:
            found = loader.resolve(grading_file.custom_checks.file, folder)
            if found is None:
                loader.problem(
                    grading_path, "custom_checks.file", f"file {grading_file.custom_checks.file!r} not found"
                )
            elif not found.is_relative_to(loader.root):
                loader.problem(grading_path, "custom_checks.file", "must lie inside the pack")
            else:
                checks_path = found.relative_to(loader.root).as_posix()
        if loader.check_golden_names and not tool_servers:
            # A server's tools are known only once it runs: the runner resolves those names at grading.
            _check_golden_names(loader, grading_file, agent_tools, grading_path)
        try:
            grading = to_grading_config(grading_file, custom_checks_path=checks_path)
        except ValidationError as error:
            loader.problem(grading_path, "", describe_validation_error(error))
    if len(loader.problems) > problems_before or grading is None or initial_state is None:
        return None
    simulator = None
    if spec.user_simulator is not None:
        simulator = UserSimulatorConfig(
            mode=spec.user_simulator.mode,
            persona=spec.user_simulator.persona,
            backstory=spec.user_simulator.backstory,
            scripted_flow=[turn.model_dump() for turn in spec.user_simulator.scripted_flow],
        )
    try:
        task = TaskDescription(
            task_id=spec.task_id,
            name=spec.name,
            category=spec.category,
            description=spec.description,
            system_prompt=system_prompt,
            initial_user_message=spec.initial_user_message,
            max_turns=spec.max_turns,
            agent_tools=agent_tools,
            user_tools=user_tools,
            tool_code=code if (agent_tools or user_tools or tool_servers) else None,
            tool_servers=tool_servers,
            initial_state=initial_state,
            grading=grading,
            user_simulator=simulator,
            policies=spec.policies,
            golden_response=golden_response,
        )
    except ValidationError as error:
        loader.problem(task_file, "", describe_validation_error(error))
        return None
    return LoadedTask(task=task, task_file=task_file)


def _text_or_file(loader: _Loader, value: str, folder: Path, file: Path, key: str) -> str:
    """A value naming a file (one line ending in a text suffix, or an existing path) is that file's text."""
    if not value or "\n" in value:
        return value
    found = loader.resolve(value, folder)
    if found is not None and found.is_file():
        return found.read_text(encoding="utf-8")
    if value.strip().lower().endswith(_TEXT_SUFFIXES):
        loader.problem(
            file, key, f"file {value!r} not found (looked in {loader.show(folder)} and the pack root)"
        )
    return value


def _initial_state(loader: _Loader, spec: TaskFile, folder: Path, file: Path) -> InitialState | None:
    block = spec.initial_state
    tables: dict[str, Any] = dict(block.tables or {})
    if block.json_db is not None:
        if block.tables is not None:
            loader.problem(file, "initial_state", "give json_db or tables, not both")
            return None
        found = loader.resolve(block.json_db, folder)
        if found is None:
            loader.problem(file, "initial_state.json_db", f"file {block.json_db!r} not found")
            return None
        try:
            loaded = json.loads(found.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            loader.problem(file, "initial_state.json_db", f"{block.json_db}: not readable JSON: {error}")
            return None
        if not isinstance(loaded, dict):
            loader.problem(file, "initial_state.json_db", f"{block.json_db}: must be an object of tables")
            return None
        tables = cast(dict[str, Any], loaded)
    try:
        return InitialState.model_validate(
            {
                "tables": tables,
                "unstable_fields": block.unstable_fields,
                "initialization_actions": block.initialization_actions,
            }
        )
    except ValidationError as error:
        loader.problem(file, "initial_state", describe_validation_error(error))
        return None


def _tool_servers(loader: _Loader, spec: TaskFile, file: Path) -> list[ToolServer]:
    """``tools.agent.mcp_server``: one stdio MCP server per trial, run by the runner from the pack's code.

    The script travels in the pack's code bundle, so it must live inside the pack; its tools are the
    ones the server lists (``tools.agent.enabled`` picks some when the task has no python module).
    """
    agent = spec.tools.agent if spec.tools is not None else None
    if agent is None or agent.mcp_server is None:
        return []
    found = loader.resolve(agent.mcp_server, file.parent)
    if found is None or not found.is_file():
        loader.problem(file, "tools.agent.mcp_server", f"file {agent.mcp_server!r} not found")
        return []
    if not found.is_relative_to(loader.root) or found.suffix != ".py":
        loader.problem(
            file, "tools.agent.mcp_server", "must be a .py file inside the pack (it ships with its code)"
        )
        return []
    enabled = agent.enabled if agent.python is None else None
    return [
        ToolServer(
            name="mcp",
            protocol="mcp",
            script=found.relative_to(loader.root).as_posix(),
            actor="agent",
            enabled=enabled,
        )
    ]


def _tools(
    loader: _Loader, spec: TaskFile, file: Path
) -> tuple[list[ToolDescription], list[ToolDescription]]:
    tools = spec.tools
    if tools is None or tools.agent is None:
        if tools is not None and tools.user is not None and tools.user.enabled:
            loader.problem(
                file, "tools.user.enabled", "user tools need tools.agent.python (the module they live in)"
            )
        return [], []
    if tools.agent.python is None:
        return [], []
    module = loader.tools(tools.agent.python, file, "tools.agent.python")
    if module is None:
        return [], []
    if tools.agent.enabled is None:
        agent_names = [name for name, tool in module.items() if tool.side != "user"]
    else:
        agent_names = tools.agent.enabled
    user_names = tools.user.enabled if tools.user is not None else []
    picked: dict[str, list[ToolDescription]] = {"agent": [], "user": []}
    for side, names, key in (
        ("agent", agent_names, "tools.agent.enabled"),
        ("user", user_names, "tools.user.enabled"),
    ):
        for index, name in enumerate(names):
            tool = module.get(name)
            if tool is None:
                loader.problem(
                    file,
                    f"{key}[{index}]",
                    f"no tool {name!r} in {tools.agent.python!r} ({', '.join(module)})",
                )
            elif tool.side is not None and tool.side != side:
                loader.problem(file, f"{key}[{index}]", f"tool {name!r} is a {tool.side}-side tool")
            else:
                picked[side].append(tool.description)
    return picked["agent"], picked["user"]


def _grading(loader: _Loader, spec: TaskFile, folder: Path, file: Path) -> tuple[GradingFile | None, Path]:
    if spec.grading is None:
        loader.problem(file, "grading", "is required (a grading.yaml file or an inline block)")
        return None, file
    if isinstance(spec.grading, GradingFile):
        return spec.grading, file
    found = loader.resolve(spec.grading, folder)
    if found is None:
        loader.problem(file, "grading", f"file {spec.grading!r} not found")
        return None, file
    raw = loader.read_yaml(found)
    if raw is None:
        return None, found
    return loader.validate(GradingFile, raw, found, key_file=lambda _: (found, "")), found


def _check_golden_names(
    loader: _Loader, grading: GradingFile, agent_tools: list[ToolDescription], file: Path
) -> None:
    """Golden actions must resolve as the runner resolves them: exactly, or by one ``…_<name>`` suffix."""
    hash_block = grading.state_checks.hash if grading.state_checks else None
    if hash_block is None or not agent_tools:
        return
    names = [tool.name for tool in agent_tools]
    for index, action in enumerate(hash_block.golden_actions):
        if action.name not in names and len([n for n in names if n.endswith(f"_{action.name}")]) != 1:
            loader.problem(
                file,
                f"state_checks.hash.golden_actions[{index}].name",
                f"{action.name!r} is not one of the task's agent tools",
            )
