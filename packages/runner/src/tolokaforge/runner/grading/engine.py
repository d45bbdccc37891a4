"""GradeTrial: join the trial's two views, check the pack can be graded, run the components, fold.

The order is the protocol's: decode and join the timeline (an unreadable or contradictory payload
fails before anything else), refuse what cannot be graded as authored, resolve golden-action names
(before any write), then the components -- what reads the state as the agent left it (file checks,
env assertions) before the golden replay -- the accounted-keys ledger, the fold, and last the task's
``zero_unless_ended_by`` rule. A failure anywhere
raises a GradingFailure carrying the error-table message (edge/servicer.py answers success=false with it);
a grade is never approximated.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tolokaforge.contracts.runner import (
    ComponentItemResult,
    Grade,
    GradeComponents,
    GradeReason,
    GradeReasonVerdict,
    JudgeStatus,
)
from tolokaforge.core.models import COMPONENT_NAMES, GradingConfig
from tolokaforge.core.runner_api import GradeRequest
from tolokaforge.core.transcript.messages import Message
from tolokaforge.core.transcript.timeline import NO_EVENTS_SKIP_REASON, TrialTimeline, build_trial_timeline
from tolokaforge.core.transcript.wire import encode_transcript_wire, split_leading_system_message
from tolokaforge.core.value_tables import present

from ..calls.executor import ToolExecutor
from ..errors import (
    GradingFailure,
    HashGradingFailed,
    NotGradeable,
    NotGradeableAsAuthored,
    UnresolvableGoldenAction,
)
from ..trials.context import TrialContext
from .component import ITEMS, ComponentResult, ItemResult, KeyLedger, note
from .custom_checks import CheckEvidence, run_custom_checks
from .env_assertions import evaluate_env_assertions
from .file_checks import evaluate_file_checks
from .fold import fold
from .golden import resolve_golden_action_names
from .hash_replay import grade_hash
from .jsonpath_checks import evaluate_jsonpaths
from .judge import JudgeOutcome, judge_trial
from .ledger import check_ledger, populated_scored_keys
from .preflight import check_gradeable_as_authored
from .tau2_rules import evaluate_tau2_actions, evaluate_tau2_communicate
from .terminal_tests import TerminalTestsUnavailable, run_terminal_tests
from .trace import TRACE_GATE_FAILED, evaluate_trace_checks
from .transcript_rules import evaluate_transcript_rules
from .web_checks import WebChecksUnavailable, evaluate_web_checks

__all__ = ["grade_trial"]

NOT_EVALUATED = -1.0
_NO_TRANSCRIPT_SKIP = "skipped: no transcript messages"
_EVIDENCE_SKIPS = frozenset({NO_EVENTS_SKIP_REASON, _NO_TRANSCRIPT_SKIP})
_HASH_WEIGHT_NOT_CONSULTED = (
    "state_checks.hash.weight was not consulted: only one state source produced a score"
)


async def grade_trial(trial: TrialContext, request: GradeRequest, executor: ToolExecutor) -> Grade:
    """The trial's grade; :class:`GradingFailure` when none can be given."""
    termination = request.termination
    trial_id = trial.trial_id
    config = trial.spec.task.grading
    agent_system_prompt, messages = _split(request.messages)
    try:
        timeline = build_trial_timeline(messages, trial.history, termination)
    except ValueError as error:
        raise NotGradeable(trial_id, error) from error
    requested = _requested_components(trial_id, request.components)
    check_gradeable_as_authored(trial_id, trial.spec.task, has_judge_model=trial.spec.judge_model is not None)
    ledger = KeyLedger()
    state_checks = config.state_checks
    resolved: list[str] = []
    if state_checks is not None and state_checks.hash_enabled and "state_checks" in requested:
        try:
            resolved = resolve_golden_action_names(
                state_checks.golden_actions,
                trial.tools.agent.names(),
                user_registered=trial.tools.user.names(),
            )
        except UnresolvableGoldenAction as error:
            raise HashGradingFailed(f"UnresolvableGoldenAction: {error}") from error

    results: list[ComponentResult] = []
    state_diff: dict[str, Any] | None = None
    # The order matters: file checks read the workspace, and env assertions the state, as the agent left
    # them, before the golden replay (which may write both) runs.
    files = await _file_checks(trial, config, ledger) if "state_checks" in requested else None
    env_assertions = await _env_assertions(trial, executor, config, requested, ledger)
    terminal = await _terminal_tests(trial, config, requested, ledger)
    web = _web_checks(trial, config, requested, ledger)
    if "state_checks" in requested:
        state_result = await _state_checks(trial, executor, config, resolved, ledger, files)
        if state_result is not None:
            results.append(state_result)
            state_diff = state_result.extra.get("state_diff")
    else:
        _skip_unrequested(ledger, config, "state_checks")
    if env_assertions is not None:
        results.append(env_assertions)
    if terminal is not None:
        results.append(terminal)
    if web is not None:
        results.append(web)
    results += _tau2_checks(
        config,
        requested,
        timeline,
        has_transcript=messages is not None,
        message_offset=0 if agent_system_prompt is None else 1,
        ledger=ledger,
    )
    if config.transcript_rules is not None:
        if "transcript_rules" in requested:
            results.append(evaluate_transcript_rules(config.transcript_rules, timeline, ledger))
        else:
            _skip_unrequested(ledger, config, "transcript_rules")
    trace: ComponentResult | None = None
    if config.trace_checks is not None:
        if "trace_checks" in requested:
            trace = evaluate_trace_checks(config.trace_checks, timeline, ledger)
            results.append(trace)
        else:
            _skip_unrequested(ledger, config, "trace_checks")
    custom_rows: list[Any] = []
    if config.custom_checks is not None:
        if not config.custom_checks.enabled:
            ledger.skip("skipped: custom checks not enabled", "custom_checks")
        elif "custom_checks" not in requested:
            _skip_unrequested(ledger, config, "custom_checks")
        else:
            ledger.evaluate("custom_checks")
            custom = await run_custom_checks(
                config.custom_checks,
                _code_root(trial),
                _check_evidence(trial, messages),
                confinement=trial.processes.confinement,
                cgroup=trial.processes.cgroup,
            )
            custom_rows = custom.extra.get("rows", [])
            results.append(custom)
    judge: JudgeOutcome | None = None
    if config.llm_judge is not None:
        if not messages:
            ledger.skip(_NO_TRANSCRIPT_SKIP, "llm_judge")
        elif "llm_judge" not in requested:
            _skip_unrequested(ledger, config, "llm_judge")
        else:
            assert trial.spec.judge_model is not None  # preflight refuses a judge with no model
            ledger.evaluate("llm_judge")
            judge = await judge_trial(
                trial, config.llm_judge, trial.spec.judge_model, agent_system_prompt, messages
            )
            results.append(judge.component)
    check_ledger(config, ledger)

    scores = {r.name: r.score for r in results if r.score is not None}
    try:
        folded = fold(
            config.combine_method,
            {str(name): share for name, share in config.weights.items()},
            config.pass_threshold,
            scores,
            configured=_configured_components(ledger),
        )
    except ValueError as error:
        raise NotGradeable(trial_id, error) from error
    reasons = [reason for r in results for reason in r.reasons()]
    reasons += [note(r.name, text) for r in results for text in r.notes]
    reasons += [note("skipped", text) for text in ledger.skip_notes()]
    if folded.sentence:
        reasons.append(note("grade", folded.sentence))
    trace_extra = trace.extra if trace is not None else {}
    # A tripped trace gate fails the trial whatever the fold says.
    passed, score = folded.passed and not trace_extra.get(TRACE_GATE_FAILED, False), folded.score
    if judge is not None and judge.errored:
        passed, score = False, 0.0  # unusable: the host publishes no score for it (docs/judge.md)
    elif judge is not None and judge.gate_failed:
        passed = False  # a required criterion not met fails the trial whatever the fold says
    ending = config.zero_unless_ended_by
    if ending is not None and (termination is None or termination.value not in ending):
        # Declared by the task (τ²-bench scores an episode that did not end as planned 0): the components
        # above are still reported, only the grade is forced.
        ended = (
            f"ended by {termination.value}" if termination is not None else "reported no termination reason"
        )
        allowed = " or ".join(ending)
        reasons.append(
            GradeReason(
                kind="grade",
                verdict=GradeReasonVerdict.FAILED,
                message=f"{ended}; this task scores 0 unless it ends by {allowed}",
            )
        )
        passed, score = False, 0.0
    return Grade(
        binary_pass=passed,
        score=score,
        components=GradeComponents(
            state_checks=scores.get("state_checks", NOT_EVALUATED),
            transcript_rules=scores.get("transcript_rules", NOT_EVALUATED),
            llm_judge=scores.get("llm_judge", NOT_EVALUATED),
            custom_checks=scores.get("custom_checks", NOT_EVALUATED),
            trace_checks=scores.get("trace_checks"),
            env_assertions=scores.get("env_assertions"),
            tau2_actions=scores.get("tau2_actions"),
            tau2_communicate=scores.get("tau2_communicate"),
            terminal_tests=scores.get("terminal_tests"),
            web_checks=scores.get("web_checks"),
        ),
        reasons=" | ".join(reason.message for reason in reasons),
        reason_items=reasons,
        state_diff_json=json.dumps(state_diff, default=str) if state_diff else "",
        custom_checks=custom_rows,
        criterion_results=judge.criterion_results if judge is not None else [],
        judge_status=judge.status if judge is not None else JudgeStatus.UNSPECIFIED,
        judge_report=judge.report if judge is not None else None,
        trace_checks=trace_extra.get("trace_results", []),
        trace_checks_summary=trace_extra.get("trace_summary"),
        component_items=[_item_row(item) for r in results for item in r.extra.get(ITEMS, [])],
    )


