"""Trial ids and TrialSpecs: one per (task, trial index, attempt), ready for RegisterTrial.

The first attempt of a trial is ``{task_id}:{trial_index}``; a retry after ``trial_lost`` is
attempt-scoped, ``{task_id}:{trial_index}:a{attempt}``, so a runner that still holds (or records) the
lost attempt can never confuse it with the new one.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from tolokaforge.contracts.runner import RegisterTrialRequest
from tolokaforge.core.models import JudgeModelConfig, TaskDescription, ToolCode, TrialSpec
from tolokaforge.core.protocol import ENGINE_PROTOCOL_VERSION

__all__ = ["TaskWire", "TaskWires", "build_trial_spec", "register_request", "trial_id"]


def trial_id(task_id: str, trial_index: int, attempt: int = 0) -> str:
    """``task:0`` for the first attempt, ``task:0:a1`` for the first retry."""
    base = f"{task_id}:{trial_index}"
    return base if attempt == 0 else f"{base}:a{attempt}"


def build_trial_spec(
    task: TaskDescription,
    *,
    run_id: str,
    trial_index: int,
    attempt: int = 0,
    agent_model: str | None = None,
    judge_model: JudgeModelConfig | None = None,
) -> TrialSpec:
    return TrialSpec(
        trial_id=trial_id(task.task_id, trial_index, attempt),
        run_id=run_id,
        trial_index=trial_index,
        attempt_id=attempt,
        task=task,
        agent_model_config={"model": agent_model} if agent_model else None,
        # Only a task with a judge carries the judge model: the others have nothing to judge.
        judge_model=judge_model if task.grading.llm_judge is not None else None,
    )


@dataclass(frozen=True, slots=True)
class TaskWire:
    """A task as RegisterTrial sends it once per runner: its JSON and that JSON's SHA-256."""

    json: str
    digest: str


class TaskWires:
    """Each task's wire form, serialised once however many trials it has."""

    def __init__(self) -> None:
        # By identity: a run's tasks are the same objects for every trial. The task is kept with its
        # wire form so that its id() is never reused by another object while it is here.
        self._wires: dict[int, tuple[TaskDescription, TaskWire]] = {}
        self._code: dict[int, tuple[ToolCode, str]] = {}
        """Code bundles by identity, with their JSON: a pack's tasks share one bundle object."""

    def of(self, task: TaskDescription) -> TaskWire:
        held = self._wires.get(id(task))
        if held is None or held[0] is not task:
            text = self._json(task)
            held = (task, TaskWire(text, hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()))
            self._wires[id(task)] = held
        return held[1]

    def _json(self, task: TaskDescription) -> str:
        # exclude_unset: a JSONPath check knows its operator by the fields that were given, so an
        # unset operator must not travel as an explicit null.
        code = task.tool_code
        if code is None or "tool_code" not in task.model_fields_set:
            return task.model_dump_json(exclude_unset=True)
        # The code bundle (every text file of the pack: most of a task's JSON) is one object shared by
        # all the pack's tasks, so its JSON is made once and joined into each task's.
        bundle = self._code.get(id(code))
        if bundle is None or bundle[0] is not code:
            bundle = (code, code.model_dump_json(exclude_unset=True))
            self._code[id(code)] = bundle
        rest = task.model_dump_json(exclude_unset=True, exclude={"tool_code"})
        return f'{rest[:-1]}{"," if rest != "{}" else ""}"tool_code":{bundle[1]}}}'


def register_request(
    spec: TrialSpec, task: TaskWire | None = None, *, send_task: bool = True
) -> RegisterTrialRequest:
    """The RegisterTrial request for ``spec``, always carrying this engine's protocol version.

    Without ``task``, the whole TrialSpec travels in trial_spec_json. With it (a runner that accepts
    task digests), the task travels apart: as task_json when ``send_task``, else by its digest only.
    """
    if task is None:
        return RegisterTrialRequest(
            trial_id=spec.trial_id,
            trial_spec_json=spec.model_dump_json(exclude_unset=True),
            engine_protocol_version=ENGINE_PROTOCOL_VERSION,
        )
    return RegisterTrialRequest(
        trial_id=spec.trial_id,
        trial_spec_json=spec.model_dump_json(exclude_unset=True, exclude={"task"}),
        engine_protocol_version=ENGINE_PROTOCOL_VERSION,
        task_json=task.json if send_task else "",
        task_digest=task.digest,
    )
