"""A TrialSpec as RegisterTrial carries it: each task serialised once, sent once per runner by digest.

A runner whose HealthCheck answers ``accepts_task_digest`` keeps a task it was sent once and is then
named it by digest (docs/protocol/runner.md); ``accepts_task_parts`` lets a pack's shared code bundle
and tables travel apart, once each. This is the gRPC adapter's concern alone: the embedded runner is
handed the TrialSpec object.
"""

from __future__ import annotations

import hashlib
from collections.abc import Container
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import TypeAdapter

from tolokaforge.contracts.runner import RegisterTrialRequest
from tolokaforge.core.models import TaskDescription, ToolCode, TrialSpec
from tolokaforge.core.protocol import ENGINE_PROTOCOL_VERSION

__all__ = ["TaskWire", "TaskWires", "WirePart", "register_request"]


@dataclass(frozen=True, slots=True)
class WirePart:
    """A piece of JSON sent once per runner, and its SHA-256 (lowercase hex)."""

    json: str
    digest: str

    @classmethod
    def of(cls, text: str) -> WirePart:
        return cls(text, hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest())


@dataclass(frozen=True, slots=True)
class TaskWire:
    """A task as RegisterTrial sends it once per runner: its JSON and that JSON's SHA-256, and, when the
    runner takes task parts, its code bundle and initial tables apart (each once per runner)."""

    task: WirePart
    code: WirePart | None = None
    tables: WirePart | None = None

    @property
    def task_key(self) -> str:
        """What the runner keeps the task under: its digest, with its parts' when it has any."""
        if self.code is None and self.tables is None:
            return self.task.digest
        code = self.code.digest if self.code is not None else ""
        tables = self.tables.digest if self.tables is not None else ""
        return f"{self.task.digest}|{code}|{tables}"

    @property
    def keys(self) -> tuple[str, ...]:
        """Everything the runner must hold for this task: the task, and each of its parts by digest."""
        return (self.task_key, *(part.digest for part in (self.code, self.tables) if part is not None))


_TABLES: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


def _tables_json(tables: dict[str, Any]) -> str:
    # orjson is three times faster than pydantic on a pack's tables (a few hundred records); what it
    # refuses (a key that is not a string, an integer beyond 64 bits) pydantic writes as the plain dump would.
    try:
        return orjson.dumps(tables).decode()
    except TypeError:
        return _TABLES.dump_json(tables).decode()


class TaskWires:
    """Each task's wire form, serialised once however many trials it has.

    ``parts``: the code bundle and the initial tables travel apart from the task (a runner whose
    HealthCheck answers ``accepts_task_parts``), so a pack's tasks, which share its code bundle and
    often their tables, send each of those once.
    """

    def __init__(self, *, parts: bool = False) -> None:
        self._parts = parts
        # By identity: a run's tasks are the same objects for every trial. The task is kept with its
        # wire form so that its id() is never reused by another object while it is here.
        self._wires: dict[int, tuple[TaskDescription, TaskWire]] = {}
        self._code: dict[int, tuple[ToolCode, str]] = {}
        """Code bundles by identity, with their JSON: a pack's tasks share one bundle object."""
        self._code_parts: dict[int, tuple[ToolCode, WirePart]] = {}

    def of(self, task: TaskDescription) -> TaskWire:
        held = self._wires.get(id(task))
        if held is None or held[0] is not task:
            held = (task, self._parts_of(task) if self._parts else TaskWire(WirePart.of(self._json(task))))
            self._wires[id(task)] = held
        return held[1]

    def _code_json(self, code: ToolCode) -> str:
        bundle = self._code.get(id(code))
        if bundle is None or bundle[0] is not code:
            bundle = (code, code.model_dump_json(exclude_unset=True))
            self._code[id(code)] = bundle
        return bundle[1]

    def _json(self, task: TaskDescription) -> str:
        # exclude_unset: a JSONPath check knows its operator by the fields that were given, so an
        # unset operator must not travel as an explicit null.
        code = task.tool_code
        if code is None or "tool_code" not in task.model_fields_set:
            return task.model_dump_json(exclude_unset=True)
        # The code bundle (every text file of the pack: most of a task's JSON) is one object shared by
        # all the pack's tasks, so its JSON is made once and joined into each task's.
        rest = task.model_dump_json(exclude_unset=True, exclude={"tool_code"})
        return f'{rest[:-1]}{"," if rest != "{}" else ""}"tool_code":{self._code_json(code)}}}'

    def _parts_of(self, task: TaskDescription) -> TaskWire:
        code: WirePart | None = None
        tables: WirePart | None = None
        if task.tool_code is not None and "tool_code" in task.model_fields_set:
            code = self._code_part(task.tool_code)
        state = task.initial_state
        if "initial_state" in task.model_fields_set and "tables" in state.model_fields_set:
            tables = WirePart.of(_tables_json(state.tables))
        excluded: dict[str, Any] = {}
        if code is not None:
            excluded["tool_code"] = True
        if tables is not None:
            excluded["initial_state"] = {"tables"}
        return TaskWire(WirePart.of(task.model_dump_json(exclude_unset=True, exclude=excluded)), code, tables)

    def _code_part(self, code: ToolCode) -> WirePart:
        held = self._code_parts.get(id(code))
        if held is None or held[0] is not code:
            held = (code, WirePart.of(self._code_json(code)))
            self._code_parts[id(code)] = held
        return held[1]


def register_request(
    spec: TrialSpec, task: TaskWire | None = None, *, sent: Container[str] = ()
) -> RegisterTrialRequest:
    """The RegisterTrial request for ``spec``, always carrying this engine's protocol version.

    Without ``task``, the whole TrialSpec travels in trial_spec_json. With it (a runner that accepts
    task digests), the task travels apart, and its parts apart from it: each by its digest only when
    ``sent`` holds that digest (the runner keeps it), else with its JSON.
    """
    if task is None:
        return RegisterTrialRequest(
            trial_id=spec.trial_id,
            trial_spec_json=spec.model_dump_json(exclude_unset=True),
            engine_protocol_version=ENGINE_PROTOCOL_VERSION,
        )

    def text(part: WirePart | None) -> str:
        return "" if part is None or part.digest in sent else part.json

    return RegisterTrialRequest(
        trial_id=spec.trial_id,
        trial_spec_json=spec.model_dump_json(exclude_unset=True, exclude={"task"}),
        engine_protocol_version=ENGINE_PROTOCOL_VERSION,
        task_json="" if task.task_key in sent else task.task.json,
        task_digest=task.task.digest,
        code_json=text(task.code),
        code_digest=task.code.digest if task.code is not None else "",
        tables_json=text(task.tables),
        tables_digest=task.tables.digest if task.tables is not None else "",
    )