async def _file_checks(
    trial: TrialContext, config: GradingConfig, ledger: KeyLedger
) -> ComponentResult | None:
    """state_checks.files, read before anything else runs a tool (env assertions, the golden replay)."""
    if config.state_checks is None or not config.state_checks.files:
        return None
    ledger.evaluate("state_checks.files")
    # Blocking reads of files the trial wrote (bounded, but a slow disk is still slow): off the loop.
    return await asyncio.to_thread(evaluate_file_checks, config.state_checks.files, trial.files.workspace)


async def _env_assertions(
    trial: TrialContext, executor: ToolExecutor, config: GradingConfig, requested: set[str], ledger: KeyLedger
) -> ComponentResult | None:
    if config.env_assertions is None:
        return None
    if "env_assertions" not in requested:
        _skip_unrequested(ledger, config, "env_assertions")
        return None
    ledger.evaluate("env_assertions")
    return await evaluate_env_assertions(trial, executor, config.env_assertions)


async def _terminal_tests(
    trial: TrialContext, config: GradingConfig, requested: set[str], ledger: KeyLedger
) -> ComponentResult | None:
    """A terminal task's verifier, over the workspace as the agent left it (before any golden replay)."""
    if config.terminal_tests is None:
        return None
    if "terminal_tests" not in requested:
        _skip_unrequested(ledger, config, "terminal_tests")
        return None
    ledger.evaluate("terminal_tests")
    try:
        return await run_terminal_tests(
            config.terminal_tests,
            trial.files.workspace,
            confinement=trial.processes.confinement,
            cgroup=trial.processes.cgroup,
        )
    except TerminalTestsUnavailable as error:
        raise NotGradeable(trial.trial_id, error) from error


