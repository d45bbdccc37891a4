"""A Terminal-Bench task folder, or a folder of them, as a Pack (docs/terminal.md).

Each task becomes an ordinary TaskDescription: the instruction is the user's first message, the agent
gets the built-in ``bash`` and file tools over a workspace seeded with what the Dockerfile copies into
its working directory, the verifier (``tests/``) becomes the ``terminal_tests`` grading component, and
``solution/solve.sh`` becomes the golden path -- one ``bash`` call running the script's text, which
the golden agent plays and the pytest plugin replays. Only the environment's files travel as the task's
code: the verifier and the solution stay out of everything the agent's tools can reach.

A task whose environment this machine cannot provide is loaded as a :class:`SkippedTask` with the
reason (environment.py), which the run lists and never counts as passed.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from pydantic import ValidationError

from tolokaforge.core.models import (
    GoldenAction,
    GradingConfig,
    InitialState,
    StateChecksConfig,
    TaskDescription,
    TerminalTestsConfig,
    ToolCode,
    describe_validation_error,
)

from ...errors import PackLoadError
from ..pack import BrokenTask, LoadedTask, Pack, PackReport, SkippedTask
from ..problems import ProblemLog
from ..tool_sources import builtin_tool_servers
from .environment import Environment, EnvironmentSkipped, read_environment
from .task_dir import TerminalTaskDir, is_terminal_task_dir, read_task_dir

__all__ = [
    "AGENT_TOOLS",
    "SYSTEM_PROMPT",
    "inspect_terminal_pack",
    "is_terminal_source",
    "load_terminal_pack",
]

AGENT_TOOLS = ["bash", "read_file", "write_file", "list_dir"]
"""What a terminal task's agent is offered: the shell, and the file tools over the same workspace."""

SYSTEM_PROMPT = (
    "You are working in a Linux shell. Your current directory is the task's working directory, which "
    "holds its files. Use the bash tool to run commands (the shell keeps its state between calls) and "
    "the file tools to read and write files. When the task is done, say so."
)
MAX_TURNS = 100
"""The turn budget of a terminal task (a shell task takes many small steps; the time budget is the
bash tool's per-command deadline)."""
ENVIRONMENT_CODE = "environment"
"""The folder of the task's code bundle that holds the Dockerfile's build context."""


def is_terminal_source(path: Path) -> bool:
    """A Terminal-Bench task folder, or a folder whose task folders are all of that kind."""
    if not path.is_dir() or (path / "pack.yaml").is_file() or (path / "tasks").is_dir():
        return False
    if is_terminal_task_dir(path):
        return True
    children = [child for child in path.iterdir() if child.is_dir() and not child.name.startswith(".")]
    return bool(children) and any(is_terminal_task_dir(child) for child in children)


def load_terminal_pack(path: Path) -> Pack:
    """The pack; PackLoadError naming every problem of every task that does not load."""
    report = inspect_terminal_pack(path)
    if report.problems:
        raise PackLoadError(report.problems)
    return report.pack


def inspect_terminal_pack(path: Path) -> PackReport:
    root = path.resolve()
    single = is_terminal_task_dir(root)
    log = ProblemLog(root.parent if single else root)
    folders = (
        [root] if single else sorted(c for c in root.iterdir() if c.is_dir() and not c.name.startswith("."))
    )
    tasks: list[LoadedTask] = []
    skipped: list[SkippedTask] = []
    broken: list[BrokenTask] = []
    for folder in folders:
        if not is_terminal_task_dir(folder):
            log.add(
                folder,
                "",
                "is not a Terminal-Bench task folder (task.toml with tests/, or task.yaml with run-tests.sh)",
            )
            broken.append(BrokenTask(folder, folder.name, (log.problems[-1],)))
            continue
        mark = log.mark()
        outcome = _load_task(log, folder)
        if isinstance(outcome, SkippedTask):
            skipped.append(outcome)
        elif outcome is not None:
            tasks.append(outcome)
        if log.since(mark):
            broken.append(BrokenTask(_task_file(folder), folder.name, tuple(log.problems[mark:])))
    pack = Pack(
        root=root,
        name=root.name,
        version="",
        tasks=tuple(tasks),
        tool_code=None,
        skipped=tuple(skipped),
    )
    return PackReport(pack, tuple(broken), ())


def _task_file(folder: Path) -> Path:
    toml = folder / "task.toml"
    return toml if toml.is_file() else folder / "task.yaml"


def _load_task(log: ProblemLog, folder: Path) -> LoadedTask | SkippedTask | None:
    task_dir = read_task_dir(log, folder)
    if task_dir is None:
        return None
    task_file = _task_file(folder)
    try:
        environment = _environment(task_dir)
    except EnvironmentSkipped as why:
        return SkippedTask(task_dir.task_id, task_file, str(why))
    code = _environment_code(log, environment)
    if code is None:
        return None
    tests = TerminalTestsConfig(
        files=task_dir.tests,
        script=task_dir.script,
        timeout_s=task_dir.verifier_timeout_s,
        workdir=environment.workdir,
        env={**environment.env, **task_dir.verifier_env},
    )
    grading = GradingConfig(
        combine_method="all",
        pass_threshold=1.0,
        terminal_tests=tests,
        state_checks=StateChecksConfig(
            # The golden path for the golden agent and the plugin; no hash replay: the verifier decides.
            golden_actions=[GoldenAction(tool_name="bash", arguments={"command": command})]
            if (command := _golden_command(task_dir)) is not None
            else []
        ),
    )
    try:
        task = TaskDescription(
            task_id=task_dir.task_id,
            name=task_dir.task_id,
            category=task_dir.category,
            description=task_dir.instruction[:500],
            system_prompt=SYSTEM_PROMPT,
            initial_user_message=task_dir.instruction,
            max_turns=MAX_TURNS,
            tool_code=code,
            # The agent works where the image would put it: the workspace is also at the WORKDIR.
            tool_servers=[
                server.model_copy(update={"workspace_mount": environment.workdir})
                for server in builtin_tool_servers(AGENT_TOOLS)
            ],
            initial_state=InitialState(
                workspace_files={target: f"{ENVIRONMENT_CODE}/{target}" for target in environment.files}
            ),
            grading=grading,
        )
    except ValidationError as error:
        log.add(task_file, "", describe_validation_error(error))
        return None
    return LoadedTask(task=task, task_file=task_file)


def _golden_command(task_dir: TerminalTaskDir) -> str | None:
    """The solution's text, after exports of task.toml's ``solution.env`` (it runs in the agent's shell);
    None for a task without one (optional in Terminal-Bench: the golden agent then does nothing, and fails)."""
    if task_dir.solution is None:
        return None
    exports = "".join(
        f"export {name}={shlex.quote(value)}\n" for name, value in task_dir.solution_env.items()
    )
    return exports + task_dir.solution


def _environment(task_dir: TerminalTaskDir) -> Environment:
    if task_dir.docker_image is not None:
        raise EnvironmentSkipped(
            f"environment.docker_image {task_dir.docker_image!r} is a prebuilt image (no container engine here)"
        )
    return read_environment(task_dir.folder)


def _environment_code(log: ProblemLog, environment: Environment) -> ToolCode | None:
    """The workspace's starting files, as the task's code bundle (only these travel with the task)."""
    files: dict[str, str] = {}
    readable = True
    for target, source in environment.files.items():
        try:
            files[f"{ENVIRONMENT_CODE}/{target}"] = source.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            log.add(source, "", "is not UTF-8 text: a workspace file travels to the runner as text")
            readable = False
    if not readable:
        return None
    return ToolCode(files=files)
