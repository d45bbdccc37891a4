"""Env assertions: tools called on a scratch copy of the trial's final state, their answers compared.

Each assertion names a tool (usually a hidden one, never offered to the model), its arguments, the
executor whose tools it belongs to and the value it must answer. With the trial locked, the trial's
state is kept aside (kept_state.py) and the mirror works on a copy of the very same tables; the
assertions run there in order, unrecorded, each seeing what the previous ones wrote, as τ²-bench
runs its assertions one after another on one environment. Then the trial's state is put back, so
the hash replay and the JSONPath checks that follow see exactly what the agent left.

An assertion holds when its tool's output, read as JSON, equals ``expected`` as JSON (``true`` is
not ``1``). A call that does not succeed, or whose output is not JSON, is not a verdict on the
agent: grading fails naming the assertion (:class:`EnvAssertionFailed`), never scoring it 0.
"""

from __future__ import annotations

import json
from typing import Any

from tolokaforge.contracts.runner import ExecutionStatus
from tolokaforge.core.json_values import json_equal
from tolokaforge.core.models import EnvAssertion, EnvAssertionsConfig

from ..calls.executor import ToolExecutor
from ..errors import EnvAssertionFailed
from ..trials.context import TrialContext
from .component import ITEMS, ComponentResult, ItemResult
from .kept_state import kept_trial_state

__all__ = ["PRE_ASSERTIONS_SNAPSHOT", "evaluate_env_assertions"]

PRE_ASSERTIONS_SNAPSHOT = "tolokaforge.pre_assertions"


async def evaluate_env_assertions(
    trial: TrialContext, executor: ToolExecutor, config: EnvAssertionsConfig
) -> ComponentResult:
    """1.0 when every assertion holds, else 0.0; :class:`EnvAssertionFailed` when one cannot be evaluated."""
    answers: list[Any] = []
    if config.assertions:
        async with trial.lock:
            await trial.state.mirror.refresh()
            async with kept_trial_state(trial, PRE_ASSERTIONS_SNAPSHOT) as kept:
                if kept.saved is None:
                    await trial.state.mirror.reload()  # out of step: work on what the store holds
                else:
                    # The same tables, shared: the first write to one copies it, so what was set aside stays.
                    trial.state.mirror.start_from(kept.saved.tables, kept.saved.version)
                for index, assertion in enumerate(config.assertions):
                    answers.append(await _answer(trial, executor, index, assertion))
    items = [
        _item(index, assertion, answer)
        for index, (assertion, answer) in enumerate(zip(config.assertions, answers, strict=True))
    ]
    failures = [f"[{item.index}] {item.label}: {item.message}" for item in items if not item.met]
    if not items:
        segment = "Env assertions: nothing to check"
    elif failures:
        segment = f"Env assertions: {len(items) - len(failures)}/{len(items)} hold; " + "; ".join(failures)
    else:
        segment = f"Env assertions: all {len(items)} hold"
    return ComponentResult("env_assertions", 0.0 if failures else 1.0, segment, extra={ITEMS: items})


async def _answer(trial: TrialContext, executor: ToolExecutor, index: int, assertion: EnvAssertion) -> Any:
    """The assertion tool's output, parsed as JSON."""
    outcome = await executor.call_locked(
        trial,
        call_id=f"env-assertion-{index}",
        tool_name=assertion.tool_name,
        arguments_json=json.dumps(assertion.arguments),
        executor=assertion.executor,
        record=False,
    )
    where = f"env_assertions[{index}] {assertion.tool_name} ({assertion.executor} tool)"
    if outcome.status != ExecutionStatus.SUCCESS:
        why = outcome.failure.message if outcome.failure else ""
        raise EnvAssertionFailed(
            trial.trial_id, f"{where} answered {outcome.status.name}: {why or 'no message'}"
        )
    try:
        return json.loads(outcome.output)
    except ValueError as error:
        raise EnvAssertionFailed(
            trial.trial_id, f"{where} answered {_cut(outcome.output)!r}, which is not JSON ({error})"
        ) from error


def _item(index: int, assertion: EnvAssertion, answer: Any) -> ItemResult:
    label = assertion.message or assertion.tool_name
    details = {"tool_name": assertion.tool_name, "expected": assertion.expected, "actual": answer}
    if json_equal(answer, assertion.expected):
        return ItemResult("env_assertions", index, label, True, "holds", details)
    expected, actual = _cut(json.dumps(assertion.expected)), _cut(json.dumps(answer))
    return ItemResult("env_assertions", index, label, False, f"expected {expected}, got {actual}", details)


def _cut(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"
