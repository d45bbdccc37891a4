"""Reading a RegisterTrial request's TrialSpec, and the tasks a runner keeps by digest.

A caller that sends a task once (``RegisterTrialRequest.task_digest``, docs/protocol/runner.md) lets
every later trial of that task skip receiving, parsing and validating it: the runner keeps the parsed
task here, with its initial tables in the order the store returns them. Those tables are shared by
every trial of the task and never changed in place (state/mirror.py copies a table before its first
change), and the store shares its copy too, found by the initial state's full hash. So registering
the 2nd..Nth trial of a task costs nothing in the size of its state.

JSON is parsed with orjson, which is strict: ``NaN``, ``Infinity`` and other text that is not JSON are
refused here, where the request is at fault, rather than by the store later.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
from collections import OrderedDict
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson
from pydantic import ValidationError

from tolokaforge.contracts.runner import RegisterTrialResponse
from tolokaforge.core.models import TaskDescription, TrialSpec, describe_validation_error

from .code_loader import CodeBundle
from .errors import RegistrationError, TaskNotCachedError
from .golden_memo import GoldenMemo
from .state.mirror import in_key_order
from .tools.base import Tool
from .workers.code import WorkerCode

__all__ = ["KnownTask", "SharedReply", "TaskCache", "parse_json"]

CAPACITY = 256
"""Tasks kept by digest; the least recently registered goes first."""


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
    """The task's digest when the cache keeps it ("" for a task sent whole in a TrialSpec)."""
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
    def of(cls, task: TaskDescription) -> KnownTask:
        return cls(task, {name: in_key_order(table) for name, table in task.initial_state.tables.items()})


class TaskCache:
    def __init__(self, capacity: int = CAPACITY) -> None:
        self._capacity = capacity
        self._tasks: OrderedDict[str, KnownTask] = OrderedDict()
        self._initials: dict[str, dict[str, Any]] = {}
        """One copy of each initial state the kept tasks start from, by its full hash: tasks of one
        pack often share their tables, and a forked worker is sent only the tables that are not its
        zygote's very objects (workers/code.py)."""

    def __len__(self) -> int:
        return len(self._tasks)

    def resolve(self, trial_spec_json: str, task_json: str, task_digest: str) -> tuple[TrialSpec, KnownTask]:
        """The TrialSpec of a request, and its task as kept here (parsed now, or found by digest)."""
        if not task_digest:
            if task_json:
                raise RegistrationError("task_json is given without task_digest")
            spec = _validate(TrialSpec, parse_json(trial_spec_json, "trial_spec_json"), "invalid TrialSpec")
            return spec, KnownTask.of(spec.task)
        known = self._tasks.get(task_digest)
        if known is None:
            if not task_json:
                raise TaskNotCachedError(task_digest)
            actual = hashlib.sha256(task_json.encode("utf-8", "surrogatepass")).hexdigest()
            if actual != task_digest.lower():
                raise RegistrationError(
                    f"task_digest {task_digest} is not the SHA-256 of task_json ({actual})"
                )
            task = _validate(TaskDescription, parse_json(task_json, "task_json"), "invalid task_json")
            known = KnownTask.of(task)
            known.digest = task_digest
            self._tasks[task_digest] = known
            while len(self._tasks) > self._capacity:
                _, evicted = self._tasks.popitem(last=False)
                self._forget_initial(evicted.full_hash)
        else:
            self._tasks.move_to_end(task_digest)
        context = parse_json(trial_spec_json, "trial_spec_json")
        if not isinstance(context, dict):
            raise RegistrationError("invalid TrialSpec: trial_spec_json must be a JSON object")
        if "task" in context:
            raise RegistrationError("invalid TrialSpec: with task_digest, the task travels in task_json only")
        # A TaskDescription instance is taken as it is (pydantic does not revalidate instances).
        spec = _validate(TrialSpec, {**context, "task": known.task}, "invalid TrialSpec")
        return spec, known

    def settle(self, known: KnownTask, full_hash: str) -> None:
        """Record that ``known``'s initial state has ``full_hash``; a task whose initial state equals one
        already kept then shares that copy of the tables (so ``known.initial`` may change here)."""
        known.full_hash = full_hash
        shared = self._initials.get(full_hash)
        if shared is not None:
            known.initial = shared
        elif self._tasks.get(known.digest) is known:
            self._initials[full_hash] = known.initial

    def _forget_initial(self, full_hash: str | None) -> None:
        if full_hash is not None and all(task.full_hash != full_hash for task in self._tasks.values()):
            self._initials.pop(full_hash, None)


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


_Model = TypeVar("_Model", TrialSpec, TaskDescription)


def _validate(model: type[_Model], data: Any, what: str) -> _Model:
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise RegistrationError(f"{what}: {describe_validation_error(error)}") from error
