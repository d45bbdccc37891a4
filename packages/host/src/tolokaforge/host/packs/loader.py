"""Load a task pack (docs/pack-format.md) into TaskDescriptions, collecting every problem at once.

``load_pack(path)`` returns a :class:`Pack` or raises :class:`PackLoadError` listing each problem
with its file and key. ``inspect_pack(path)`` never raises for the pack's content: it returns a
:class:`PackReport` holding the tasks that loaded and, per task that did not, that task's problems (what
a per-task checker such as the pytest plugin needs). ``path`` may be the pack root or its ``tasks/``
folder.

This module only orders the stages, each in its own module: read YAML and collect problems
(problems.py), resolve the files a task names (task_parts.py), import its tools (tool_sources.py),
translate its grading (grading.py). Every stage runs even when an earlier one found problems, so one
pass reports everything wrong with a task.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, cast

import yaml
from pydantic import ValidationError

from tolokaforge.core.models import TaskDescription, ToolCode, ToolDescription, describe_validation_error

from ..errors import PackLoadError, PackProblem
from .adapter_keys import check_adapter_keys
from .browser_block import browser_schema_tool, browser_settings
from .builtin_tools import with_shipped_code
from .code_probe import CodeProbe, Isolation, probing
from .files import GradingFile, PackFile, TaskFile
from .grading import to_grading_config
from .inline_workspace import inline_workspace_files, with_inline_files
from .pack import BrokenTask, LoadedTask, Pack, PackReport
from .problems import ProblemLog
from .requirements import check_requirements
from .selection import path_hint
from .services import PackServices
from .task_parts import initial_state, policy_text, resolve, text_or_file, user_simulator
from .tau2 import inspect_tau2_pack, is_tau2_source, load_tau2_pack
from .terminal import inspect_terminal_pack, is_terminal_source, load_terminal_pack
from .tool_module import bundle_files
from .tool_sources import ToolImporter, module_shaped_tools, python_tools, tool_servers
from .web_checks import check_web_checks_browser

__all__ = [
    "DEFAULT_TASKS_GLOB",
    "BrokenTask",
    "LoadedTask",
    "Pack",
    "PackReport",
    "inspect_pack",
    "load_pack",
    "resolve_pack_root",
]

DEFAULT_TASKS_GLOB = "**/task.yaml"
"""How tasks are found, as in the public project: every task.yaml below the pack's tasks folder."""


def resolve_pack_root(path: Path) -> Path:
    """The pack root for a ``--pack`` value: the folder itself, or the parent of a ``tasks/`` folder."""
    path = path.resolve()
    if path.name == "tasks" and not (path / "pack.yaml").exists() and not (path / "tasks").is_dir():
        return path.parent
    return path


def load_pack(
    path: Path,
    *,
    split: str | None = None,
    tasks_glob: str = DEFAULT_TASKS_GLOB,
    isolation: Isolation = "sandbox",
    sandbox_without: Iterable[str] = (),
) -> Pack:
    """Load the pack at ``path`` (or ``tau2:<domain>``); raises PackLoadError naming every problem found.

    ``split`` picks a τ² task split (docs/tau2.md); a pack folder has none. ``tasks_glob`` (a
    run_config.yaml's ``evaluation.tasks_glob``) finds the task files; a glob other than the default is
    relative to the pack root, as in the public project. ``isolation`` / ``sandbox_without``: how the
    pack's code is confined while the loader reads what it declares (code_probe.py), as for a runner.
    """
    if is_tau2_source(path):
        return load_tau2_pack(str(path), split=split)
    if split is None and is_terminal_source(path):
        return load_terminal_pack(path)
    if split is not None:
        raise PackLoadError([PackProblem(path, "--split", "task splits exist only for tau2: packs")])
    load = _Load(
        resolve_pack_root(path), tasks_glob=tasks_glob, isolation=isolation, without=tuple(sandbox_without)
    )
    report = _inspect(path, load)
    if report.problems:
        raise PackLoadError(report.problems)
    return report.pack


def inspect_pack(
    path: Path,
    *,
    check_golden_names: bool = True,
    isolation: Isolation = "sandbox",
    sandbox_without: Iterable[str] = (),
) -> PackReport:
    """Load what loads of the pack at ``path`` and report the rest per task; never raises for content.

    ``check_golden_names=False`` leaves golden-action names unchecked here, for a caller that checks
    them against the tools a runner actually registers. ``isolation`` / ``sandbox_without``: as for
    :func:`load_pack`.
    """
    if is_tau2_source(path):
        return inspect_tau2_pack(str(path))
    if is_terminal_source(path):
        return inspect_terminal_pack(path)
    load = _Load(
        resolve_pack_root(path),
        per_task=True,
        check_golden_names=check_golden_names,
        isolation=isolation,
        without=tuple(sandbox_without),
    )
    return _inspect(path, load)


