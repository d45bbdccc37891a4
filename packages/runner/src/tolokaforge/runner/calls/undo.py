"""Undoing a failed call, and the store's failures told apart from the tool's.

A call that failed after it wrote (a remote tool, a browser call past its budget) is undone by
committing the batch that turns the store's tables back into the ones set aside before it. A
failure of the state store is an infrastructure failure: retryable, and never the tool's fault.
"""

from __future__ import annotations

from tolokaforge.contracts.runner import ExecutionStatus
from tolokaforge.contracts.tool import ToolErrorCategory
from tolokaforge.db import DBServiceError, StoreUnreachableError

from ..errors import ToolFailure
from ..state.mirror import SetAside
from ..tools.remote import ToolSourceSession
from ..tools.state_sync import StateSyncing, changes_to
from ..trials.context import TrialContext

__all__ = ["RollbackFailed", "infrastructure_failure", "restore"]


def infrastructure_failure(error: DBServiceError, what: str) -> ToolFailure:
    """The store failed, not the tool: retryable, and marked so the host never blames the tool."""
    unknown = isinstance(error, StoreUnreachableError) and error.outcome_unknown
    return ToolFailure(
        ExecutionStatus.ERROR,
        ToolErrorCategory.UNKNOWN,
        f"{what}: {error.message}" + (" (the call's outcome is unknown)" if unknown else ""),
        retryable=True,
        # The wire's mark (docs/protocol/runner.md); in this process the flag is the signal.
        details={"infrastructure": "state_store", "outcome_unknown": unknown, "store_error": error.to_body()},
        infrastructure=True,
    )


class RollbackFailed(Exception):
    """Undoing a failed call failed (the store is unreachable): the call ends as an infrastructure failure."""

    def __init__(self, failure: ToolFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


async def restore(trial: TrialContext, source: ToolSourceSession | None, before: SetAside) -> None:
    """Put the trial back to ``before`` (its state when the call began): store, mirror and a syncing server.

    Nothing is written when the store did not move (a python-like failure); otherwise the batch that
    turns the store's tables back into ``before``'s is committed, so the hashes equal the pre-call
    ones (the version moves on: versions are never reused). One version read on every failure; the
    state's size is paid only when the failed call wrote.
    """
    mirror, client = trial.state.mirror, trial.state.mirror.client
    moved = (await client.get_hashes(trial.trial_id)).version
    if moved != before.version:
        state = await client.get_state(trial.trial_id)
        changes = changes_to(state.tables, before.tables)
        version = (
            await client.patch(trial.trial_id, changes, expected_version=state.version)
            if changes
            else state.version
        )
        mirror.put_back(before, version)
    if isinstance(source, StateSyncing) and source.syncs_state and source.running:
        # Its own tables may hold what the failed call did. A dead server gets the trial's at restart.
        try:
            await source.push_state(before.tables)
        except ToolFailure:
            await source.recycle()
