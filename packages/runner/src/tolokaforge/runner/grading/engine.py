"""GradeTrial entry point."""

from __future__ import annotations

from tolokaforge.contracts.runner import GradeTrialRequest, GradeTrialResponse

from ..executor import ToolExecutor
from ..trial import TrialContext

__all__ = ["grade_trial"]


async def grade_trial(
    trial: TrialContext, request: GradeTrialRequest, executor: ToolExecutor
) -> GradeTrialResponse:
    # Until the grading engine lands, answer honestly: no grade rather than an invented one.
    return GradeTrialResponse(
        success=False, error=f"Trial '{trial.trial_id}' is not gradeable: grading is not implemented"
    )
