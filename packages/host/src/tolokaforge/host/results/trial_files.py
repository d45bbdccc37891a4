"""Per-trial result files: ``trajectory.yaml``, ``grade.yaml`` and ``metrics.yaml``.

Layout: ``<output>/trials/<task_id>/<trial_index>/``. ``grade.yaml`` is written last and by rename,
so its presence means the trial is finished: ``--resume`` skips exactly those trials.

In ``grade.yaml`` a component the runner did not evaluate (the -1.0 sentinel, an absent components
message, an unset ``trace_checks``) is ``null``; a real 0.0 stays 0.0. A trial that was not graded
(an ending that never reaches GradeTrial, or a grade the runner refused) has ``score: null`` and says
why; it never carries a score the runner did not compute. A grade whose rubric judge ERRORED is such a
grade: its components and the judge's account are written, its score is ``null``.

When a judge ran, ``grade.yaml`` carries ``judge_status``, ``criterion_results`` and ``judge`` (its calls,
tokens, cost and tool calls), and the judge's own transcript is written beside it as
``judge_transcript.json``.

Each text is stored once and capped: a tool's output is the content of its tool message in
``messages``, and its ``tool_calls`` entry points there (``output_in_message``) instead of repeating it;
an output the message does not carry (a failed call's) is kept in the entry. A text longer than
:data:`MAX_STORED_CHARS` keeps its first :data:`MAX_STORED_CHARS` characters and a line saying how much
was cut. Secrets the host knows are redacted (redaction.py) before anything is cut or written. A
finished trial's record is signed (records.py) by whoever writes its files.

A call's attachments (a browser call's screenshots) are files of the record too, each written once
under ``attachments/`` (attachments.py); its tool message lists them as ``{path, media_type, label,
for_model}`` references.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from tolokaforge.contracts.runner import Grade, JudgeStatus
from tolokaforge.core.models import GradingConfig
from tolokaforge.core.runner_api import reason_messages
from tolokaforge.core.transcript import Message, ToolMessage

from ..results.outcome import Episode, TrialOutcome
from ..turns import AttachedToolMessage
from .attachments import attachment_path
from .records import JUDGE_TRANSCRIPT
from .redaction import Redactor
from .trace_results import trace_results_dict, trace_summary_dict
from .yaml_files import TrialFiles

__all__ = [
    "JUDGE_TRANSCRIPT",
    "MAX_STORED_CHARS",
    "NOT_EVALUATED",
    "WrittenTrial",
    "configured_components",
    "grade_to_dict",
    "is_finished",
    "render_trial",
    "stored_text",
    "trial_dir",
]

NOT_EVALUATED = -1.0
_LATER_COMPONENTS = ("env_assertions", "tau2_actions", "tau2_communicate", "terminal_tests", "web_checks")
MAX_STORED_CHARS = 1 << 20
"""The most characters of one text (a tool's output, its arguments, a message) a trial's files keep."""


def stored_text(text: str, redactor: Redactor | None = None) -> str:
    """``text`` as the results keep it: secrets redacted, then cut at :data:`MAX_STORED_CHARS`."""
    if redactor:
        text = redactor.text(text)
    if len(text) <= MAX_STORED_CHARS:
        return text
    return (
        text[:MAX_STORED_CHARS]
        + f"\n[tolokaforge: cut here: {len(text) - MAX_STORED_CHARS:,} of {len(text):,} characters not kept]"
    )


def trial_dir(output: Path, task_id: str, trial_index: int) -> Path:
    return output / "trials" / task_id / str(trial_index)


def is_finished(directory: Path) -> bool:
    return all((directory / name).is_file() for name in ("trajectory.yaml", "metrics.yaml", "grade.yaml"))


def _component(value: float | None) -> float | None:
    return None if value is None or value == NOT_EVALUATED else value


def configured_components(grading: GradingConfig) -> list[str]:
    """The components a task's grading asks a score of (a disabled block asks for none)."""
    state = grading.state_checks
    asked = {
        "state_checks": state is not None
        and (state.hash_enabled or bool(state.jsonpaths) or bool(state.files)),
        "transcript_rules": grading.transcript_rules is not None,
        "llm_judge": grading.llm_judge is not None,
        "custom_checks": grading.custom_checks is not None and grading.custom_checks.enabled,
        "trace_checks": grading.trace_checks is not None,
        "env_assertions": grading.env_assertions is not None,
        "tau2_actions": grading.tau2_actions is not None,
        "tau2_communicate": grading.tau2_communicate is not None,
        "terminal_tests": grading.terminal_tests is not None,
        "web_checks": grading.web_checks is not None,
    }
    return [name for name, wanted in asked.items() if wanted]


def grade_to_dict(
    grade: Grade, configured: Sequence[str] = (), *, judge_price_known: bool = True
) -> dict[str, Any]:
    """``configured`` names the components the task asks for; those left unscored are listed as such."""
    components = grade.components
    names = ("state_checks", "transcript_rules", "llm_judge", "custom_checks", "trace_checks")
    scores = {
        name: _component(getattr(components, name)) if components is not None else None for name in names
    }
    # Components only some tasks have are written only when evaluated: a task without them gets no such key.
    for name in _LATER_COMPONENTS:
        value = _component(getattr(components, name)) if components is not None else None
        if value is not None:
            scores[name] = value
    result: dict[str, Any] = {
        "graded": True,
        "binary_pass": grade.binary_pass,
        "score": grade.score,
        "components": scores,
        "unscored": [name for name in configured if scores.get(name) is None],
        "reasons": reason_messages(grade),
        "state_diff": json.loads(grade.state_diff_json) if grade.state_diff_json else None,
        "custom_checks": [
            {
                "check_name": row.check_name,
                "status": row.status,
                "score": row.score,
                "message": row.message,
                "details": json.loads(row.details_json) if row.details_json else None,
            }
            for row in grade.custom_checks
        ],
        "trace_check_results": trace_results_dict(grade),
        "trace_checks_summary": trace_summary_dict(grade),
        "component_items": [
            {
                "component": row.component,
                "index": row.index,
                "label": row.label,
                "met": row.met,
                "message": row.message,
                "details": json.loads(row.details_json) if row.details_json else None,
            }
            for row in grade.component_items
        ],
    }
    if grade.judge_status != JudgeStatus.UNSPECIFIED:
        result.update(_judge_fields(grade, judge_price_known))
    return result


def _judge_fields(grade: Grade, price_known: bool) -> dict[str, Any]:
    errored = grade.judge_status == JudgeStatus.ERRORED
    report = grade.judge_report
    fields: dict[str, Any] = {
        "judge_status": "errored" if errored else "completed",
        "criterion_results": [
            {"id": row.id, "met": row.met, "score": row.score, "justification": row.justification}
            for row in grade.criterion_results
        ],
        "judge": None
        if report is None
        else {
            "calls": report.calls,
            "prompt_tokens": report.prompt_tokens,
            "completion_tokens": report.completion_tokens,
            "reasoning_tokens": report.reasoning_tokens,
            "cost_usd": report.cost_usd if price_known else None,
            "tool_calls": report.tool_calls,
            "agent_system_prompt_shown": report.include_agent_system_prompt,
            "transcript": JUDGE_TRANSCRIPT if report.transcript_json else None,
        },
    }
    if errored:  # the judge gave no score: the grade is published without one
        fields.update(graded=False, binary_pass=False, score=None)
    return fields


def _readable_json(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False) + "\n"
    except ValueError:  # kept as the runner sent it: an audit channel is not rewritten
        return text


def _ungraded(outcome: TrialOutcome) -> dict[str, Any]:
    if outcome.grading_error is not None:
        reason = f"grading failed: {outcome.grading_error}"
    else:
        termination = outcome.termination.value if outcome.termination else "unknown"
        reason = f"not graded: the trial ended {termination}" + (
            f" ({outcome.episode.error})" if outcome.episode.error else ""
        )
    return {"graded": False, "binary_pass": False, "score": None, "components": None, "reasons": [reason]}


def _message(message: Message, attached: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"role": message.role, "content": message.content}
    if isinstance(message, ToolMessage):
        entry["tool_call_id"] = message.tool_call_id
        if attached:
            entry["attachments"] = attached
    elif getattr(message, "tool_calls", ()):
        entry["tool_calls"] = [
            {"id": call.id, "name": call.name, "arguments": call.arguments}
            for call in getattr(message, "tool_calls", ())
        ]
    return entry


@dataclass(frozen=True)
class _Attached:
    references: dict[int, list[dict[str, Any]]]
    """Per message position, its attachments' references (as the trajectory lists them)."""
    files: list[tuple[str, bytes]]
    """Each attachment's path in the trial's directory, and its bytes."""


def _attached(episode: Episode, redactor: Redactor | None) -> _Attached:
    """Every attachment of the episode's tool messages, named by the position of its call."""
    call_index = {call.call_id: index for index, call in enumerate(episode.calls)}
    references: dict[int, list[dict[str, Any]]] = {}
    files: list[tuple[str, bytes]] = []
    taken: set[str] = set()
    for position, message in enumerate(episode.messages):
        if not isinstance(message, AttachedToolMessage):
            continue
        index = call_index.get(message.tool_call_id, position)
        for attachment in message.attachments:
            label = redactor.text(attachment.label) if redactor else attachment.label
            path = attachment_path(index, label, attachment.media_type, taken)
            taken.add(path)
            files.append((path, attachment.data))
            references.setdefault(position, []).append(
                {
                    "path": path,
                    "media_type": attachment.media_type,
                    "label": label,
                    "for_model": attachment.for_model,
                }
            )
    return _Attached(references, files)


def trajectory_dict(
    outcome: TrialOutcome, redactor: Redactor | None = None, attached: _Attached | None = None
) -> dict[str, Any]:
    """The trajectory document; each text stored once and capped, secrets redacted (module docstring)."""
    episode = outcome.episode
    references = (attached or _attached(episode, redactor)).references
    tool_messages = {
        message.tool_call_id: (position, message.content)
        for position, message in enumerate(episode.messages)
        if isinstance(message, ToolMessage)
    }

    def output(call_id: str, text: str) -> dict[str, Any]:
        position, content = tool_messages.get(call_id, (None, None))
        if position is not None and text and text == content:
            return {"output_in_message": position}
        return {"output": text}

    document: dict[str, Any] = {
        "trial_id": outcome.trial_id,
        "task_id": outcome.task_id,
        "trial_index": outcome.trial_index,
        "termination_reason": episode.termination.value if episode.termination else None,
        "error": episode.error,
        "grading_error": outcome.grading_error,
        "lost_attempts": [{"trial_id": lost.trial_id, "error": lost.error} for lost in outcome.lost_attempts],
        "messages": [
            _message(message, references.get(position)) for position, message in enumerate(episode.messages)
        ],
        "tool_calls": [
            {
                "call_id": call.call_id,
                "name": call.name,
                "executor": call.executor,
                "arguments": call.arguments_json,
                "status": call.status,
                **output(call.call_id, call.output),
                "error": call.error or None,
                "error_category": call.error_category or None,
                "error_details": call.error_details or None,
                "latency_s": round(call.latency_s, 6),
            }
            for call in episode.calls
        ],
    }
    return _kept(document, redactor)


def _kept(value: Any, redactor: Redactor | None) -> Any:
    """``value`` with every string as :func:`stored_text` keeps it (keys are redacted, never cut): one
    walk over the document, each text redacted before it is cut, so no part of a secret survives a cut."""
    if isinstance(value, str):
        return stored_text(value, redactor)
    if isinstance(value, dict):
        items = cast(dict[Any, Any], value).items()
        return {
            redactor.text(key) if redactor and isinstance(key, str) else key: _kept(item, redactor)
            for key, item in items
        }
    if isinstance(value, list | tuple):
        return [_kept(item, redactor) for item in cast(Iterable[Any], value)]
    return value


def metrics_dict(outcome: TrialOutcome) -> dict[str, Any]:
    usage = outcome.usage
    by_status: dict[str, int] = {}
    for call in outcome.episode.calls:
        by_status[call.status] = by_status.get(call.status, 0) + 1
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        "cost_usd": usage.cost_usd,
        "llm_calls": usage.llm_calls,
        "llm_retries": usage.llm_retries,
        "retry_log": usage.retry_log,
        "by_model": {
            model: {
                "prompt_tokens": spend.prompt_tokens,
                "completion_tokens": spend.completion_tokens,
                "llm_calls": spend.llm_calls,
                "cost_usd": spend.cost_usd,
            }
            for model, spend in usage.by_model.items()
        },
        "wall_time_s": round(outcome.wall_time_s, 6),
        "attempts": len(outcome.lost_attempts) + 1,
        "assistant_turns": outcome.episode.assistant_turns,
        "tool_calls": len(outcome.episode.calls),
        "tool_calls_by_status": by_status,
        # Every failed call was answered and the trial went on; the last two are the model's own
        # mistakes, which a reader compares across models without summing statuses by hand.
        "tool_errors": outcome.episode.tool_errors,
        "unknown_tool_calls": by_status.get("TOOL_NOT_FOUND", 0),
        "invalid_argument_calls": by_status.get("INVALID_ARGUMENTS", 0),
    }


