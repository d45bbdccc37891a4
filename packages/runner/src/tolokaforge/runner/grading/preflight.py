"""Refuse, before any grading branch, a pack whose assertions the runner could only score as 0.0."""

from __future__ import annotations

from tolokaforge.core.models import TaskDescription

from ..errors import NotGradeableAsAuthored
from .jsonpath_checks import STATE_ROOTS, UNCARRIED_ROOTS, path_root

__all__ = ["check_gradeable_as_authored"]


def check_gradeable_as_authored(
    trial_id: str, task: TaskDescription, *, has_judge_model: bool = True
) -> None:
    if task.grading.llm_judge is not None and not has_judge_model:
        raise NotGradeableAsAuthored(
            trial_id,
            "llm_judge needs a judge model and the TrialSpec carries none (judge_model): the judge model "
            "is a run setting, e.g. `tolokaforge run --judge-model M`",
        )
    state_checks = task.grading.state_checks
    if state_checks is None:
        return
    for check in state_checks.jsonpaths:
        root = path_root(check.path)
        if root not in STATE_ROOTS:
            where = f"'{root}'" if root else "nothing the runner holds"
            kind = (
                "state the runner's JSONPath grading does not carry"
                if root in UNCARRIED_ROOTS
                else "no state the runner holds"
            )
            raise NotGradeableAsAuthored(
                trial_id,
                f"state_checks.jsonpaths declares path '{check.path}', which addresses {kind} (root {where}); "
                "address the trial's tables as $.db.<table>... (or $.tables...), or for a file use "
                "path_glob: with contains_ci: on the core engine",
            )
    if task.initial_state.provisions_database:
        return
    if state_checks.jsonpaths:
        key, assertion = "jsonpaths", f"path '{state_checks.jsonpaths[0].path}'"
    elif state_checks.hash_enabled:
        key, assertion = "hash", "hash.enabled: true"
    else:
        return
    raise NotGradeableAsAuthored(
        trial_id,
        f"state_checks.{key} ({assertion}) reads the trial's database, but the task's initial_state "
        "provisions none (no tables, schemas or unstable fields); either declare the tables in "
        f"initial_state, or remove state_checks.{key}",
    )
