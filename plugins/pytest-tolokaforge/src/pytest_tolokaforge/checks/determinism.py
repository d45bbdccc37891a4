"""``determinism``: two fresh trials replaying the golden path end with the same stable hash.

The first replay is the golden check's (shared); the second starts at least :data:`GAP_S` later, so a
field stamped from a seconds-resolution clock cannot agree by luck. When the hashes differ, the two
end states (read with their unstable fields) are compared field by field, and the differing fields
the task does not declare in ``initial_state.unstable_fields`` are named.
"""

from __future__ import annotations

import asyncio
import time

from tolokaforge.core.state_diff import diff_states

from ..errors import CheckFailure
from ..replay import golden_replay, judged_task
from .context import TaskContext

__all__ = ["GAP_S", "check"]

GAP_S = 1.05
"""Least time between the starts of the two replays."""


async def check(ctx: TaskContext) -> list[str]:
    task, _ = judged_task(ctx.loaded.task)
    first = await ctx.first_replay()
    wait = GAP_S - (time.monotonic() - first.started)
    if wait > 0:
        await asyncio.sleep(wait)
    second = await golden_replay(ctx.session, task, grade=False)
    for replay in (first, second):
        if not replay.stable_hash:
            raise CheckFailure(f"the golden path could not be replayed to an end state: {replay.error}")
    if first.stable_hash == second.stable_hash:
        return []
    unstable = {(field.table_name, field.field_name) for field in task.initial_state.unstable_fields}
    differences = diff_states(first.state, second.state, unstable).differences
    undeclared = [d for d in differences if not d.declared_unstable]
    declared = [d for d in differences if d.declared_unstable]
    if undeclared:
        fields = sorted({f"{d.table}.{d.field}" if d.field else f"{d.table}{d.record}" for d in undeclared})
        summary = (
            "two golden replays end with different stable hashes; "
            f"fields not declared unstable differ: {', '.join(fields)}"
        )
        hint = (
            "declare each in initial_state.unstable_fields ({table_name, field_name, reason}) "
            "or make the tool that writes it deterministic"
        )
    else:
        summary = "two golden replays end with different stable hashes, yet no undeclared field differs"
        hint = "the runner's stable hash disagrees with its own state read; this is a runner defect"
    lines = [
        summary,
        f"stable hash {first.stable_hash} ({first.trial_id}) vs {second.stable_hash} ({second.trial_id})",
        "differing fields not declared unstable:",
        *(f"  {d}" for d in undeclared),
        "differing fields declared unstable (expected):",
        *(f"  {d}" for d in declared),
        hint,
    ]
    raise CheckFailure(summary, "\n".join(lines))