@dataclass(frozen=True)
class WrittenTrial:
    """What :func:`render_trial` rendered, as the documents themselves (the summary's row is built from them)."""

    directory: Path
    trajectory: dict[str, Any]
    metrics: dict[str, Any]
    grade: dict[str, Any] | None
    """None when no grade.yaml was written (the trial is unfinished)."""


def render_trial(
    output: Path,
    outcome: TrialOutcome,
    configured: Sequence[str] = (),
    *,
    finished: bool = True,
    redactor: Redactor | None = None,
) -> tuple[WrittenTrial, TrialFiles]:
    """The trial's documents, and its files to write; unfinished (infrastructure ended it): no grade.yaml.
    ``redactor`` clears the secrets the host knows from every document."""
    directory = trial_dir(output, outcome.task_id, outcome.trial_index)
    attached = _attached(outcome.episode, redactor)
    trajectory = trajectory_dict(outcome, redactor, attached)
    metrics = metrics_dict(outcome)
    if redactor:
        metrics = redactor.value(metrics)
    documents: list[tuple[str, dict[str, Any] | str | bytes]] = [
        ("trajectory.yaml", trajectory),
        ("metrics.yaml", metrics),
        *attached.files,  # images, as the call produced them: nothing in them is redacted or cut
    ]
    key = (outcome.task_id, outcome.trial_index)
    if not finished:
        files = TrialFiles(directory, tuple(documents), False, *key)
        return WrittenTrial(directory, trajectory, metrics, None), files
    if outcome.grade is not None and outcome.grade.judge_report is not None:
        transcript = outcome.grade.judge_report.transcript_json
        if transcript:
            text = _readable_json(transcript)
            documents.append((JUDGE_TRANSCRIPT, redactor.text(text) if redactor else text))
    grade = (
        grade_to_dict(outcome.grade, configured, judge_price_known=outcome.judge_price_known)
        if outcome.grade is not None
        else _ungraded(outcome)
    )
    grade["trial_id"] = outcome.trial_id
    if redactor:
        grade = redactor.value(grade)
    documents.append(("grade.yaml", grade))  # last: its presence marks the trial finished
    files = TrialFiles(directory, tuple(documents), True, *key)
    return WrittenTrial(directory, trajectory, metrics, grade), files
