"""Reading a RegisterTrial request's TrialSpec, and the tasks (and task parts) a runner keeps by digest.

A caller that sends a task once (``RegisterTrialRequest.task_digest``, docs/protocol/runner.md) lets
every later trial of that task skip receiving, parsing and validating it: the runner keeps the parsed
task here, with its initial tables in the order the store returns them. Those tables are shared by
every trial of the task and never changed in place (state/mirror.py copies a table before its first
change), and the store shares its copy too, found by the initial state's full hash. So registering
the 2nd..Nth trial of a task costs nothing in the size of its state.

The tasks of a pack mostly share their two big parts: the code bundle (every text file of the pack)
and often the initial tables. A caller may send those apart, once per runner (``code_digest``,
``tables_digest``): the runner keeps each part parsed, with what it learns about it later (the code's
importable bundle, the tables' full hash), so a pack's 2nd..Nth task costs what is its own.

JSON is parsed with orjson, which is strict: ``NaN``, ``Infinity`` and other text that is not JSON are
refused here, where the request is at fault, rather than by the store later.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import orjson
from pydantic import ValidationError

from tolokaforge.contracts.runner import RegisterTrialResponse
from tolokaforge.core.models import TaskDescription, ToolCode, TrialSpec, describe_validation_error

from ..errors import PartNotCachedError, RegistrationError, TaskNotCachedError
from ..state.mirror import in_key_order
from ..tools.base import Tool
from ..tools.code_loader import CodeBundle
from ..workers.code import WorkerCode
from .golden_memo import GoldenMemo

__all__ = ["KnownTask", "SharedCode", "SharedReply", "SharedTables", "TaskCache", "TaskParts", "parse_json"]

CAPACITY = 256
"""Tasks kept by digest; the least recently registered goes first."""

PART_CAPACITY = 64
"""Parts of each kind (code bundles, initial tables) kept by digest; the least recently used goes first.
A kept task holds its own parts, so evicting one only makes a new task's caller send it again."""


@dataclass(frozen=True)
class TaskParts:
    """The parts of a RegisterTrial request that many tasks share (each digest with its JSON, or alone)."""

    code_json: str = ""
    code_digest: str = ""
    tables_json: str = ""
    tables_digest: str = ""

    def __bool__(self) -> bool:
        return bool(self.code_json or self.code_digest or self.tables_json or self.tables_digest)


@dataclass(eq=False)
class SharedCode:
    """A code bundle kept by digest: one ToolCode object for every task that names it."""

    code: ToolCode
    bundle: CodeBundle | None = None
    """Once a task's code was loaded: the bundle written out and importable (never changes)."""


@dataclass(eq=False)
class SharedTables:
    """Initial tables kept by digest (in the order the store returns them), shared, never changed."""

    tables: dict[str, Any]
    full_hash: str | None = None
    """Once a trial's state was created from them: their full hash, so the next task skips hashing."""


@dataclass(eq=False)
class SharedReply:
    """The successful RegisterTrial reply of a task whose trials all get the same tools: it lists their
    schemas and nothing of the trial, so the first such trial builds it and the others send it again
    (encoded once: reply_wire.py). Never changed once set."""

    message: RegisterTrialResponse | None = None


@dataclass(eq=False)
class KnownTask:
    """A parsed task, its initial tables (shared, never changed) and, once the store has them, their full hash."""

    task: TaskDescription
    initial: dict[str, Any]
    full_hash: str | None = None
    """Set after the first trial's state was created: later trials start from the store's copy."""
    digest: str = ""
    """The key the cache keeps the task under: its digest and its parts' ("" for a task sent whole in
    a TrialSpec)."""
    code_part: SharedCode | None = None
    """Its code, when the code came as a part (shared with the other tasks naming it)."""
    tables_part: SharedTables | None = None
    """Its initial tables, when they came as a part."""
    code_loaded: bool = False
    """A trial of this task has loaded its tool code (imported it, for trusted tools) already."""
    bundle: CodeBundle | None = None
    """Its tool code made importable, when the code came as files (``tool_code.files``): those never change."""
    tools: tuple[tuple[Tool, ...], tuple[Tool, ...], WorkerCode | None] | None = None
    """With ``bundle``: its agent and user python tools (immutable, shared by its trials) and what
    their workers import."""
    golden: GoldenMemo = field(default_factory=GoldenMemo)
    """Its golden replays' outcomes, reused by later trials once two agree (golden_memo.py)."""
    reply: SharedReply = field(default_factory=lambda: SharedReply())
    """Its trials' RegisterTrial reply, when they all get the shared ``tools`` and nothing more."""

    @classmethod
    def of(
        cls, task: TaskDescription, code: SharedCode | None = None, tables: SharedTables | None = None
    ) -> KnownTask:
        if tables is not None:  # in key order already, and maybe hashed by an earlier task's trial
            return cls(task, tables.tables, tables.full_hash, code_part=code, tables_part=tables)
        initial = {name: in_key_order(table) for name, table in task.initial_state.tables.items()}
        return cls(task, initial, code_part=code)