def _web_checks(
    trial: TrialContext, config: GradingConfig, requested: set[str], ledger: KeyLedger
) -> ComponentResult | None:
    """What the trial's browser saw: its web record (a golden replay's browser leaves it alone)."""
    if config.web_checks is None:
        return None
    if "web_checks" not in requested:
        _skip_unrequested(ledger, config, "web_checks")
        return None
    if trial.spec.task.browser is None:
        raise NotGradeableAsAuthored(
            trial.trial_id,
            "web_checks reads what the trial's browser saw, but the task registers no browser "
            "(enable `browser` in tools.agent.enabled)",
        )
    ledger.evaluate("web_checks")
    try:
        return evaluate_web_checks(config.web_checks, trial.web)
    except WebChecksUnavailable as error:
        raise GradingFailure(f"Trial '{trial.trial_id}' cannot grade web_checks: {error}") from error


def _tau2_checks(
    config: GradingConfig,
    requested: set[str],
    timeline: TrialTimeline,
    *,
    has_transcript: bool,
    message_offset: int,
    ledger: KeyLedger,
) -> list[ComponentResult]:
    results: list[ComponentResult] = []
    if config.tau2_actions is not None:
        if "tau2_actions" in requested:
            ledger.evaluate("tau2_actions")
            results.append(evaluate_tau2_actions(config.tau2_actions, timeline))
        else:
            _skip_unrequested(ledger, config, "tau2_actions")
    communicate = config.tau2_communicate
    if communicate is not None:
        if "tau2_communicate" not in requested:
            _skip_unrequested(ledger, config, "tau2_communicate")
        elif communicate.info and not has_transcript:
            ledger.skip(_NO_TRANSCRIPT_SKIP, "tau2_communicate")  # what the agent said was never sent
        else:
            ledger.evaluate("tau2_communicate")
            results.append(evaluate_tau2_communicate(communicate, timeline, message_offset=message_offset))
    return results


def _item_row(item: ItemResult) -> ComponentItemResult:
    return ComponentItemResult(
        component=item.component,
        index=item.index,
        label=item.label,
        met=item.met,
        message=item.message,
        details_json=json.dumps(item.details, default=str) if item.details else "",
    )


