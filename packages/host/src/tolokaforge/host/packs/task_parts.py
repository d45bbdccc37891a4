"""Stage two of loading a task: resolve the files it names and build its non-tool, non-grading parts.

Relative paths resolve from the task's folder first, then the pack root. Each function records what
is wrong in the shared :class:`ProblemLog` and returns None (or a neutral value) for a part it cannot
build, so that one pass reports every problem of the task.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

from pydantic import ValidationError

from tolokaforge.core.models import InitialState, UserSimulatorConfig, describe_validation_error
from tolokaforge.core.value_tables import VALUE_KEY, is_value_table, wrap_values

from .files import InitialStateFile, TaskFile, UserSimulatorFile
from .problems import ProblemLog
from .scripted_rules import conditional_turn

__all__ = ["AGENT_VISIBLE", "initial_state", "policy_text", "resolve", "text_or_file", "user_simulator"]

_TEXT_SUFFIXES = (".md", ".txt", ".markdown", ".rst")
AGENT_VISIBLE = "/env/fs/agent-visible/"
"""Where public-style packs write the trial's workspace; here paths are relative to the workspace."""
_POLICY_HEADINGS = {"guidance": "Guidance", "disallowed_actions": "Never do the following"}


def resolve(root: Path, relative: str, folder: Path) -> Path | None:
    """``relative`` from the task's folder, else from the pack root; None when neither holds it."""
    for base in (folder, root):
        candidate = (base / relative).resolve()
        if candidate.exists():
            return candidate
    return None


def text_or_file(log: ProblemLog, value: str, folder: Path, file: Path, key: str) -> str:
    """A value naming a file (one line ending in a text suffix, or an existing path) is that file's text."""
    if not value or "\n" in value:
        return value
    found = resolve(log.root, value, folder)
    if found is not None and found.is_file():
        return found.read_text(encoding="utf-8")
    if value.strip().lower().endswith(_TEXT_SUFFIXES):
        log.add(file, key, f"file {value!r} not found (looked in {log.show(folder)} and the pack root)")
    return value


def policy_text(log: ProblemLog, policies: dict[str, Any], file: Path) -> str:
    """``policies`` rendered as a section the agent's system prompt ends with ('' when there are none).

    Public packs state rules for the agent here (``guidance``, ``disallowed_actions``); the agent can
    only follow what it is told, so they are told, not stored where nothing reads them.
    """
    sections: list[str] = []
    for key, value in policies.items():
        heading = _POLICY_HEADINGS.get(key)
        if heading is None:
            log.add(file, f"policies.{key}", f"unknown policy key (known: {', '.join(_POLICY_HEADINGS)})")
            continue
        if not isinstance(value, list) or not all(isinstance(item, str) for item in cast(list[Any], value)):
            log.add(file, f"policies.{key}", "must be a list of strings")
            continue
        items = cast(list[str], value)
        if items:
            sections.append(f"{heading}:\n" + "\n".join(f"- {item}" for item in items))
    return "\n\n".join(sections)


def initial_state(
    log: ProblemLog,
    spec: TaskFile,
    folder: Path,
    file: Path,
    *,
    parsed: dict[Path, dict[str, Any]] | None = None,
) -> InitialState | None:
    """The task's initial state; ``parsed``: json_db files already read in this load, by path (shared:
    never changed in place)."""
    block = spec.initial_state
    mark = log.mark()
    workspace_files = _workspace_files(log, block, folder, file)
    tables: dict[str, Any] = dict(block.tables or {})
    if block.json_db is not None:
        if block.tables is not None:
            log.add(file, "initial_state", "give json_db or tables, not both")
            return None
        loaded = _json_db(log, block.json_db, folder, file, {} if parsed is None else parsed)
        if loaded is None:
            return None
        tables = loaded
    tables = _device_overrides(log, block, tables, file)
    if block.system_prompt is not None:
        log.add(
            file,
            "initial_state.system_prompt",
            "is not supported (the public project does not read it either): give the task's system_prompt",
        )
    for name, value in tables.items():
        if is_value_table(value):
            log.add(
                file,
                f"initial_state.json_db.{name}",
                f"a keyed table whose only key is {VALUE_KEY!r} would read as a plain value; rename the key",
            )
    # A top-level value that is not a table (public style: {counter: 0}) is stored as a value table.
    tables = wrap_values(tables)
    actions = _initialization_actions(log, block, file)
    if log.since(mark):
        return None
    try:
        return InitialState.model_validate(
            {
                "tables": tables,
                "unstable_fields": block.unstable_fields,
                "initialization_actions": actions,
                "workspace_files": workspace_files,
            }
        )
    except ValidationError as error:
        log.add(file, "initial_state", describe_validation_error(error))
        return None


def _device_overrides(
    log: ProblemLog, block: InitialStateFile, tables: dict[str, Any], file: Path
) -> dict[str, Any]:
    """``tables`` with ``device_overrides`` set in its ``device`` object (public style, for τ² telecom)."""
    if not block.device_overrides:
        return tables
    device = tables.get("device")
    if not isinstance(device, dict):
        log.add(
            file,
            "initial_state.device_overrides",
            "needs a top-level 'device' object in json_db to set its keys in",
        )
        return tables
    return {**tables, "device": {**cast(dict[str, Any], device), **block.device_overrides}}


