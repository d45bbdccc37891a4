"""Our trajectory and grade as τ²-bench's messages and ``RewardInfo`` (one trial; export.py does the run).

- Messages: the transcript without its system message (τ² keeps the agent's prompt out of the
  trajectory); assistant and user messages with their ``ToolCall(id, name, arguments, requestor)``, each
  call followed by its ``ToolMessage(id, content, requestor, error)`` in call order, ``error`` when the
  call's status is not SUCCESS.
- Termination: :data:`TERMINATIONS`. Reward: our grade's score; per type of the task's reward basis, our
  component's score (:data:`COMPONENTS`) when the grade evaluated it, and τ²'s per-item checks from the
  grade's ``component_items``.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, cast

from ...errors import ConfigError

__all__ = [
    "COMPONENTS",
    "TERMINATIONS",
    "tau2_messages",
    "tau2_module",
    "tau2_reward_info",
    "tau2_termination",
]


TERMINATIONS: dict[str, str] = {
    "agent_done": "agent_stop",
    "user_stop": "user_stop",
    "max_turns": "max_steps",
    "too_many_errors": "too_many_errors",
    # A budget ran out before either side finished: τ²'s budget is its step count.
    "timeout": "max_steps",
    # The agent's or the user's model, or the harness, failed: τ² records a simulation that failed as
    # AGENT_ERROR (run.py, skip_failed_samples); our results do not say which side failed.
    "error": "agent_error",
    # Only without τ²'s conversation rules (which answer an unknown tool): the agent's call failed the run.
    "tool_not_found": "agent_error",
    "trial_lost": "agent_error",
}
"""Our termination reason -> τ²'s ``TerminationReason`` value. A reason not listed maps to ``agent_error``."""

COMPONENTS: dict[str, str] = {
    "DB": "state_checks",
    "ENV_ASSERTION": "env_assertions",
    "ACTION": "tau2_actions",
    "COMMUNICATE": "tau2_communicate",
}
"""τ²'s reward type -> the grade component that scores it (packs/tau2/grading.py)."""

_SCORED_ENDINGS = frozenset({"agent_stop", "user_stop"})
"""τ²'s evaluator scores only simulations that ended so; others get reward 0 and no breakdown."""

_MATCH = 1e-6
"""τ²'s ``is_successful``: a reward within this of 1 is a success."""


def tau2_module(module: str) -> Any:
    """A τ² module, imported on first use (the data models need no litellm; keep it offline anyway)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        raise ConfigError(
            f"τ²-bench is not installed ({error}); install it with: pip install 'tolokaforge-host[tau2]'"
        ) from error


def tau2_termination(reason: str | None) -> str:
    """τ²'s termination reason (its value) for ours; see :data:`TERMINATIONS`."""
    return TERMINATIONS.get(reason or "", "agent_error")


# ------------------------------------------------------------------------------------------- messages


def _requestor(executor: Any, role: str) -> str:
    if executor == "user" or (executor is None and role == "user"):
        return "user"
    return "assistant"


def _arguments(call: Mapping[str, Any], record: Mapping[str, Any] | None) -> dict[str, Any]:
    arguments = call.get("arguments")
    if isinstance(arguments, dict):
        return cast(dict[str, Any], arguments)
    raw = record.get("arguments") if record is not None else None
    if isinstance(raw, str):
        try:
            decoded = json.loads(raw)
        except ValueError:
            decoded = None
        if isinstance(decoded, dict):
            return cast(dict[str, Any], decoded)
    return {}


def _answer_text(record: Mapping[str, Any] | None, messages: Sequence[Mapping[str, Any]]) -> str:
    """A call's answer when no tool message carries it: where its record says, else its error."""
    if record is None:
        return "Error: the call was never answered (tolokaforge: no result recorded)"
    position = record.get("output_in_message")
    if isinstance(position, int) and 0 <= position < len(messages):
        return str(messages[position].get("content") or "")
    if record.get("output") is not None:
        return str(record["output"])
    return f"Error: {record.get('error') or record.get('status') or 'failed'}"


def tau2_messages(trajectory: Mapping[str, Any]) -> list[Any]:
    """The transcript of ``trajectory.yaml`` as τ²'s messages (module docstring): no system message,
    each call's ``ToolMessage`` right after the message that made it, in call order."""
    message_module = tau2_module("tau2.data_model.message")
    raw = [cast(Mapping[str, Any], m) for m in cast(list[Any], trajectory.get("messages") or [])]
    records = {
        str(record.get("call_id")): record
        for record in (
            cast(Mapping[str, Any], r) for r in cast(list[Any], trajectory.get("tool_calls") or [])
        )
    }
    answers = {str(m.get("tool_call_id")): m for m in raw if m.get("role") == "tool"}
    placed: set[str] = set()
    out: list[Any] = []

    def tool_message(call_id: str, requestor: str) -> Any:
        record = records.get(call_id)
        answer = answers.get(call_id)
        content = str(answer.get("content") or "") if answer is not None else _answer_text(record, raw)
        failed = record is not None and record.get("status") not in (None, "SUCCESS")
        return message_module.ToolMessage(
            id=call_id,
            role="tool",
            content=content,
            requestor=requestor,
            error=failed or (record is None and answer is None),
            turn_idx=len(out),
            timestamp=None,
        )

    for message in raw:
        role = message.get("role")
        if role == "system":
            continue
        if role == "tool":
            call_id = str(message.get("tool_call_id"))
            if call_id in placed:
                continue
            record = records.get(call_id)
            placed.add(call_id)  # an answer to no call of the transcript: kept where it was
            out.append(
                tool_message(call_id, _requestor(record.get("executor") if record else None, "assistant"))
            )
            continue
        if role not in ("assistant", "user"):
            continue
        calls = [cast(Mapping[str, Any], c) for c in cast(list[Any], message.get("tool_calls") or [])]
        content = message.get("content")
        text = str(content) if content is not None else None
        tool_calls = [
            message_module.ToolCall(
                id=str(call.get("id")),
                name=str(call.get("name")),
                arguments=_arguments(call, records.get(str(call.get("id")))),
                requestor=_requestor(
                    (records.get(str(call.get("id"))) or {}).get("executor"), cast(str, role)
                ),
            )
            for call in calls
        ]
        kind = message_module.AssistantMessage if role == "assistant" else message_module.UserMessage
        out.append(
            kind(
                role=role,
                content=(text or None) if tool_calls else text,
                tool_calls=tool_calls or None,
                turn_idx=len(out),
                timestamp=None,
            )
        )
        for call in tool_calls:
            placed.add(call.id)
            out.append(tool_message(call.id, call.requestor))
    return out


