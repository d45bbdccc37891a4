"""Trial ids and TrialSpecs: one per (task, trial index, attempt).

The first attempt of a trial is ``{task_id}:{trial_index}``; a retry after ``trial_lost`` is
attempt-scoped, ``{task_id}:{trial_index}:a{attempt}``, so a runner that still holds (or records) the
lost attempt can never confuse it with the new one.
"""

from __future__ import annotations

from tolokaforge.core.models import JudgeModelConfig, TaskDescription, TrialSpec

__all__ = ["build_trial_spec", "trial_id"]


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