async def _state_checks(
    trial: TrialContext,
    executor: ToolExecutor,
    config: GradingConfig,
    resolved: list[str],
    ledger: KeyLedger,
    files: ComponentResult | None,
) -> ComponentResult | None:
    """The state_checks component: the hash verdict, the JSONPath score, or their declared blend."""
    state_checks = config.state_checks
    if state_checks is None:
        return None
    parts: list[ComponentResult] = []
    if state_checks.hash_enabled:
        ledger.evaluate("state_checks.hash.enabled", "state_checks.hash.golden_actions")
        try:
            parts.append(
                await grade_hash(
                    trial,
                    executor,
                    state_checks.golden_actions,
                    resolved,
                    golden_errors=state_checks.golden_errors,
                )
            )
        except GradingFailure:
            raise
        except Exception as error:
            raise HashGradingFailed(f"{type(error).__name__}: {error}") from error
    elif state_checks.golden_actions:
        ledger.skip("skipped: hash grading not enabled", "state_checks.hash.golden_actions")
    jsonpaths: ComponentResult | None = None
    if state_checks.jsonpaths:
        ledger.evaluate("state_checks.jsonpaths")
        async with trial.lock:
            jsonpaths = evaluate_jsonpaths(state_checks.jsonpaths, present(trial.state.mirror.tables))
    checks = _checks_part(jsonpaths, len(state_checks.jsonpaths), files, len(state_checks.files))
    if checks is not None:
        parts.append(checks)
    if not parts:
        return None
    notes: list[str] = []
    if len(parts) == 2:
        weight = state_checks.hash_weight
        if weight is None:
            raise NotGradeable(
                trial.trial_id,
                ValueError(
                    "state_checks.hash.weight is required when a hash verdict and a JSONPath score are both "
                    "real: nothing says how to fold them"
                ),
            )
        assert parts[0].score is not None and parts[1].score is not None
        score = weight * parts[0].score + (1 - weight) * parts[1].score
    else:
        score = parts[0].score
        if state_checks.hash_weight is not None:
            notes.append(_HASH_WEIGHT_NOT_CONSULTED)
    segment = " | ".join(p.segment for p in parts)
    extra = {k: v for p in parts for k, v in p.extra.items()}
    typed = [reason for p in parts for reason in p.reasons()]
    return ComponentResult("state_checks", score, segment, notes=notes, extra=extra, parts=typed)


def _checks_part(
    jsonpaths: ComponentResult | None, n_jsonpaths: int, files: ComponentResult | None, n_files: int
) -> ComponentResult | None:
    """JSONPath and file checks score as one set of assertions: the fraction of all that hold."""
    present = [(part, n) for part, n in ((jsonpaths, n_jsonpaths), (files, n_files)) if part is not None]
    if not present:
        return None
    if len(present) == 1:
        return present[0][0]
    held = sum((part.score or 0.0) * n for part, n in present)
    segment = " | ".join(part.segment for part, _ in present)
    typed = [reason for part, _ in present for reason in part.reasons()]
    return ComponentResult("checks", held / (n_jsonpaths + n_files), segment, parts=typed)


def _split(messages: Sequence[Message] | None) -> tuple[str | None, list[Message] | None]:
    """The leading system message (the agent's policy) and the rest; (None, None) when none was sent."""
    if messages is None:
        return None, None
    return split_leading_system_message(list(messages))


def _transcript_dicts(messages: list[Message] | None) -> list[dict[str, Any]]:
    return json.loads(encode_transcript_wire(messages)) if messages else []


def _requested_components(trial_id: str, components: frozenset[str]) -> set[str]:
    if not components:
        return set(COMPONENT_NAMES)
    unknown = sorted(components - set(COMPONENT_NAMES))
    if unknown:
        raise NotGradeable(
            trial_id, ValueError(f"grading_components names {unknown}; known: {', '.join(COMPONENT_NAMES)}")
        )
    return set(components)


def _skip_unrequested(ledger: KeyLedger, config: GradingConfig, component: str) -> None:
    keys = [key for key in populated_scored_keys(config) if key.split(".")[0] == component]
    ledger.skip("skipped: not requested by grading_components", *keys)


def _configured_components(ledger: KeyLedger) -> list[str]:
    """Components the pack asked a score of: evaluated, or skipped for want of evidence.

    A deliberately disabled key (custom checks not enabled, hash not enabled, not requested) asks
    for nothing, so a grade made only of those is the non-scoring shape, not a failure.
    """
    asked = {key.split(".")[0] for key in ledger.evaluated}
    asked |= {key.split(".")[0] for key, reason in ledger.skipped.items() if reason in _EVIDENCE_SKIPS}
    return sorted(asked)


def _check_evidence(trial: TrialContext, messages: list[Message] | None) -> CheckEvidence:
    task = trial.spec.task
    return CheckEvidence(
        final_state=present(trial.state.mirror.tables),
        transcript=_transcript_dicts(messages),
        initial_state=present(task.initial_state.tables),
        task={
            "task_id": task.task_id,
            "name": task.name,
            "description": task.description,
            "category": task.category,
        },
        failed_call_ids=tuple(call.call_id for call in trial.history if call.status != "success"),
    )


def _code_root(trial: TrialContext) -> Path | None:
    return trial.files.code_root
