"""What the judge sees of the trial's state: the initial->final diff and read-only tools over the final state.

The final state is the runner's mirror of the trial, taken as it is when the judge starts (shared:
the mirror copies a table before any later change to it), and the initial state the task's shared
initial tables, or the ones right after the initialization actions; the judge's tools only read them.
Only a mirror out of step with the store (a foreign write) makes this read the store instead: the final
state once, and the initialised one by restoring its snapshot for a moment (snapshot, restore, read,
restore the snapshot) under the trial's lock, as hash grading's replay does.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from typing import Any, cast

from tolokaforge.core.state_diff import ABSENT, diff_states
from tolokaforge.db import NotFoundError

from ...trials.context import INITIALIZED_SNAPSHOT, TrialContext
from ..jsonpath_checks import compiled_path

__all__ = ["PRE_JUDGE_SNAPSHOT", "StateTools", "ToolRefused", "read_states", "render_diff"]

PRE_JUDGE_SNAPSHOT = "tolokaforge.pre_judge"
_MAX_OUTPUT = 30_000
_MAX_DIFF_LINES = 200


class ToolRefused(ValueError):
    """A judge tool call that cannot be answered; the message goes back to the judge."""


async def read_states(trial: TrialContext) -> tuple[Mapping[str, Any], dict[str, Any]]:
    """(initial, final) tables of the trial; the store is left holding the final state.

    Without initialization actions the initial state is the spec's own tables, the ones the store was
    created from. With them, it is the snapshot taken after they ran, read by a round trip.
    """
    client = trial.state.mirror.client
    trial_id = trial.trial_id
    async with trial.lock:
        await trial.state.mirror.refresh()
        if (await client.get_hashes(trial_id)).version == trial.state.mirror.version:
            # The mirror is the store's state: share its tables (the trial's next change copies what it
            # touches) instead of reading and parsing the whole state.
            return trial.state.start_tables, trial.state.mirror.share()
        final = (await client.get_state(trial_id)).tables
        if not trial.state.has_initialized_snapshot:
            return trial.spec.task.initial_state.tables, final
        with contextlib.suppress(NotFoundError):  # left by a judgement that died half-way
            await client.delete_snapshot(trial_id, PRE_JUDGE_SNAPSHOT)
        version = await client.create_snapshot(trial_id, PRE_JUDGE_SNAPSHOT)
        saved = trial.state.mirror.set_aside() if version == trial.state.mirror.version else None
        try:
            await client.restore_snapshot(trial_id, INITIALIZED_SNAPSHOT)
            initial = (await client.get_state(trial_id)).tables
        finally:
            restored = await client.restore_snapshot(trial_id, PRE_JUDGE_SNAPSHOT)
            await client.delete_snapshot(trial_id, PRE_JUDGE_SNAPSHOT)
            if saved is None:
                await trial.state.mirror.reload()
            else:
                trial.state.mirror.put_back(saved, restored.version)
    return initial, final


def render_diff(initial: Mapping[str, Any], final: Mapping[str, Any]) -> str:
    """One line per added, removed or changed record or field; "" when the agent changed nothing."""
    # Tables are diffed one by one, so handing over only those that changed (a C-level comparison)
    # gives the same lines and spares the record matching of every untouched table.
    changed = [
        name for name in set(initial) | set(final) if initial.get(name, ABSENT) != final.get(name, ABSENT)
    ]
    before = {name: initial[name] for name in changed if name in initial}
    after = {name: final[name] for name in changed if name in final}
    lines: list[str] = []
    for change in diff_states(before, after, common=initial).differences:
        if change.kind == "added":
            lines.append(f"+ {change.where} added: {_shown(change.actual)}")
        elif change.kind == "removed":
            lines.append(f"- {change.where} removed: {_shown(change.expected)}")
        else:
            lines.append(f"~ {change.where}: {_shown(change.expected)} -> {_shown(change.actual)}")
    if len(lines) > _MAX_DIFF_LINES:
        lines = [
            *lines[:_MAX_DIFF_LINES],
            f"... {len(lines) - _MAX_DIFF_LINES} more lines (use the state tools)",
        ]
    return "\n".join(lines)


def _shown(value: Any) -> str:
    return "(absent)" if value is ABSENT else _json(value)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


class StateTools:
    """``get_state`` and ``query_table`` over a private copy of the final state."""

    NAMES = ("get_state", "query_table")

    def __init__(self, final: Mapping[str, Any]) -> None:
        self._tables = dict(final)

    def specs(self) -> list[dict[str, Any]]:
        tables = sorted(self._tables)
        return [
            {
                "type": "function",
                "function": {
                    "name": "get_state",
                    "description": "The trial's final state (read-only), optionally only some tables. "
                    f"Tables: {', '.join(tables) or 'none'}.",
                    "parameters": {
                        "type": "object",
                        "properties": {"tables": {"type": "array", "items": {"type": "string"}}},
                        "additionalProperties": False,
                    },
                },
            },
            {
                "type": "function",
                "function": {
                    "name": "query_table",
                    "description": "Query one table of the final state with a JSONPath rooted at the "
                    "table (e.g. $[?(@.status == 'paid')].id); answers the list of matches.",
                    "parameters": {
                        "type": "object",
                        "properties": {"table": {"type": "string"}, "path": {"type": "string"}},
                        "required": ["table", "path"],
                        "additionalProperties": False,
                    },
                },
            },
        ]

    def call(self, name: str, arguments_json: str) -> str:
        try:
            raw: Any = json.loads(arguments_json) if arguments_json.strip() else {}
        except ValueError as error:
            raise ToolRefused(f"arguments are not JSON: {error}") from error
        if not isinstance(raw, dict):
            raise ToolRefused("arguments must be a JSON object")
        arguments = cast(dict[str, Any], raw)
        if name == "get_state":
            return self._get_state(arguments.get("tables"))
        if name == "query_table":
            return self._query(arguments.get("table"), arguments.get("path"))
        raise ToolRefused(f"no tool {name!r}; the tools are get_state, query_table and submit_report")

    def _get_state(self, tables: Any) -> str:
        if tables is None:
            return _bounded(self._tables)
        if not isinstance(tables, list) or not all(isinstance(t, str) for t in cast(list[Any], tables)):
            raise ToolRefused("'tables' must be a list of table names")
        names = cast(list[str], tables)
        self._require_tables(names)
        return _bounded({name: self._tables[name] for name in names})

    def _query(self, table: Any, path: Any) -> str:
        if not isinstance(table, str) or not isinstance(path, str) or not path.strip():
            raise ToolRefused("'table' and 'path' must be strings")
        self._require_tables([table])
        try:
            expression: Any = compiled_path(path)
            matches: list[Any] = [match.value for match in expression.find(self._tables[table])]
        except Exception as error:  # jsonpath_ng raises several unrelated types for a bad path
            raise ToolRefused(f"path {path!r} does not parse: {error}") from error
        return _bounded(matches)

    def _require_tables(self, names: list[str]) -> None:
        unknown = [name for name in names if name not in self._tables]
        if unknown:
            raise ToolRefused(f"no table {', '.join(unknown)}; tables: {', '.join(sorted(self._tables))}")


def _bounded(value: Any) -> str:
    text = _json(value)
    if len(text) > _MAX_OUTPUT:
        return text[:_MAX_OUTPUT] + f"... [truncated: {len(text)} characters; query_table narrows it]"
    return text
