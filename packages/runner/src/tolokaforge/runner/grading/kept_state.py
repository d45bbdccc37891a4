"""Work on other state for a while, then put the trial's own state back exactly as it was.

Grading sometimes has to run tools on state that is not the trial's to keep: the golden replay starts
again from the initial tables, and env assertions call tools on a scratch copy of the final state.
:func:`kept_trial_state` is the one way both do it. With ``trial.lock`` held, it saves the trial's
state in the store as a named snapshot and sets the runner's mirror aside (no copy); whatever happens
inside the block, it restores the snapshot, deletes it, puts the mirror back and hands the restored
tables to any syncing tool server. A snapshot left over by a grading that died half-way is deleted
first, so grading the same trial again finds the store as it left it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from dataclasses import dataclass

from tolokaforge.db import NotFoundError

from ..state.mirror import SetAside
from ..tools.state_sync import push_state
from ..trials.context import TrialContext

__all__ = ["KeptState", "kept_trial_state"]


@dataclass(frozen=True, slots=True)
class KeptState:
    """What :func:`kept_trial_state` saved."""

    saved: SetAside | None
    """The trial's mirror, set aside; None when the mirror was out of step with the store (it is then
    re-read from the store on the way out instead of put back)."""


@contextlib.asynccontextmanager
async def kept_trial_state(trial: TrialContext, snapshot: str) -> AsyncGenerator[KeptState, None]:
    """Save the trial's state as ``snapshot``; restore it however the block ends. Hold ``trial.lock``."""
    client = trial.state.mirror.client
    trial_id = trial.trial_id
    # A snapshot left by a grading that died half-way would make create() answer 409.
    with contextlib.suppress(NotFoundError):
        await client.delete_snapshot(trial_id, snapshot)
    version = await client.create_snapshot(trial_id, snapshot)
    saved = trial.state.mirror.set_aside() if version == trial.state.mirror.version else None
    try:
        yield KeptState(saved)
    finally:
        restored = await client.restore_snapshot(trial_id, snapshot)
        await client.delete_snapshot(trial_id, snapshot)
        if saved is None:
            await trial.state.mirror.reload()
        else:
            trial.state.mirror.put_back(saved, restored.version)
        await push_state(trial.tools.sources, trial.state.mirror.tables)
