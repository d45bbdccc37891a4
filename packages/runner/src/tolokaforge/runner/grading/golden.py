"""Resolve golden-action names against the trial's registered tools, before anything is written.

Golden actions are authored unprefixed; a trial may register prefixed names (``shop_place_order``).
A name resolves, among the tools of the action's executor (the agent's, or the simulated user's), to
the exact registered name, or else to the single registered name ending in ``_<name>``. Anything
else -- no match, several matches, an empty name -- is a pack defect, and all such actions are
reported together.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tolokaforge.core.models import GoldenAction

from ..errors import UnresolvableGoldenAction

__all__ = ["resolve_golden_action_names"]


def resolve_golden_action_names(
    actions: Sequence[GoldenAction], registered: Iterable[str], *, user_registered: Iterable[str] = ()
) -> list[str]:
    """Each action's registered name; ``registered`` are the agent's tools, ``user_registered`` the user's."""
    by_executor = {"agent": list(registered), "user": list(user_registered)}
    resolved: list[str] = []
    problems: list[str] = []
    for index, action in enumerate(actions):
        name = action.tool_name
        names = by_executor[action.executor]
        side = "" if action.executor == "agent" else " (user tool)"
        if not name:
            problems.append(f"[{index}] names no tool")
            continue
        if name in names:
            resolved.append(name)
            continue
        suffixed = [candidate for candidate in names if candidate.endswith(f"_{name}")]
        if len(suffixed) == 1:
            resolved.append(suffixed[0])
        elif suffixed:
            problems.append(f"[{index}] {name!r}{side} matches several tools ({', '.join(sorted(suffixed))})")
        else:
            problems.append(f"[{index}] {name!r}{side}")
    if problems:
        listed = f"registered: {', '.join(by_executor['agent']) or 'none'}"
        if any(action.executor == "user" for action in actions):
            listed += f"; user tools: {', '.join(by_executor['user']) or 'none'}"
        raise UnresolvableGoldenAction(
            f"golden actions naming no tool the replay can call: {'; '.join(problems)} ({listed})"
        )
    return resolved
