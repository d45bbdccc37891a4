"""The tasks a runner holds, found by the task object a TrialSpec carries.

Every trial of a task carries the same :class:`TaskDescription` object: the embedded runner's caller
builds one per task, and the gRPC edge decodes a task it was sent once into one object too
(edge/task_wire.py). So the runner keeps what it learns about a task on a :class:`KnownTask` found by
that object's identity -- no text, no digest: its initial tables in key order, their full hash once the
store has them, its tool code made importable, its tools, its golden replays. Registering the 2nd..Nth
trial of a task costs nothing in the size of its state.

Initial tables are shared by every trial of the task and never changed in place (state/mirror.py
copies a table before its first change), and the store shares its copy too, found by the initial
state's full hash. Tasks of a pack often share the same tables or code object (a part sent once over
the wire): those are found by identity as well, so a pack's 2nd..Nth task skips hashing its tables and
writing out its code.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

from cachetools import LRUCache

from tolokaforge.contracts.runner import ToolSchema
from tolokaforge.core.models import TaskDescription, ToolCode

from ..state.mirror import in_key_order
from ..tools.base import Tool
from ..tools.code_loader import CodeBundle
from ..workers.code import WorkerCode
from .golden_memo import GoldenMemo

__all__ = ["KnownTask", "TaskCache"]

SHARED_CAPACITY = 64
"""Table sets and code objects remembered across tasks; a kept task holds its own regardless."""


@dataclass(eq=False)
class KnownTask:
    """What the runner learnt about one task, shared by its trials. It does not hold the task object:
    the cache forgets it when the last holder of that object lets go."""

    initial: dict[str, Any]
    """The initial tables in key order: shared by every trial, never changed in place."""
    full_hash: str | None = None
    """Set after the first trial's state was created: later trials start from the store's copy."""
    tables_checked: bool = False
    """The store took its tables once already: JSON can hold them, so no later trial checks again."""
    code_loaded: bool = False
    """A trial of this task has loaded its tool code (imported it, for trusted tools) already."""
    bundle: CodeBundle | None = None
    """Its tool code made importable, when the code came as files (``tool_code.files``): those never change."""
    tools: tuple[tuple[Tool, ...], tuple[Tool, ...], WorkerCode | None] | None = None
    """With ``bundle``: its agent and user python tools (immutable, shared by its trials) and what
    their workers import."""
    schemas: tuple[tuple[ToolSchema, ...], tuple[ToolSchema, ...]] | None = None
    """The agent and user tool schemas of a trial that has exactly ``tools`` (no tool server added
    any): built once, offered to every such trial."""
    golden: GoldenMemo = field(default_factory=GoldenMemo)
    """Its golden replays' outcomes, reused by later trials once two agree (golden_memo.py)."""


def _identity(tables: dict[str, Any]) -> tuple[tuple[str, int], ...]:
    """Tables by the identity of each table: the model copies the mapping, never the tables in it."""
    return tuple((name, id(table)) for name, table in tables.items())


@dataclass(eq=False)
class _SharedTables:
    source: dict[str, Any]
    """The tables as a task carries them (held, so that each table's identity stays its own)."""
    initial: dict[str, Any]
    full_hash: str | None = None


class TaskCache:
    """Known tasks by the identity of their task object, for as long as some caller holds that object."""

    def __init__(self) -> None:
        self._tasks: dict[int, tuple[weakref.ref[TaskDescription], KnownTask]] = {}
        self._tables: LRUCache[tuple[tuple[str, int], ...], _SharedTables] = LRUCache(SHARED_CAPACITY)
        self._bundles: LRUCache[int, tuple[ToolCode, CodeBundle]] = LRUCache(SHARED_CAPACITY)
        self._initials: dict[str, dict[str, Any]] = {}
        """One copy of each initial state the kept tasks start from, by its full hash: tasks whose
        tables are equal but not the same object share it after their first trial."""

    def __len__(self) -> int:
        return len(self._tasks)

    def known(self, task: TaskDescription) -> KnownTask:
        """The task as kept here: found by identity, or made now (its tables put in key order)."""
        key = id(task)
        kept = self._tasks.get(key)
        if kept is not None and kept[0]() is task:
            return kept[1]
        tables = task.initial_state.tables
        shared = self._shared_tables(tables)
        if shared is None:
            shared = _SharedTables(tables, {name: in_key_order(table) for name, table in tables.items()})
            self._tables[_identity(tables)] = shared
        known = KnownTask(shared.initial, shared.full_hash)

        def forget(_: weakref.ref[TaskDescription]) -> None:
            # Runs as the task object is freed, before its id can be anyone else's.
            entry = self._tasks.pop(key, None)
            if entry is not None:
                self._forget_initial(entry[1].full_hash)

        self._tasks[key] = (weakref.ref(task, forget), known)
        return known

    def settle(self, task: TaskDescription, known: KnownTask, full_hash: str) -> None:
        """Record that ``known``'s initial state has ``full_hash``; a task whose initial state equals one
        already kept then shares that copy of the tables (so ``known.initial`` may change here)."""
        known.full_hash = full_hash
        kept = self._initials.get(full_hash)
        if kept is not None:
            known.initial = kept
        else:
            self._initials[full_hash] = known.initial
        shared = self._shared_tables(task.initial_state.tables)
        if shared is not None:
            shared.full_hash, shared.initial = full_hash, known.initial

    def _shared_tables(self, tables: dict[str, Any]) -> _SharedTables | None:
        shared = self._tables.get(_identity(tables))
        if shared is None or len(shared.source) != len(tables):
            return None
        if any(shared.source.get(name) is not table for name, table in tables.items()):
            return None  # the ids were another set of tables', freed since
        return shared

    def bundle(self, code: ToolCode) -> CodeBundle | None:
        """The bundle written out for this very code object by an earlier task, if any."""
        kept = self._bundles.get(id(code))
        return kept[1] if kept is not None and kept[0] is code else None

    def keep_bundle(self, code: ToolCode, bundle: CodeBundle) -> None:
        self._bundles[id(code)] = (code, bundle)

    def _forget_initial(self, full_hash: str | None) -> None:
        if full_hash is not None and all(entry.full_hash != full_hash for _, entry in self._tasks.values()):
            self._initials.pop(full_hash, None)
