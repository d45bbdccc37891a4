"""Golden replays: the golden agent driven through a real trial, with the end state captured.

Composed from the host's own parts -- ``build_trial_spec``, the Runner interface's ``register``, the
trial loop ``run_episode`` with the ``GoldenAgent`` and the scripted user, and ``grade`` -- plus one
GetState(include_unstable) before grading, which the determinism check compares. The conductor runs the same steps but cleans up before anyone could read the state.

:func:`judged_task` turns a task into the form the golden path can be judged on: without a
``golden_response`` nothing the golden agent says is meaningful, so the rules about what the agent
says are set aside (and named). An LLM judge is kept and answered by the deterministic mock judge
(every criterion met, no network), so the rubric's shape and its share in the fold are exercised
offline; the check notes the task as "mock-judged".
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, cast

from tolokaforge.contracts.runner import GetStateRequest, Grade
from tolokaforge.core.models import MOCK_JUDGE_MODEL, ComponentName, JudgeModelConfig, TaskDescription
from tolokaforge.core.runner_api import GradeRequest, GradingFailedError, RunnerError, TrialLostError
from tolokaforge.core.termination import GRADEABLE_TERMINATION_REASONS
from tolokaforge.host import (
    Episode,
    GoldenAgentFactory,
    HostError,
    RegisteredTrial,
    UserRouter,
    build_trial_spec,
    run_episode,
)

from .session import ToloSession

__all__ = ["GoldenReplay", "golden_replay", "judged_task"]

RUN_ID = "pytest-tolokaforge"
MOCK_JUDGE = JudgeModelConfig(model=MOCK_JUDGE_MODEL)
_TEXT_RULES = ("must_contain", "disallow_regex", "communicate_info")


@dataclass
class GoldenReplay:
    """One trial of the golden path. ``error`` is set when it did not get as far as a state."""

    trial_id: str
    started: float
    registered: RegisteredTrial | None = None
    episode: Episode | None = None
    state: dict[str, Any] = field(default_factory=dict[str, Any])
    stable_hash: str = ""
    full_hash: str = ""
    grade: Grade | None = None
    error: str | None = None


def judged_task(task: TaskDescription) -> tuple[TaskDescription, list[str]]:
    """The task with what the golden path cannot be judged on set aside, and a note for each."""
    grading = task.grading
    notes: list[str] = []
    update: dict[str, Any] = {}
    weights: dict[ComponentName, float] = dict(grading.weights)
    rules = grading.transcript_rules
    if rules is not None and not task.golden_response:
        text_rules = [name for name in _TEXT_RULES if getattr(rules, name)]
        if text_rules:
            notes.append(f"not judged (the task has no golden_response): {', '.join(text_rules)}")
            kept = rules.model_copy(update={name: [] for name in text_rules})
            if kept.model_dump(exclude_defaults=True):
                update["transcript_rules"] = kept
            else:
                update["transcript_rules"] = None
                weights.pop("transcript_rules", None)
    if grading.llm_judge is not None:
        notes.append(f"mock-judged: llm_judge (by {MOCK_JUDGE_MODEL}: every criterion met, no LLM consulted)")
    if not update:
        return task, notes
    update["weights"] = weights
    return task.model_copy(update={"grading": grading.model_copy(update=update)}), notes


async def golden_replay(session: ToloSession, task: TaskDescription, *, grade: bool = True) -> GoldenReplay:
    """Register a fresh trial, play the golden path, read the state (with unstable fields), grade, clean up."""
    connection = await session.connection()
    client = connection.client
    spec = build_trial_spec(
        task, run_id=RUN_ID, trial_index=session.next_trial_index(), judge_model=MOCK_JUDGE
    )
    replay = GoldenReplay(trial_id=spec.trial_id, started=time.monotonic())
    try:
        replay.registered = await client.register(spec)
    except (HostError, RunnerError) as error:
        replay.error = str(error)
        return replay
    try:
        episode = await run_episode(
            client,
            replay.registered,
            task,
            GoldenAgentFactory().for_trial(task),
            UserRouter(stand_in=True).for_trial(task),  # the golden agent needs no user model
            max_turns=task.max_turns or 30,
        )
        replay.episode = episode
        state = await connection.stub.get_state(
            GetStateRequest(trial_id=spec.trial_id, include_unstable=True), timeout=60
        )
        if not state.success:
            replay.error = f"GetState failed: {state.error}"
            return replay
        replay.state = cast(dict[str, Any], json.loads(state.state_json or "{}"))
        replay.stable_hash, replay.full_hash = state.stable_hash, state.full_hash
        if not grade:
            return replay
        if episode.termination not in GRADEABLE_TERMINATION_REASONS:
            ended = episode.termination.value if episode.termination else "without a termination reason"
            replay.error = f"the golden episode ended {ended}" + (
                f": {episode.error}" if episode.error else ""
            )
            return replay
        assert episode.termination is not None
        try:
            result = await client.grade(GradeRequest(spec.trial_id, episode.messages, episode.termination))
        except (GradingFailedError, TrialLostError) as error:
            replay.error = f"GradeTrial failed: {error}"
        else:
            replay.grade = result.grade
        return replay
    except (HostError, RunnerError) as error:
        replay.error = str(error)
        return replay
    finally:
        try:
            await client.release(spec.trial_id)
        except (HostError, RunnerError) as error:
            replay.error = replay.error or f"CleanupTrial failed: {error}"