class TaskCache:
    def __init__(self, capacity: int = CAPACITY) -> None:
        self._capacity = capacity
        self._tasks: OrderedDict[str, KnownTask] = OrderedDict()
        self._code: OrderedDict[str, SharedCode] = OrderedDict()
        self._tables: OrderedDict[str, SharedTables] = OrderedDict()
        self._initials: dict[str, dict[str, Any]] = {}
        """One copy of each initial state the kept tasks start from, by its full hash: tasks of one
        pack often share their tables, and a forked worker is sent only the tables that are not its
        zygote's very objects (workers/code.py)."""

    def __len__(self) -> int:
        return len(self._tasks)

    def resolve(
        self, trial_spec_json: str, task_json: str, task_digest: str, parts: TaskParts | None = None
    ) -> tuple[TrialSpec, KnownTask]:
        """The TrialSpec of a request, and its task as kept here (parsed now, or found by digest)."""
        parts = parts or TaskParts()
        if not task_digest:
            if task_json:
                raise RegistrationError("task_json is given without task_digest")
            if parts:
                raise RegistrationError("code_* and tables_* are given without task_digest")
            spec = _validate(TrialSpec, parse_json(trial_spec_json, "trial_spec_json"), "invalid TrialSpec")
            return spec, KnownTask.of(spec.task)
        key = task_digest.lower()
        if parts.code_digest or parts.tables_digest:
            key = f"{key}|{parts.code_digest.lower()}|{parts.tables_digest.lower()}"
        known = self._tasks.get(key)
        if known is None:
            known = self._parse_task(task_json, task_digest, parts)
            known.digest = key
            self._tasks[key] = known
            while len(self._tasks) > self._capacity:
                _, evicted = self._tasks.popitem(last=False)
                self._forget_initial(evicted.full_hash)
        else:
            self._tasks.move_to_end(key)
        context = parse_json(trial_spec_json, "trial_spec_json")
        if not isinstance(context, dict):
            raise RegistrationError("invalid TrialSpec: trial_spec_json must be a JSON object")
        if "task" in context:
            raise RegistrationError("invalid TrialSpec: with task_digest, the task travels in task_json only")
        # A TaskDescription instance is taken as it is (pydantic does not revalidate instances).
        spec = _validate(TrialSpec, {**context, "task": known.task}, "invalid TrialSpec")
        return spec, known

    def _parse_task(self, task_json: str, task_digest: str, parts: TaskParts) -> KnownTask:
        if not task_json:
            raise TaskNotCachedError(task_digest)
        _check_digest("task", task_json, task_digest)
        code = self._code_part(parts.code_json, parts.code_digest)
        tables = self._tables_part(parts.tables_json, parts.tables_digest)
        data = parse_json(task_json, "task_json")
        if code is not None or tables is not None:
            if not isinstance(data, dict):
                raise RegistrationError("invalid task_json: it must be a JSON object")
            task = cast(dict[str, Any], data)
            if code is not None:
                if "tool_code" in task:
                    raise RegistrationError(
                        "invalid task_json: with code_digest, tool_code travels in code_json only"
                    )
                task["tool_code"] = code.code  # an instance: pydantic keeps it as it is, shared
            if tables is not None:
                state = task.setdefault("initial_state", {})
                if not isinstance(state, dict):
                    raise RegistrationError("invalid task_json: initial_state must be a JSON object")
                if "tables" in state:
                    raise RegistrationError(
                        "invalid task_json: with tables_digest, initial_state.tables travels in tables_json only"
                    )
                state["tables"] = tables.tables
        return KnownTask.of(_validate(TaskDescription, data, "invalid task_json"), code, tables)

    def _code_part(self, text: str, digest: str) -> SharedCode | None:
        return _part(self._code, "code", text, digest, _shared_code)

    def _tables_part(self, text: str, digest: str) -> SharedTables | None:
        return _part(self._tables, "tables", text, digest, _shared_tables)

    def settle(self, known: KnownTask, full_hash: str) -> None:
        """Record that ``known``'s initial state has ``full_hash``; a task whose initial state equals one
        already kept then shares that copy of the tables (so ``known.initial`` may change here)."""
        known.full_hash = full_hash
        shared = self._initials.get(full_hash)
        if shared is not None:
            known.initial = shared
        elif self._tasks.get(known.digest) is known:
            self._initials[full_hash] = known.initial
        if known.tables_part is not None:  # the next task naming these tables skips hashing them
            known.tables_part.full_hash = full_hash
            known.tables_part.tables = known.initial

    def _forget_initial(self, full_hash: str | None) -> None:
        if full_hash is not None and all(task.full_hash != full_hash for task in self._tasks.values()):
            self._initials.pop(full_hash, None)


