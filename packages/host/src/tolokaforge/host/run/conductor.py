"""One trial, start to finish: register, converse, grade (when the protocol allows), clean up, retry.

* Only ``agent_done``, ``user_stop`` and ``max_turns`` reach GradeTrial; every other ending is answered
  here without an RPC (no grade, the reason on the trajectory).
* A grade the runner cannot give publishes no score: its error is recorded as ``grading_error``. A
  trial the runner no longer holds at grading was lost, like one lost during the conversation.
* ``trial_lost`` is retried: CleanupTrial first, then a new attempt under an attempt-scoped id; a
  trial lost on every attempt is unfinished (below).
* CleanupTrial runs after every attempt, whatever happened.
* An attempt the infrastructure ended (the runner unreachable past its budget, a registration the
  runner says may succeed later) is *unfinished*: ``infrastructure_error`` says why, no grade is
  written for it, and ``--resume`` runs it again (docs/faults.md).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from tolokaforge.contracts.runner import JudgeStatus
from tolokaforge.core.models import JudgeModelConfig, TrialSpec
from tolokaforge.core.runner_api import (
    GradeRequest,
    GradeResult,
    GradingFailedError,
    RegistrationFailedError,
    Runner,
    RunnerError,
    RunnerUnavailableError,
    TrialLostError,
    judge_error,
)
from tolokaforge.core.termination import GRADEABLE_TERMINATION_REASONS, TerminationReason

from ..agents.base import AgentFactory
from ..errors import HostError
from ..packs.loader import LoadedTask
from ..results.outcome import Episode, LostAttempt, TrialOutcome
from ..results.trace_results import check_trace_payload
from ..turns import Usage
from ..users.base import UserSimulatorFactory
from .episode import run_episode
from .slots import TrialSlot
from .trial_spec import build_trial_spec

__all__ = ["TrialSettings", "run_trial"]


@dataclass(frozen=True)
class TrialSettings:
    run_id: str
    max_attempts: int = 3
    default_max_turns: int = 30
    judge_model: JudgeModelConfig | None = None


async def run_trial(
    runner: Runner,
    loaded: LoadedTask,
    trial_index: int,
    agents: AgentFactory,
    users: UserSimulatorFactory,
    settings: TrialSettings,
    *,
    first_attempt: int = 0,
    slot: TrialSlot | None = None,
    on_episode: Callable[[Episode], None] | None = None,
) -> TrialOutcome:
    """Run attempts ``first_attempt`` .. ``max_attempts - 1`` until one is not lost.

    ``first_attempt`` > 0 continues a trial whose earlier attempts were lost elsewhere (a Ray worker that
    died): the attempt ids stay unique and the budget stays ``max_attempts`` in all. With ``slot`` (held
    for its episode), each attempt's grading and cleanup run on a grading slot (slots.py). ``on_episode``
    hears each attempt's episode as it ends, before it is graded (the RL environment ends its last step
    there, tolokaforge.env).
    """
    if not 0 <= first_attempt < settings.max_attempts:
        raise ValueError(f"first_attempt {first_attempt} is outside 0..{settings.max_attempts - 1}")
    started = time.perf_counter()
    task = loaded.task
    outcome: TrialOutcome | None = None
    lost: list[LostAttempt] = []
    usage = Usage()
    for attempt in range(first_attempt, settings.max_attempts):
        if slot is not None:
            await slot.to_episode()
        spec = build_trial_spec(
            task,
            run_id=settings.run_id,
            trial_index=trial_index,
            attempt=attempt,
            agent_model=agents.model,
            judge_model=settings.judge_model,
        )
        outcome = await _attempt(
            runner, loaded, trial_index, spec.trial_id, agents, users, settings, spec, slot, on_episode
        )
        usage.add(outcome.episode.usage)
        if outcome.termination != TerminationReason.TRIAL_LOST:
            break
        lost.append(LostAttempt(outcome.trial_id, outcome.episode.error or "trial lost"))
    assert outcome is not None
    outcome.lost_attempts = lost[:-1] if outcome.termination == TerminationReason.TRIAL_LOST else lost
    if outcome.termination == TerminationReason.TRIAL_LOST and outcome.infrastructure_error is None:
        # The runner lost every attempt: nothing was graded, so the trial is unfinished (no grade is
        # written) and --resume runs it again, as after any other infrastructure failure.
        outcome.infrastructure_error = (
            f"the runner lost the trial on every attempt ({len(lost)}): {lost[-1].error}"
        )
    outcome.usage = usage
    outcome.judge_price_known = settings.judge_model is None or settings.judge_model.price is not None
    # Waiting for a slot is the run's queue, not the trial's time.
    outcome.wall_time_s = time.perf_counter() - started - (slot.waited_s if slot is not None else 0.0)
    return outcome


async def _attempt(
    runner: Runner,
    loaded: LoadedTask,
    trial_index: int,
    trial_id: str,
    agents: AgentFactory,
    users: UserSimulatorFactory,
    settings: TrialSettings,
    spec: TrialSpec,
    slot: TrialSlot | None,
    on_episode: Callable[[Episode], None] | None = None,
) -> TrialOutcome:
    task = loaded.task
    outcome = TrialOutcome(task.task_id, trial_index, trial_id, Episode())
    released = False
    try:
        registered = await runner.register(spec)
    except (RegistrationFailedError, RunnerUnavailableError) as error:
        outcome.episode.termination, outcome.episode.error = TerminationReason.ERROR, str(error)
        if isinstance(error, RunnerUnavailableError) or error.retryable:
            outcome.infrastructure_error = str(error)
        return outcome
    try:
        try:
            outcome.episode = await run_episode(
                runner,
                registered,
                task,
                agents.for_trial(task),
                users.for_trial(task),
                max_turns=task.max_turns or settings.default_max_turns,
            )
        except HostError as error:  # e.g. an llm user asked for where no model is configured
            outcome.episode.termination, outcome.episode.error = TerminationReason.ERROR, str(error)
        outcome.infrastructure_error = outcome.episode.infrastructure_error
        if on_episode is not None:
            on_episode(outcome.episode)
        if slot is not None:
            await slot.to_grading()  # the next trial's episode starts while this one is graded
        if outcome.termination in GRADEABLE_TERMINATION_REASONS:
            released = await _grade(runner, outcome)
    finally:
        # Every attempt is cleaned up (by GradeTrial itself, when the runner released the trial); a
        # runner gone for good is reported on the trajectory, not raised.
        if not released:
            with contextlib.suppress(RunnerError):
                await runner.release(trial_id)
    return outcome


async def _grade(runner: Runner, outcome: TrialOutcome) -> bool:
    """Grade the attempt into ``outcome``; whether the runner released the trial with it."""
    episode = outcome.episode
    assert episode.termination is not None
    request = GradeRequest(outcome.trial_id, episode.messages, episode.termination, release=True)
    try:
        result = await runner.grade(request)
    except RunnerUnavailableError as error:
        outcome.infrastructure_error = f"GradeTrial: {error}"
        return False
    except TrialLostError as error:
        episode.termination, episode.error = TerminationReason.TRIAL_LOST, str(error)
        return False
    except GradingFailedError as error:
        outcome.grading_error = str(error)
        return False
    _read_grade(result, outcome)
    return result.released


def _read_grade(result: GradeResult, outcome: TrialOutcome) -> None:
    grade = result.grade
    try:
        check_trace_payload(grade)
    except ValueError as error:
        outcome.grading_error = f"the grade's trace-check payload is unreadable: {error}"
        return
    outcome.grade = grade
    if grade.judge_status == JudgeStatus.ERRORED:
        # The judge gave no score, so the grade is unusable: published without one (docs/judge.md).
        outcome.grading_error = judge_error(grade) or "Judge: errored"