class _Load:
    """The state one load shares between its stages."""

    def __init__(
        self,
        root: Path,
        *,
        per_task: bool = False,
        check_golden_names: bool = True,
        tasks_glob: str = DEFAULT_TASKS_GLOB,
        isolation: Isolation = "sandbox",
        without: tuple[str, ...] = (),
    ) -> None:
        self.log = ProblemLog(root)
        self.isolation: Isolation = isolation
        self.without = without
        self.tasks_glob = tasks_glob
        self.importer = ToolImporter(self.log, per_task=per_task)
        self.services = PackServices(self.log)
        self.check_golden_names = check_golden_names
        self.json_dbs: dict[Path, dict[str, Any]] = {}
        """Each ``json_db`` file parsed once: the tasks naming one file share its table objects, which is
        how a runner knows them for the same tables without reading them (runner trials/task_cache.py)."""
        self.defaults: dict[str, Any] = {}

    @property
    def root(self) -> Path:
        return self.log.root


def _inspect(path: Path, load: _Load) -> PackReport:
    # Whatever the load learns of the pack's code, a sandboxed child tells it (code_probe.py).
    with probing(load.root, load.isolation, load.without) as probe:
        return _inspect_files(path, load, probe)


def _inspect_files(path: Path, load: _Load, probe: CodeProbe) -> PackReport:
    root, log = load.root, load.log
    if not root.is_dir():
        empty = Pack(root=root, name=root.name, version="", tasks=(), tool_code=None)
        return PackReport(empty, (), (PackProblem(path, "", f"is not a directory{path_hint(path)}"),))
    pack_file = root / "pack.yaml"
    config = PackFile()
    if pack_file.exists():
        raw = log.read_yaml(pack_file)
        if raw is not None:
            config = log.validate(PackFile, raw, pack_file) or config
    check_requirements(log, config.requires, pack_file)
    load.defaults = dict(config.defaults)
    tasks_dir, task_files = _task_files(root, load.tasks_glob)
    if not task_files:
        log.add(
            tasks_dir,
            "",
            f"holds no task file matching {load.tasks_glob!r} (a pack keeps its tasks under "
            "tasks/<task>/task.yaml, or is a folder of task folders, or one task folder)",
        )
    pack_problems = list(log.problems)
    code = bundle_files(root) if task_files else None
    if code is not None:
        probe.attach(code)
    tasks: list[LoadedTask] = []
    broken: list[BrokenTask] = []
    seen: dict[str, Path] = {}
    for task_file in task_files:
        mark = log.mark()
        loaded = _load_task(load, task_file, pack_file, code)
        if loaded is not None and loaded.task_id in seen:
            log.add(
                task_file,
                "task_id",
                f"{loaded.task_id!r} is also the task_id of {log.show(seen[loaded.task_id])}",
            )
        elif loaded is not None:
            seen[loaded.task_id] = task_file
            tasks.append(loaded)
        if log.since(mark):
            task_id = loaded.task_id if loaded is not None else _raw_task_id(task_file)
            broken.append(BrokenTask(task_file, task_id, tuple(log.problems[mark:])))
    if code is not None:
        load.services.ship(code)
    pack = Pack(
        root=root,
        name=config.name or root.name,
        version=config.version or "",
        tasks=tuple(tasks),
        tool_code=code,
        requires=tuple(config.requires),
    )
    return PackReport(pack, tuple(broken), tuple(pack_problems))


def _task_files(root: Path, tasks_glob: str) -> tuple[Path, list[Path]]:
    """Where tasks are looked for, and the task files found there.

    The default glob searches ``tasks/`` when the pack has one (our layout), else the folder itself:
    the public project's folder of task folders, or a single task folder (a pack of one task). Any
    other glob is the public ``evaluation.tasks_glob``, relative to the pack root.
    """
    base = root / "tasks" if tasks_glob == DEFAULT_TASKS_GLOB and (root / "tasks").is_dir() else root
    if Path(tasks_glob).is_absolute() or ".." in Path(tasks_glob).parts:
        return base, []
    return base, sorted(path for path in base.glob(tasks_glob) if path.is_file() and _visible(path, root))


def _visible(path: Path, root: Path) -> bool:
    return not any(part.startswith(".") for part in path.relative_to(root).parts)