# --------------------------------------------------------------------------------------------- reward


def _items(grade: Mapping[str, Any], component: str) -> dict[int, Mapping[str, Any]]:
    items = (cast(Mapping[str, Any], item) for item in cast(list[Any], grade.get("component_items") or []))
    return {int(item.get("index") or 0): item for item in items if item.get("component") == component}


def _ours(grade: Mapping[str, Any] | None) -> dict[str, Any]:
    if grade is None:
        return {"graded": False, "score": None, "components": None, "reasons": []}
    return {
        "graded": bool(grade.get("graded")),
        "binary_pass": bool(grade.get("binary_pass")),
        "score": grade.get("score"),
        "components": grade.get("components"),
        "reasons": grade.get("reasons") or [],
    }


def tau2_reward_info(grade: Mapping[str, Any] | None, task: Any, termination: str) -> Any:
    """τ²'s ``RewardInfo`` for one trial: our grade's score, and its components per τ² reward type.

    ``grade`` is ``grade.yaml`` (None: the trial has none to trust), ``task`` τ²'s Task, ``termination``
    τ²'s termination value (:func:`tau2_termination`)."""
    simulation = tau2_module("tau2.data_model.simulation")
    graded = grade is not None and bool(grade.get("graded")) and grade.get("score") is not None
    reward = float(cast(Mapping[str, Any], grade)["score"]) if graded else 0.0
    ours = _ours(grade)
    if termination not in _SCORED_ENDINGS:
        note = f"Simulation terminated prematurely. Termination reason: {termination}"
        return simulation.RewardInfo(
            reward=reward, reward_basis=None, info={"note": note, "tolokaforge": ours}
        )
    criteria = task.evaluation_criteria
    if criteria is None:
        return simulation.RewardInfo(
            reward=reward, reward_basis=None, info={"note": "No evaluation criteria", "tolokaforge": ours}
        )
    components = cast(Mapping[str, Any], (grade or {}).get("components") or {})
    breakdown: dict[Any, float] = {}
    for kind in criteria.reward_basis:
        value = components.get(COMPONENTS.get(str(kind.value), ""))
        if value is not None:
            breakdown[kind] = float(value)
    db = components.get("state_checks")
    if db is not None:
        db_check = simulation.DBCheck(db_match=abs(float(db) - 1.0) <= _MATCH, db_reward=float(db))
    elif criteria.actions is None and criteria.env_assertions is None:  # τ²: nothing to compare, a match
        db_check = simulation.DBCheck(db_match=True, db_reward=1.0)
    else:
        db_check = None
    checks = _item_checks(simulation, grade or {}, criteria)
    return simulation.RewardInfo(
        reward=reward,
        db_check=db_check,
        reward_basis=list(criteria.reward_basis),
        reward_breakdown=breakdown,
        info={"tolokaforge": ours},
        **checks,
    )


def _item_checks(simulation: Any, grade: Mapping[str, Any], criteria: Any) -> dict[str, Any]:
    """τ²'s per-item checks from our ``component_items`` (each item names its index in τ²'s list)."""
    checks: dict[str, Any] = {}
    assertions = list(criteria.env_assertions or [])
    items = _items(grade, "env_assertions")
    if items:
        checks["env_assertions"] = [
            simulation.EnvAssertionCheck(
                env_assertion=assertions[index],
                met=bool(item.get("met")),
                reward=1.0 if item.get("met") else 0.0,
            )
            for index, item in sorted(items.items())
            if index < len(assertions)
        ]
    actions = list(criteria.actions or [])
    items = _items(grade, "tau2_actions")
    if items:
        checks["action_checks"] = [
            simulation.ActionCheck(
                action=actions[index],
                action_match=bool(item.get("met")),
                action_reward=1.0 if item.get("met") else 0.0,
            )
            for index, item in sorted(items.items())
            if index < len(actions)
        ]
    info = list(criteria.communicate_info or [])
    items = _items(grade, "tau2_communicate")
    if items:
        checks["communicate_checks"] = [
            simulation.CommunicateCheck(
                info=info[index], met=bool(item.get("met")), justification=str(item.get("message") or "")
            )
            for index, item in sorted(items.items())
            if index < len(info)
        ]
    return checks
