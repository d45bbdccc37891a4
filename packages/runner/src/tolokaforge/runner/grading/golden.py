"""Resolve golden-action names against the trial's registered tools, before anything is written.

Golden actions are authored unprefixed; a trial may register prefixed names (``shop_place_order``).
A name resolves to the exact registered name, or else to the single registered name ending in
``_<name>``. Anything else -- no match, several matches, an empty name -- is a pack defect, and all
such actions are reported together.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tolokaforge.core.models import GoldenAction

from ..errors import UnresolvableGoldenAction

__all__ = ["resolve_golden_action_names"]


def resolve_golden_action_names(actions: Sequence[GoldenAction], registered: Iterable[str]) -> list[str]:
    names = list(registered)
    resolved: list[str] = []
    problems: list[str] = []
    for index, action in enumerate(actions):
        name = action.tool_name
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
            problems.append(f"[{index}] {name!r} matches several tools ({', '.join(sorted(suffixed))})")
        else:
            problems.append(f"[{index}] {name!r}")
    if problems:
        raise UnresolvableGoldenAction(
            f"golden actions naming no tool the replay can call: {'; '.join(problems)} "
            f"(registered: {', '.join(names) or 'none'})"
        )
    return resolved
