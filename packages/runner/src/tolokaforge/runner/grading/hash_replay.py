"""Hash grading: replay the golden path on fresh state and compare stable hashes.

snapshot -> reset to the initial state -> replay golden actions through the trial's own tools (golden
``browser`` calls on a fresh page of their own) ->
stable hash -> restore -> compare with the trial's stable hash (and diff the two states on a mismatch).
The snapshot and the restore are kept_state.py's, so grading the same trial twice finds the store as
it left it the first time.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from tolokaforge.contracts.runner import ExecutionStatus
from tolokaforge.core.models import GoldenAction
from tolokaforge.core.state_diff import diff_states

from ..calls.browser_calls import browser_replay
from ..calls.executor import ToolExecutor
from ..errors import HashGradingFailed
from ..tools.state_sync import push_state
from ..trials.context import INITIALIZED_SNAPSHOT, TrialContext
from ..trials.golden_memo import GoldenOutcome, MemoKey
from .component import ComponentResult
from .kept_state import kept_trial_state

__all__ = ["PRE_GOLDEN_SNAPSHOT", "grade_hash"]

PRE_GOLDEN_SNAPSHOT = "tolokaforge.pre_golden"


async def grade_hash(
    trial: TrialContext,
    executor: ToolExecutor,
    actions: Sequence[GoldenAction],
    resolved: Sequence[str],
    *,
    golden_errors: Literal["fail", "keep"] = "fail",
) -> ComponentResult:
    """The hash verdict (1.0 match / 0.0 mismatch) with the state diff on a mismatch.

    Each golden action runs through its own executor's tools (``GoldenAction.executor``). A golden
    call that does not succeed fails grading, unless ``golden_errors`` is "keep" and the tool itself
    answered the error (a ReportedError, whose changes were committed): that step then stands as
    written and the replay goes on.

    The mirror makes this cost what the trial and the golden path changed: the trial's tables are set
    aside (not copied), the replay starts from the task's shared initial tables (not a reload), and a
    mismatch is explained by diffing the two mirrors, whose untouched tables and records are the same
    objects. A mirror out of step with the store (a foreign write) falls back to reading the store.
    Once two trials' replays of the task agree, later trials compare with that outcome instead of
    replaying (golden_memo.py).
    """
    key = memo_key(trial)
    reused = None if key is None or trial.golden_memo is None else trial.golden_memo.trusted(key)
    if reused is not None:
        return await _compare_with(trial, reused)
    client = trial.state.mirror.client
    trial_id = trial.trial_id
    async with trial.lock:
        await trial.state.mirror.refresh()
        trial_hashes = await client.get_hashes(trial_id)
        golden_state: Mapping[str, Any] | None = None
        golden_from_mirror = False
        async with kept_trial_state(trial, PRE_GOLDEN_SNAPSHOT) as kept:
            if trial.state.has_initialized_snapshot:
                start = await client.restore_snapshot(trial_id, INITIALIZED_SNAPSHOT)
            else:
                start = await client.reset(trial_id)
            trial.state.mirror.start_from(trial.state.start_tables, start.version)
            await push_state(trial.tools.sources, trial.state.mirror.tables)
            async with browser_replay(trial):  # golden browser calls: a fresh page, not the trial's
                for index, (name, action) in enumerate(zip(resolved, actions, strict=True)):
                    outcome = await executor.call_locked(
                        trial,
                        call_id=f"golden-{index}",
                        tool_name=name,
                        arguments_json=json.dumps(action.arguments),
                        executor=action.executor,
                        record=False,
                    )
                    if outcome.status == ExecutionStatus.SUCCESS or (
                        golden_errors == "keep" and outcome.reported
                    ):
                        continue
                    why = outcome.failure.message if outcome.failure else outcome.status.name
                    raise HashGradingFailed(f"golden action [{index}] {name} failed to replay: {why}")
            golden = await client.get_hashes(trial_id)
            in_step = golden.version == trial.state.mirror.version and not trial.state.mirror.stale
            golden_tables = trial.state.mirror.share() if in_step else None
            if key is not None and trial.golden_memo is not None and golden_tables is not None:
                outcome = GoldenOutcome(golden.stable_hash, golden_tables, trial.state.start_tables)
                trial.golden_memo.record(key, outcome)
            if golden.stable_hash != trial_hashes.stable_hash:
                if golden_tables is not None:
                    golden_state, golden_from_mirror = golden_tables, True
                else:
                    golden_state = (await client.get_state(trial_id)).tables
        if golden_state is None:
            return ComponentResult("hash", 1.0, "State: hash match")
        saved = kept.saved
        shared = saved is not None and golden_from_mirror
        trial_state = (
            trial.state.mirror.share() if saved is not None else (await client.get_state(trial_id)).tables
        )
    return _mismatch(trial, golden_state, trial_state, trial.state.start_tables if shared else None)


def memo_key(trial: TrialContext) -> MemoKey | None:
    """What a golden outcome of ``trial`` is kept under, or None: this trial's replay is not reusable
    (golden_memo.py says which trials are)."""
    if trial.golden_memo is None or trial.tools.sources or trial.state.has_initialized_snapshot:
        return None
    if trial.state.initial_hash is None or trial.files.code_package is None:
        return None
    return (trial.state.initial_hash, trial.files.code_package)


async def _compare_with(trial: TrialContext, golden: GoldenOutcome) -> ComponentResult:
    """The verdict against a golden outcome reused from earlier replays of the task."""
    client = trial.state.mirror.client
    async with trial.lock:
        await trial.state.mirror.refresh()
        hashes = await client.get_hashes(trial.trial_id)
        if hashes.stable_hash == golden.stable_hash:
            return ComponentResult("hash", 1.0, "State: hash match")
        if hashes.version == trial.state.mirror.version and not trial.state.mirror.stale:
            trial_state: Mapping[str, Any] = trial.state.mirror.share()
        else:
            trial_state = (await client.get_state(trial.trial_id)).tables
    # The records of the task's shared start are the same objects on both sides only when this trial
    # started from the very tables the replay did.
    common = golden.base if golden.base is trial.state.start_tables else None
    return _mismatch(trial, golden.tables, trial_state, common)


def _mismatch(
    trial: TrialContext,
    golden_state: Mapping[str, Any],
    trial_state: Mapping[str, Any],
    common: Mapping[str, Any] | None,
) -> ComponentResult:
    unstable = {(f.table_name, f.field_name) for f in trial.spec.task.initial_state.unstable_fields}
    # Both states share the records of the replay's starting point: the diff looks only at the others.
    diff = diff_states(golden_state, trial_state, unstable, stable=True, common=common)
    # Stable states whose hashes differ always differ somewhere; "hash mismatch" is the honest fallback.
    summary = diff.summary() if diff else "hash mismatch"
    return ComponentResult("hash", 0.0, f"State: {summary}", extra={"state_diff": diff.to_json()})