def _raw_task_id(task_file: Path) -> str:
    """The task_id a task.yaml states, when it can be read; else its folder's name."""
    try:
        raw = yaml.safe_load(task_file.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return task_file.parent.name
    value = cast(dict[str, Any], raw).get("task_id") if isinstance(raw, dict) else None
    return value if isinstance(value, str) and value else task_file.parent.name


def _load_task(load: _Load, task_file: Path, pack_file: Path, code: ToolCode | None) -> LoadedTask | None:
    log = load.log
    raw = log.read_yaml(task_file)
    if raw is None:
        return None
    merged = {**load.defaults, **raw}

    def key_file(top: str) -> tuple[Path, str]:
        # A bad key that came from pack.yaml defaults is reported where the author wrote it.
        if top and top not in raw and top in load.defaults:
            return pack_file, "defaults"
        return task_file, ""

    folder = task_file.parent
    mark = log.mark()
    spec = log.validate(TaskFile, merged, task_file, key_file=key_file)
    if spec is None:
        # The task file is broken, but its grading file is read anyway: one pass reports both.
        grading_file, grading_path = _grading_file(load, merged.get("grading"), folder, task_file)
        if grading_file is not None:
            to_grading_config(log, grading_file, file=grading_path, folder=folder, initial_state=None)
        _blame_defaults(log, mark, task_file, pack_file, {key for key in load.defaults if key not in raw})
        return None

    check_adapter_keys(log, spec, task_file)
    inline_files = inline_workspace_files(log, spec, task_file)
    prompt = text_or_file(log, spec.system_prompt, folder, task_file, "system_prompt")
    policies = policy_text(log, spec.policies, task_file)
    state = initial_state(log, spec, folder, task_file, parsed=load.json_dbs)
    simulator = user_simulator(log, spec, task_file)
    agent_tools, user_tools = python_tools(load.importer, spec, task_file)
    servers = tool_servers(load.importer, spec, task_file)
    if isinstance(servers, str):
        agent_tools, user_tools = module_shaped_tools(load.importer, spec, task_file, servers)
        servers = []
    agent_tools = [*agent_tools, *load.services.tools(spec, task_file, {tool.name for tool in agent_tools})]
    browser = browser_settings(log, spec, task_file, load.services.task_sites.get(task_file))
    # The runner serves ``browser`` itself: golden actions and required actions may name it.
    runner_tools = [browser_schema_tool(browser)] if browser is not None else []
    grading_file, grading_path = _grading_file(load, spec.grading, folder, task_file)
    grading = None
    if grading_file is not None:
        if not servers:
            # A server's tools are known only once it runs: the runner resolves those names at grading.
            if load.check_golden_names:
                _check_golden_actions(
                    log, grading_file, [*agent_tools, *runner_tools], user_tools, grading_path
                )
            _check_required_actions(
                log, grading_file, [*agent_tools, *runner_tools], user_tools, grading_path
            )
        grading = to_grading_config(log, grading_file, file=grading_path, folder=folder, initial_state=state)
    _blame_defaults(log, mark, task_file, pack_file, {key for key in load.defaults if key not in raw})
    if log.since(mark) or grading is None or state is None or grading_file is None:
        return None
    if inline_files and code is not None:
        code, sources = with_inline_files(code, spec.task_id, inline_files)
        state = state.model_copy(update={"workspace_files": {**state.workspace_files, **sources}})
    try:
        task = TaskDescription(
            task_id=spec.task_id,
            name=spec.name,
            category=spec.category,
            description=spec.description,
            system_prompt="\n\n".join(part for part in (prompt, policies) if part),
            initial_user_message=spec.initial_user_message,
            max_turns=spec.max_turns,
            agent_tools=agent_tools,
            user_tools=user_tools,
            tool_code=with_shipped_code(code, agent_tools)
            if (agent_tools or user_tools or servers or grading.custom_checks or state.workspace_files)
            else None,
            tool_servers=servers,
            initial_state=state,
            grading=grading,
            user_simulator=simulator,
            policies=spec.policies,
            golden_response=grading_file.golden_response,
            browser=browser,
        )
    except ValidationError as error:
        log.add(task_file, "", describe_validation_error(error))
        return None
    if not check_web_checks_browser(log, task.grading.web_checks, task.browser is not None, grading_path):
        return None
    return LoadedTask(task=task, task_file=task_file)


def _blame_defaults(
    log: ProblemLog, mark: int, task_file: Path, pack_file: Path, inherited: set[str]
) -> None:
    """Problems found in a value the task took from pack.yaml ``defaults`` are the pack file's: the
    author fixes them there, not in a task.yaml that never wrote the key."""
    if not inherited:
        return
    shown = log.show(task_file)
    for position in range(mark, len(log.problems)):
        problem = log.problems[position]
        top = re.split(r"[.\[]", problem.key, maxsplit=1)[0]
        if problem.file == shown and top in inherited:
            log.problems[position] = PackProblem(
                log.show(pack_file), f"defaults.{problem.key}", problem.message
            )


def _grading_file(load: _Load, value: object, folder: Path, file: Path) -> tuple[GradingFile | None, Path]:
    log = load.log
    if value is None:
        log.add(file, "grading", "is required (a grading.yaml file or an inline block)")
        return None, file
    if isinstance(value, GradingFile):
        return value, file
    if isinstance(value, dict):
        return log.validate(GradingFile, value, file, key_file=lambda _: (file, "grading")), file
    if not isinstance(value, str):
        return None, file  # the task model already reported its type
    found = resolve(load.root, value, folder)
    if found is None:
        log.add(file, "grading", f"file {value!r} not found")
        return None, file
    raw = log.read_yaml(found)
    if raw is None:
        return None, found
    return log.validate(GradingFile, raw, found), found


def _check_golden_actions(
    log: ProblemLog,
    grading: GradingFile,
    agent_tools: list[ToolDescription],
    user_tools: list[ToolDescription],
    file: Path,
) -> None:
    """Golden actions must resolve as the runner resolves them (exactly, or by one ``…_<name>``
    suffix) and their kwargs must pass the tool's parameter schema, the check every call gets.

    Among every tool of the action's executor (the agent's, or the user's), hidden ones included:
    golden replay is the runner's own caller.
    """
    hash_block = grading.state_checks.hash if grading.state_checks else None
    if hash_block is None:
        return
    tools = {"agent": agent_tools, "user": user_tools}
    for index, action in enumerate(hash_block.golden_actions):
        if not tools[action.executor]:
            continue  # with no tools of that side known here, the runner judges the name
        key = f"state_checks.hash.golden_actions[{index}]"
        exact = [tool for tool in tools[action.executor] if tool.name == action.name]
        suffixed = [tool for tool in tools[action.executor] if tool.name.endswith(f"_{action.name}")]
        found = exact or (suffixed if len(suffixed) == 1 else [])
        if not found:
            log.add(file, f"{key}.name", f"{action.name!r} is not one of the task's {action.executor} tools")
            continue
        for where, message in _argument_problems(found[0], action.kwargs):
            log.add(file, f"{key}.kwargs{where}", message)


def _argument_problems(tool: ToolDescription, arguments: dict[str, Any]) -> list[tuple[str, str]]:
    """Why the runner would refuse ``arguments`` for ``tool`` (INVALID_ARGUMENTS), each with the dotted
    path of the argument it is about; none for a tool that takes any object unchecked."""
    from tolokaforge.runner import ToolLoadError, compile_parameters

    if not tool.validate_arguments:
        return []
    try:
        check = compile_parameters(tool)
    except ToolLoadError:
        return []  # a schema that is none fails the trial's registration, which says so
    return [
        (
            "".join(f".{part}" for part in error.absolute_path),
            f"the schema of {tool.name!r} refuses these arguments: {error.message}",
        )
        for error in check.errors(arguments)
    ]


def _check_required_actions(
    log: ProblemLog,
    grading: GradingFile,
    agent_tools: list[ToolDescription],
    user_tools: list[ToolDescription],
    file: Path,
) -> None:
    """A required action can be met only by a call of an offered tool of its requestor, matched as the
    grader matches it: the name itself, or a tool named ``…_<name>``."""
    rules = grading.transcript_rules
    if rules is None:
        return
    offered = {
        "assistant": [tool.name for tool in agent_tools if not tool.hidden],
        "user": [tool.name for tool in user_tools if not tool.hidden],
    }
    for index, action in enumerate(rules.required_actions):
        names = offered[action.requestor]
        if not names:
            continue  # that side's tools did not load (reported) or it has none: nothing to match here
        if any(name == action.name or name.endswith(f"_{action.name}") for name in names):
            continue
        side = "agent" if action.requestor == "assistant" else "user"
        log.add(
            file,
            f"transcript_rules.required_actions[{index}].name",
            f"{action.name!r} is not a tool the task offers the {side} (offered: {', '.join(names)}), "
            "so the action can never be met",
        )
