"""A RegisterTrial request's TrialSpec, decoded, with the tasks (and task parts) sent once kept by digest.

A caller that sends a task once (``RegisterTrialRequest.task_digest``, docs/protocol/runner.md) lets
every later trial of that task skip sending, parsing and validating it: its decoded task object is kept
here, and every later trial's TrialSpec carries that very object, which is how the runner finds what it
learnt about the task (trials/task_cache.py). The tasks of a pack mostly share their two big parts,
the code bundle and often the initial tables; a caller may send those apart, once per runner
(``code_digest``, ``tables_digest``), and every task naming one gets the same object.

Tasks sent whole: a caller that sends every trial's task in its TrialSpec (a foreign engine: no
``task_digest``) has each parsed again, but not the rest. The parsed task is digested here (written
back with orjson, then SHA-256: about a fifth of the parse), and a TrialSpec whose task has the digest of
one kept gets that very object, so its trial shares all the runner learnt about the task as a trial of
a task sent once does: its initial tables in the store, its code, its golden replays. A task one
record apart has another digest: it is another task.

JSON is parsed with orjson, which is strict: ``NaN``, ``Infinity`` and other text that is not JSON are
refused here, where the request is at fault, rather than by the store later.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import orjson
from cachetools import LRUCache
from pydantic import ValidationError

from tolokaforge.core.models import TaskDescription, ToolCode, TrialSpec, describe_validation_error

from ..errors import PartNotCachedError, RegistrationError, TaskNotCachedError
from ..state.mirror import in_key_order

__all__ = ["TaskParts", "TaskWire", "parse_json"]

CAPACITY = 256
"""Tasks kept by digest; the least recently registered goes first."""

WHOLE_CAPACITY = 64
"""Tasks sent whole kept by the digest of their content; the least recently used goes first.
Fewer than by ``task_digest``: such a caller may well send each task only once."""

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


class TaskWire:
    """Decodes TrialSpecs, keeping the tasks and parts sent by digest."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self._tasks: LRUCache[str, TaskDescription] = LRUCache(capacity)
        self._whole: LRUCache[str, TaskDescription] = LRUCache(WHOLE_CAPACITY)
        self._code: LRUCache[str, ToolCode] = LRUCache(PART_CAPACITY)
        self._tables: LRUCache[str, dict[str, Any]] = LRUCache(PART_CAPACITY)

    def __len__(self) -> int:
        return len(self._tasks)

    def decode(
        self, trial_spec_json: str, task_json: str, task_digest: str, parts: TaskParts | None = None
    ) -> TrialSpec:
        """The request's TrialSpec; its task parsed now, or the object kept for its digest (the one
        sent, or for a task sent whole, the digest of its content)."""
        parts = parts or TaskParts()
        if not task_digest:
            if task_json:
                raise RegistrationError("task_json is given without task_digest")
            if parts:
                raise RegistrationError("code_* and tables_* are given without task_digest")
            return self._plain(parse_json(trial_spec_json, "trial_spec_json"))
        key = task_digest.lower()
        if parts.code_digest or parts.tables_digest:
            key = f"{key}|{parts.code_digest.lower()}|{parts.tables_digest.lower()}"
        task = self._tasks.get(key)
        if task is None:
            task = self._tasks[key] = self._parse_task(task_json, task_digest, parts)
        context = parse_json(trial_spec_json, "trial_spec_json")
        if not isinstance(context, dict):
            raise RegistrationError("invalid TrialSpec: trial_spec_json must be a JSON object")
        if "task" in context:
            raise RegistrationError("invalid TrialSpec: with task_digest, the task travels in task_json only")
        # A TaskDescription instance is taken as it is (pydantic does not revalidate instances).
        return _validate(TrialSpec, {**context, "task": task}, "invalid TrialSpec")

    def _plain(self, data: Any) -> TrialSpec:
        """A TrialSpec sent whole, its task the very object kept for a task of the same content sent
        before, if any (module doc: "Tasks sent whole")."""
        task = cast(dict[str, Any], data).get("task") if isinstance(data, dict) else None
        digest = _content_digest(cast(dict[str, Any], task)) if isinstance(task, dict) else None
        if digest is None:
            return _validate(TrialSpec, data, "invalid TrialSpec")
        kept = self._whole.get(digest)
        if kept is not None:
            return _validate(TrialSpec, {**cast(dict[str, Any], data), "task": kept}, "invalid TrialSpec")
        spec = _validate(TrialSpec, data, "invalid TrialSpec")
        self._whole[digest] = spec.task
        return spec

    def _parse_task(self, task_json: str, task_digest: str, parts: TaskParts) -> TaskDescription:
        if not task_json:
            raise TaskNotCachedError(task_digest)
        _check_digest("task", task_json, task_digest)
        code = _part(self._code, "code", parts.code_json, parts.code_digest, _code)
        tables = _part(self._tables, "tables", parts.tables_json, parts.tables_digest, _tables)
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
                task["tool_code"] = code  # an instance: pydantic keeps it as it is, shared
            if tables is not None:
                state = task.setdefault("initial_state", {})
                if not isinstance(state, dict):
                    raise RegistrationError("invalid task_json: initial_state must be a JSON object")
                if "tables" in state:
                    raise RegistrationError(
                        "invalid task_json: with tables_digest, initial_state.tables travels in tables_json only"
                    )
                state["tables"] = tables
        return _validate(TaskDescription, data, "invalid task_json")


_Part = TypeVar("_Part", ToolCode, dict[str, Any])


def _part(
    parts: LRUCache[str, _Part], what: str, text: str, digest: str, make: Callable[[Any], _Part]
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
        return kept
    if not text:
        raise PartNotCachedError(what, digest)
    _check_digest(what, text, digest)
    kept = parts[digest] = make(parse_json(text, f"{what}_json"))
    return kept


def _code(data: Any) -> ToolCode:
    # A ToolCode object, not a dict: every task naming it refers to it as it is (validated once).
    return _validate(ToolCode, data, "invalid code_json")


def _tables(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise RegistrationError("invalid tables_json: it must be a JSON object of tables")
    return {name: in_key_order(table) for name, table in cast(dict[str, Any], data).items()}


def _content_digest(task: dict[str, Any]) -> str | None:
    """A digest of a parsed task's content, or None for one orjson cannot write (integers beyond 64
    bits): such a task is not recognised, only parsed again."""
    try:
        # Keys in the order they came: equal text gives equal bytes, and a task whose keys come in
        # another order is merely not shared.
        return hashlib.sha256(orjson.dumps(task)).hexdigest()
    except orjson.JSONEncodeError:
        return None


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