_Part = TypeVar("_Part", SharedCode, SharedTables)


def _part(
    parts: OrderedDict[str, _Part], what: str, text: str, digest: str, make: Callable[[Any], _Part]
) -> _Part | None:
    """The part ``digest`` names: kept, or made from ``text`` (checked against the digest) and kept."""
    if not digest:
        if text:
            raise RegistrationError(f"{what}_json is given without {what}_digest")
        return None
    digest = digest.lower()
    kept = parts.get(digest)
    if kept is not None:
        # The text a caller sends again with a kept part is not read: the digest names the content.
        parts.move_to_end(digest)
        return kept
    if not text:
        raise PartNotCachedError(what, digest)
    _check_digest(what, text, digest)
    kept = parts[digest] = make(parse_json(text, f"{what}_json"))
    while len(parts) > PART_CAPACITY:
        parts.popitem(last=False)
    return kept


def _shared_code(data: Any) -> SharedCode:
    # A ToolCode object, not a dict: every task naming it refers to it as it is (validated once).
    return SharedCode(_validate(ToolCode, data, "invalid code_json"))


def _shared_tables(data: Any) -> SharedTables:
    if not isinstance(data, dict):
        raise RegistrationError("invalid tables_json: it must be a JSON object of tables")
    return SharedTables({name: in_key_order(table) for name, table in cast(dict[str, Any], data).items()})


def _check_digest(what: str, text: str, digest: str) -> None:
    actual = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    if actual != digest.lower():
        raise RegistrationError(f"{what}_digest {digest} is not the SHA-256 of {what}_json ({actual})")


def parse_json(text: str, what: str) -> Any:
    """``text`` parsed as strict JSON; RegistrationError naming ``what`` and the problem otherwise."""
    try:
        with _collector_paused():
            return orjson.loads(text)
    except orjson.JSONDecodeError as error:
        # orjson refuses integers beyond 64 bits, which JSON allows; the stdlib parser takes those, and
        # still refuses the constants (NaN, Infinity) that are not JSON.
        try:
            return json.loads(text, parse_constant=_not_json)
        except ValueError:
            raise RegistrationError(f"{what} is not valid JSON: {error}") from error


@contextlib.contextmanager
def _collector_paused() -> Generator[None, None, None]:
    """No garbage collection while a big document is parsed.

    Parsing a task of 10k records allocates some 50k containers, which sets off the collector over and
    over (each pass scanning what the runner already holds) although a freshly parsed document holds no
    cycle: in a runner process, that doubled the time of a first RegisterTrial at 10k records.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


_Model = TypeVar("_Model", TrialSpec, TaskDescription, ToolCode)


def _validate(model: type[_Model], data: Any, what: str) -> _Model:
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise RegistrationError(f"{what}: {describe_validation_error(error)}") from error