def _initialization_actions(log: ProblemLog, block: InitialStateFile, file: Path) -> list[dict[str, Any]]:
    """Each action as ``{env_type, tool_name, arguments}``; public packs name the tool ``func_name``."""
    actions: list[dict[str, Any]] = []
    for index, action in enumerate(block.initialization_actions):
        names = [name for name in (action.tool_name, action.func_name) if name is not None]
        if len(names) != 1:
            log.add(
                file,
                f"initial_state.initialization_actions[{index}]",
                "name the tool once: tool_name, or public style func_name",
            )
            continue
        actions.append({"env_type": action.env_type, "tool_name": names[0], "arguments": action.arguments})
    return actions


def _workspace_files(log: ProblemLog, block: InitialStateFile, folder: Path, file: Path) -> dict[str, str]:
    """``filesystem.copy`` and ``workspace``: workspace path -> the pack file it starts as.

    The files travel in the code bundle, so each must be a UTF-8 text file inside the pack.
    """
    copies: list[tuple[str, str, str]] = []  # (key, from, to)
    if isinstance(block.workspace, str):  # the inline form is inline_workspace.py's
        copies.append(("initial_state.workspace", block.workspace, ""))
    if block.filesystem is not None:
        for index, copy in enumerate(block.filesystem.copy_):
            key = f"initial_state.filesystem.copy[{index}]"
            target = copy.to[len(AGENT_VISIBLE) :] if copy.to.startswith(AGENT_VISIBLE) else copy.to
            if not target or target.startswith("/") or ".." in target.split("/"):
                log.add(file, f"{key}.to", f"{copy.to!r} must lie in the workspace ({AGENT_VISIBLE}...)")
                continue
            copies.append((key, copy.from_, target))
    files: dict[str, str] = {}
    root = log.root.resolve()
    for key, source, target in copies:
        found = resolve(log.root, source, folder)
        if found is None or not found.is_relative_to(root):
            log.add(file, key, f"{source!r} is not a file or folder of the pack")
            continue
        members = [found] if found.is_file() else sorted(p for p in found.rglob("*") if p.is_file())
        for member in members:
            inside = member.relative_to(found).as_posix() if member != found else ""
            destination = "/".join(part for part in (target.rstrip("/"), inside) if part) or member.name
            try:
                member.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                log.add(
                    file,
                    key,
                    f"{member.relative_to(root).as_posix()!r} is not UTF-8 text (only text travels)",
                )
                continue
            files[destination] = member.relative_to(root).as_posix()
    return files


def _json_db(
    log: ProblemLog, value: str | dict[str, Any], folder: Path, file: Path, parsed: dict[Path, dict[str, Any]]
) -> dict[str, Any] | None:
    if isinstance(value, dict):
        return value
    found = resolve(log.root, value, folder)
    if found is None:
        log.add(file, "initial_state.json_db", f"file {value!r} not found")
        return None
    kept = parsed.get(found.resolve())
    if kept is not None:
        return kept
    try:
        loaded = json.loads(found.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        log.add(file, "initial_state.json_db", f"{value}: not readable JSON: {error}")
        return None
    if not isinstance(loaded, dict):
        log.add(file, "initial_state.json_db", f"{value}: must be an object of tables")
        return None
    tables = parsed[found.resolve()] = cast(dict[str, Any], loaded)
    return tables


def user_simulator(log: ProblemLog, spec: TaskFile, file: Path) -> UserSimulatorConfig | None:
    """``user_simulator`` or, public style, ``actors.user`` (not both)."""
    block: UserSimulatorFile | None = spec.user_simulator
    key = "user_simulator"
    if spec.actors is not None and spec.actors.user is not None:
        if block is not None:
            log.add(file, "actors.user", "give user_simulator or actors.user, not both")
            return None
        block, key = spec.actors.user, "actors.user"
    if block is None:
        return None
    turns: list[dict[str, Any]] = []
    for index, turn in enumerate(block.scripted_flow):
        where = f"{key}.scripted_flow[{index}]"
        if turn.if_assistant_contains is not None or turn.default is not None:
            rule = conditional_turn(turn)
            if isinstance(rule, str):
                log.add(file, where, rule)
            else:
                turns.append(rule)
        elif turn.user is not None and turn.role is None and turn.content is None:
            turns.append({"user": turn.user})
        elif turn.user is None and turn.role == "user" and turn.content is not None:
            turns.append({"user": turn.content})
        elif turn.user is None and turn.role is not None and turn.role != "user":
            log.add(
                file, f"{where}.role", f"must be 'user' (a script says the user's turns), got {turn.role!r}"
            )
        else:
            log.add(file, where, "a turn is {user: text} or {role: user, content: text}")
    return UserSimulatorConfig(
        mode=block.mode, persona=block.persona, backstory=block.backstory, scripted_flow=turns
    )
